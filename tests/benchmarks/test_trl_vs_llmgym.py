"""benchmarks/trl_vs_llmgym.py in smoke mode: the tiny model, one timed update a side, three
sides (~15-45 s).

The sides run the same work: the same LoRA modules and trainable parameters, the same env
seeds, the same number of episodes and one optimizer step per update. No wall-clock
assertions."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("trl")

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "trl_vs_llmgym.py"


def test_trl_vs_llmgym_smoke_on_the_tiny_model(tmp_path):
    out = tmp_path / "trl_vs_llmgym.json"
    args = ["--model", "tiny", "--updates", "1", "--generations", "2", "--prompts", "2"]
    env = dict(os.environ, OMP_NUM_THREADS="1")
    done = subprocess.run(
        [sys.executable, str(SCRIPT), *args, "--output", str(out)],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    for side in ("llmgym", "llmgym-plain", "trl"):
        assert f"| {side} | 1 |" in done.stdout
    assert "llmgym / TRL:" in done.stdout and "llmgym-plain / TRL:" in done.stdout
    record = json.loads(out.read_text())
    assert record["config"]["episodes_per_update"] == 4
    assert record["same_lora"] and record["same_trainable_params"] and record["same_seeds"]
    assert record["differences"] and record["versions"]["trl"] and record["commit"]["sha"]
    assert record["sides"]["llmgym"]["frozen_trunk"] is True
    assert record["sides"]["llmgym-plain"]["frozen_trunk"] is False
    for side in ("llmgym", "llmgym-plain", "trl"):
        data = record["sides"][side]
        assert len(data["updates"]) == 2  # the warm-up and one timed update
        for update in data["updates"]:
            assert update["episodes"] == 4
            assert update["env_steps"] >= 4
            assert update["optimizer_steps"] == 1
            assert update["s"] > 0 and update["cpu_s"] > 0
        summary = data["summary"]
        assert summary["timed_updates"] == 1
        assert summary["env_steps_per_s"] > 0 and summary["env_steps_per_cpu_s"] > 0
        assert data["process"]["cpu_s"] > 0
    resolved = record["sides"]["trl"]["resolved"]
    assert resolved["generation_batch_size"] == resolved["per_device_train_batch_size"] == 4
    assert resolved["num_iterations"] == resolved["steps_per_generation"] == 1
    for key in ("ratio_llmgym_over_trl", "ratio_plain_over_trl"):
        ratio = record[key]
        assert set(ratio) >= {"env_steps_per_s", "env_steps_per_cpu_s", "s_per_update"}
        assert all(v > 0 for v in ratio.values())
