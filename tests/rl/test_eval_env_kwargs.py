"""Evaluating elsewhere than training (issue 53 item 3): ``eval.env_kwargs`` /
``--eval-env-kwarg`` make the evaluation envs with their own kwargs over the run's, so a run
trains on a map set's ``train`` maps and its curve is the exact success on the held-out maps."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("peft")

from typer.testing import CliRunner  # noqa: E402

from llmgym.cli import app  # noqa: E402
from llmgym.envs.maps import maps_of  # noqa: E402
from llmgym.evaluation.exact import exact_value  # noqa: E402
from llmgym.rl import make_trainer  # noqa: E402

MAPS = "Text-FrozenLakeMaps4x4-Train-v0"


def test_the_evaluation_envs_play_the_held_out_maps_while_training_plays_the_train_maps(tmp_path):
    trainer = make_trainer(
        "ppo",
        env_id=MAPS,
        num_envs=2,
        output_dir=str(tmp_path / "run"),
        model="tiny",
        **{"eval.env_kwargs": {"map_set": "heldout"}},
    )
    train_maps = {tuple(m) for m in maps_of("train", 4)}
    heldout_maps = {tuple(m) for m in maps_of("heldout", 4)}
    _, info = trainer.envs[0].reset(seed=5)
    assert tuple(info["map"]) in train_maps
    _, info = trainer.evaluation.envs[0].reset(seed=5)
    assert tuple(info["map"]) in heldout_maps
    assert trainer.evaluation.kwargs == {"map_set": "heldout"}
    # the trainer's exact evaluation is the map-set evaluator's on the held-out maps
    got = trainer.evaluate()["mean_return"]

    def act(observations, infos):
        return [s.text for s in trainer.policy.act(observations, infos, greedy=True)]

    with trainer.torch.no_grad():
        want = exact_value(MAPS, act, {"map_set": "heldout"}).value
    assert got == pytest.approx(want, abs=1e-12)


@pytest.mark.heavy  # ~27 s: two exact evaluations of the 100 held-out maps (make test-heavy, CI)
def test_train_records_and_prints_where_it_evaluated(tmp_path):
    out = tmp_path / "run"
    args = ["train", MAPS, "--model", "tiny", "--num-envs", "2", "--episodes-per-update", "2"]
    args += ["--episodes", "2", "--eval-env-kwarg", "map_set=heldout", "--output", str(out)]
    result = CliRunner().invoke(app, [*args, "--no-progress"])
    assert result.exit_code == 0, result.output
    assert "greedy policy on map_set=heldout" in " ".join(result.output.split())
    record = json.loads((out / "result.json").read_text())
    assert record["eval_env_kwargs"] == {"map_set": "heldout"}
    assert record["eval_method"] == "exact"


@pytest.mark.parametrize(
    ("kwarg", "words"),
    [("map_set=test", "Unknown map_set 'test'"), ("nonsense=1", "nonsense")],
)
def test_a_bad_evaluation_kwarg_is_one_sentence_before_any_model_loads(tmp_path, kwarg, words):
    args = ["train", MAPS, "--model", "tiny", "--eval-env-kwarg", kwarg]
    result = CliRunner().invoke(app, [*args, "--output", str(tmp_path / "run")])
    assert result.exit_code == 2
    assert words in result.output and "Traceback" not in result.output
    assert not (tmp_path / "run").exists()
