"""A missing optional package is one sentence that names the extra installing it, not a
traceback: ``llmgym eval`` of an LLM agent without torch; the bench without matplotlib writes
its table and says why there is no chart."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path


def _llmgym(blocked: str, args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    """``llmgym ARGS`` in a fresh process where ``import BLOCKED`` fails."""
    code = (
        f"import sys; sys.modules[{blocked!r}] = None\n"
        f"from llmgym.cli import main\nsys.argv = ['llmgym', *{args!r}]\nmain()"
    )
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=cwd)


def test_eval_without_torch_names_the_train_extra(tmp_path):
    done = _llmgym("torch", ["eval", "Text-Blackjack-v1", "--episodes", "2"], tmp_path)
    assert done.returncode == 2, done.stderr
    assert "needs torch, which is not installed: pip install 'llmgym[train]'." in done.stderr
    assert "Traceback" not in done.stderr


def test_bench_without_matplotlib_writes_the_table_and_no_chart(tmp_path):
    args = ["bench", "--envs", "Text-FrozenLake-v1", "--agents", "random", "--episodes", "3"]
    done = _llmgym("matplotlib", [*args, "--output", str(tmp_path / "b")], tmp_path)
    assert done.returncode == 0, done.stderr
    assert "no chart: matplotlib is not installed (pip install 'llmgym[baselines]')" in done.stdout
    assert (tmp_path / "b" / "leaderboard.md").is_file()
    assert not (tmp_path / "b" / "leaderboard.png").exists()
