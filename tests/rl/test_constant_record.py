"""``llmgym train --result-json`` labels a policy that ends constant and carries the best
constant policy's value (issue 35, item 4)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("peft")

sys.path.insert(0, str(Path(__file__).parents[1] / "support"))
from bandit import register  # noqa: E402

TINY = ["--model", "tiny", "--algo", "reinforce", "--episodes-per-update", "8", "--num-envs", "8"]
TINY += ["--final-eval-episodes", "8", "--eval-episodes", "8", "--no-progress", "--no-start-eval"]
TINY += ["--threads", "1"]


def _train(env_id: str, out: Path, record: Path) -> dict:
    from typer.testing import CliRunner

    from llmgym.cli import app

    args = ["train", env_id, *TINY, "--steps", "16", "--output", str(out)]
    result = CliRunner().invoke(app, [*args, "--result-json", str(record)])
    assert result.exit_code == 0, result.output
    data = json.loads(record.read_text())
    assert json.loads((out / "result.json").read_text()) == data
    return data


def _greedy_actions(weights: Path) -> set[str]:
    """The trained policy's greedy action in every Blackjack state, from its saved weights."""
    from llmgym.evaluation.exact import state_texts
    from llmgym.parsing import parse_discrete
    from llmgym.rl import load_trained_policy

    policy = load_trained_policy(str(weights), device="cpu")
    rows = state_texts("Text-Blackjack-v1")
    samples = policy.act([text for _, text, _ in rows], [info for *_, info in rows], greedy=True)
    names = ["stick", "hit"]
    return {names[int(parse_discrete(s.text, names).action)] for s in samples}


def test_blackjack_record_has_the_constant_keys(tmp_path):
    data = _train("Text-Blackjack-v1", tmp_path / "run", tmp_path / "record.json")
    assert data["eval_method"] == "exact"
    assert data["best_constant_value"] == pytest.approx(-0.1829, abs=5e-5)  # always stick
    taken = _greedy_actions(Path(data["weights"]))
    assert data["constant_policy"] == (taken.pop() if len(taken) == 1 else None)
    if data["constant_policy"] is not None:  # a constant policy's value is that constant's
        value = {"stick": -0.1829, "hit": -1.0}[data["constant_policy"]]
        assert data["eval_value"] == pytest.approx(value, abs=5e-5)


def test_a_record_without_exact_evaluation_has_nulls(tmp_path):
    data = _train(register("a"), tmp_path / "run", tmp_path / "record.json")
    assert data["best_constant_value"] is None and data["constant_policy"] is None
