"""``optim.average_decay``: evaluations and saved policies use the average of the trained weights
(``llmgym.rl.averaging``) while acting and updates use the weights themselves; the average
survives resume and is refused outside [0, 1)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("peft")
sys.path.insert(0, str(Path(__file__).parents[1] / "support"))

from bandit import register  # noqa: E402
from safetensors.torch import load_file  # noqa: E402

from llmgym.errors import ConfigValueError  # noqa: E402
from llmgym.rl import make_trainer  # noqa: E402

SETTINGS = dict(
    model="tiny",
    env_id=register("ema"),
    num_envs=4,
    episodes_per_update=4,
    eval_every=0,
    eval_episodes=4,
    eval_start=False,
    checkpoint_every=1,
    progress=False,
    num_threads=1,
    learning_rate=0.05,
    average_decay=0.5,
)


def _live(trainer):
    return {k: p.detach().clone() for k, p in trainer.learner.policy_parameters().items()}


def test_the_policy_saved_and_evaluated_is_the_average(tmp_path):
    trainer = make_trainer("ppo", **SETTINGS, total_episodes=12, output_dir=str(tmp_path / "r"))
    history = []
    for _ in range(3):
        trainer.run_iteration()
        history.append(_live(trainer))
    # Started at the first update's weights, then halfway to each new one.
    for key, first in history[0].items():
        want = (first * 0.5 + history[1][key] * 0.5) * 0.5 + history[2][key] * 0.5
        assert torch.allclose(trainer.learner.average.average[key], want, atol=1e-6), key
    assert any(
        not torch.equal(history[2][k], trainer.learner.average.average[k]) for k in history[2]
    )

    seen = {}
    trainer._evaluate = lambda *args: seen.update(_live(trainer)) or {"mean_return": 0.0}
    trainer.evaluate()
    for key, value in trainer.learner.average.average.items():
        assert torch.equal(seen[key], value), key
    for key, value in _live(trainer).items():  # the weights themselves once it is done
        assert torch.equal(value, history[2][key]), key

    saved = load_file(str(trainer.save_policy(tmp_path / "policy") / "model.safetensors"))
    lora = {k: v for k, v in trainer.learner.average.average.items() if "lora_" in k}
    assert lora and len(saved) == len(lora)
    for key, value in lora.items():
        assert torch.equal(saved[key.replace(".default", "")], value), key


def test_the_average_survives_resume(tmp_path):
    full = make_trainer("ppo", **SETTINGS, total_episodes=12, output_dir=str(tmp_path / "full"))
    full.train()
    half = make_trainer("ppo", **SETTINGS, total_episodes=8, output_dir=str(tmp_path / "half"))
    half.train()
    resumed = make_trainer("ppo", **SETTINGS, total_episodes=12, output_dir=str(tmp_path / "half"))
    resumed.train(resume=True)
    for key, value in full.learner.average.average.items():
        assert torch.allclose(resumed.learner.average.average[key], value, atol=1e-6), key


def test_without_a_decay_nothing_is_kept(tmp_path):
    settings = SETTINGS | {"average_decay": 0.0}
    trainer = make_trainer("ppo", **settings, total_episodes=4, output_dir=str(tmp_path))
    trainer.train()
    assert trainer.learner.average.average is None
    assert not list(tmp_path.glob("checkpoints/*/weight_average.safetensors"))


@pytest.mark.parametrize("decay", [1.0, -0.1])
def test_a_decay_outside_0_1_is_refused(tmp_path, decay):
    with pytest.raises(ConfigValueError, match=r"optim.average_decay must be in \[0, 1\)"):
        make_trainer("ppo", **SETTINGS | {"average_decay": decay}, output_dir=str(tmp_path))


def test_train_says_that_it_evaluates_the_average(tmp_path):
    from typer.testing import CliRunner

    from llmgym.cli import app

    args = ["train", SETTINGS["env_id"], "--model", "tiny", "--num-envs", "4"]
    args += ["--episodes-per-update", "4", "--steps", "4", "--eval-episodes", "4"]
    args += ["--set", "average_decay=0.9", "--no-progress", "--output", str(tmp_path / "run")]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    text = " ".join(result.output.split())
    assert "the saved policies use the weights' average (optim.average_decay=0.9)" in text
