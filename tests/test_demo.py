"""``make demo`` runs: the demo script end to end on the tiny random model (one update), so an
API change that breaks it fails here, not on a user's first command."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("peft")
ROOT = Path(__file__).parents[1]


def test_the_demo_runs_on_the_tiny_model(tmp_path):
    out = tmp_path / "demo"
    command = [sys.executable, str(ROOT / "examples" / "demo_blackjack.py"), "--model", "tiny"]
    command += ["--episodes", "40", "--output", str(out)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "zero-shot greedy policy, exact expected return:" in done.stdout
    summary = json.loads((out / "demo_result.json").read_text())
    assert summary["episodes"] == 40 and summary["eval_method"] == "exact"
    assert -1.0 - 1e-9 <= summary["eval_value"] <= 1.0 and (out / "learning_curve.png").is_file()
