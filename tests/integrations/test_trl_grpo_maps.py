"""examples/trl_grpo_maps.py: TRL GRPO on the train maps, a held-out curve, and --resume."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

pytest.importorskip("trl")
pytest.importorskip("torch")

SCRIPT = Path(__file__).resolve().parents[2] / "examples" / "trl_grpo_maps.py"
SMOKE = ["--model", "tiny", "--eval-every", "1", "--eval-maps", "2", "--max-turns", "2"]


def load_script():
    spec = importlib.util.spec_from_file_location("trl_grpo_maps", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_curve_from_the_zero_shot_point_and_a_resume_that_goes_on(tmp_path, capsys):
    script = load_script()
    out = tmp_path / "run"
    script.main([*SMOKE, "--steps", "2", "--output", str(out)])
    record = json.loads((out / "record.json").read_text())
    assert [p["step"] for p in record["curve"]] == [0, 1, 2]
    assert [p["episodes"] for p in record["curve"]] == [0, 16, 32]
    assert all(0 <= p["heldout_success"] <= 1 for p in record["curve"])
    assert [row["step"] for row in record["steps"]] == [1, 2]
    assert record["rollout_stats"]["episodes"] == 2 * 16
    assert (out / "checkpoint-2").is_dir()
    assert "step 0: held-out success" in capsys.readouterr().out

    script.main([*SMOKE, "--steps", "3", "--output", str(out), "--resume"])
    record = json.loads((out / "record.json").read_text())
    assert [p["step"] for p in record["curve"]] == [0, 1, 2, 3], "no point twice, none lost"
    assert [row["step"] for row in record["steps"]] == [1, 2, 3]
    assert record["commands"][-1].endswith("--resume")
    assert len(record["commands"]) == 2


def test_the_greedy_evaluation_is_deterministic_and_counts_answers():
    from llmgym.policy.testing import tiny_model

    script = load_script()
    model, tokenizer = tiny_model(0)
    model.train()
    first = script.heldout_success(model, tokenizer, 3, 3, 4)
    assert first == script.heldout_success(model, tokenizer, 3, 3, 4)
    success, parsed = first
    assert success in (0, 1 / 3, 2 / 3, 1) and 0 <= parsed <= 1
    assert model.training, "the model goes back to training mode"


@pytest.mark.parametrize(
    "bad", [["--eval-maps", "0"], ["--eval-maps", "101"], ["--steps", "0"], ["--eval-every", "0"]]
)
def test_bad_counts_exit_2(bad, tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_:
        load_script().main([*bad, "--output", str(tmp_path)])
    assert exit_.value.code == 2
    assert "must be" in capsys.readouterr().err
