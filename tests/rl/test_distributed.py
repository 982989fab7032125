"""Training in two processes (torchrun, gloo on CPU): one update equals the one-process update
on the same batch, and ``llmgym train`` writes its run once."""

from __future__ import annotations

import csv
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("accelerate")
from safetensors.torch import load_file  # noqa: E402

from llmgym.rl import ALGOS  # noqa: E402

ONE_UPDATE = Path(__file__).parents[1] / "support" / "one_update.py"
TORCHRUN = shutil.which("torchrun", path=str(Path(sys.executable).parent)) or shutil.which(
    "torchrun"
)
pytestmark = pytest.mark.skipif(TORCHRUN is None, reason="torchrun is not installed")


def _run(command: list[str]) -> str:
    env = os.environ | {"OMP_NUM_THREADS": "1"}
    result = subprocess.run(command, capture_output=True, text=True, env=env, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout


def _two_processes(*args: str) -> list[str]:
    return [TORCHRUN, "--standalone", "--nproc_per_node", "2", *args]


# PPO's case stays in `make test`; the others (16-18 s each) run under `make test-heavy`.
@pytest.mark.parametrize(
    "algo", [a if a == "ppo" else pytest.param(a, marks=pytest.mark.heavy) for a in ALGOS]
)
def test_two_processes_take_the_one_process_step(algo, tmp_path):
    _run([sys.executable, str(ONE_UPDATE), algo, str(tmp_path / "one")])
    _run(_two_processes(str(ONE_UPDATE), algo, str(tmp_path / "two")))
    one = load_file(tmp_path / "one" / "weights.safetensors")
    two = load_file(tmp_path / "two" / "weights.safetensors")
    assert one.keys() == two.keys() and any(k.startswith("action_head") for k in one)
    assert float(one["action_head.weight"].abs().max()) > 1e-6  # the update moved the head
    for key in one:
        torch.testing.assert_close(two[key], one[key], rtol=1e-4, atol=1e-6, msg=key)
    env_steps = [(tmp_path / d / "env_steps").read_text() for d in ("one", "two")]
    assert env_steps[0] == env_steps[1]  # counted over both processes


def test_llmgym_train_in_two_processes_writes_one_run_and_resumes(tmp_path):
    out = tmp_path / "run"

    def train(steps: int, *extra: str) -> None:
        printed = _run(_two_processes(*command, "--steps", str(steps), *extra))
        assert printed.count("GRPO on Text-Blackjack-v1") == 1  # one process speaks

    command = [
        "-m",
        "llmgym",
        "train",
        "Text-Blackjack-v1",
        "--model",
        "tiny",
        "--algo",
        "grpo",
        "--episodes-per-update",
        "16",
        "--num-envs",
        "8",
        "--eval-episodes",
        "8",
        "--final-eval-episodes",
        "8",
        "--no-progress",
        "--threads",
        "1",
        "--output",
        str(out),
        "--set",
        "group_size=4",
    ]
    train(60)
    run = json.loads((out / "run.json").read_text())
    assert run["num_processes"] == 2
    with (out / "metrics.csv").open() as f:
        rows = list(csv.DictReader(f))
    iterations = [r["iteration"] for r in rows if r.get("charts/episodic_return")]
    assert len(iterations) == len(set(iterations)) >= 2  # each iteration logged once
    result = json.loads((out / "result.json").read_text())
    assert result["episodes"] == 16 * int(result["updates"])  # both processes' episodes
    train(120, "--resume")
    resumed = json.loads((out / "result.json").read_text())
    assert resumed["resumed"] and resumed["env_steps"] >= 120 > result["env_steps"]
