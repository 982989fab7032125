"""Issue 37, item 7: ``--resume`` keeps the run's env, env keywords, model and algorithm; one
that asks for another is refused in one sentence naming the difference, before a model loads
(a FrozenLake resume of a Blackjack run trained Blackjack while the header said FrozenLake;
``--model smollm2-135m`` on a tiny run exited 0 keeping the saved model)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

pytest.importorskip("torch")
pytest.importorskip("peft")

sys.path.insert(0, str(Path(__file__).parents[1] / "support"))
import bandit  # noqa: E402

from llmgym.cli import app  # noqa: E402
from llmgym.errors import TrainingError  # noqa: E402
from llmgym.rl import make_trainer  # noqa: E402

A, B = bandit.register("a"), bandit.register("b")
SMALL = ["--no-progress", "--no-start-eval", "--final-eval-episodes", "2", "--threads", "1"]
SMALL += ["--num-envs", "8", "--episodes-per-update", "8", "--eval-episodes", "2"]


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> Path:
    """A REINFORCE run on bandit a with the tiny model: one update, one checkpoint."""
    out = tmp_path_factory.mktemp("resume") / "run"
    args = ["train", A, "--model", "tiny", "--algo", "reinforce", "--steps", "8", *SMALL]
    result = CliRunner().invoke(app, [*args, "--output", str(out)])
    assert result.exit_code == 0, result.output
    return out


def _resume(run: Path, *args: str, env: str = A) -> object:
    return CliRunner().invoke(app, ["train", env, "--resume", "--output", str(run), *args])


@pytest.fixture
def no_model_load(monkeypatch):
    """Fail if the command gets as far as building a trainer."""
    import llmgym.rl.trainer

    def refuse(config, *args, **kwargs):
        raise AssertionError(f"a {config.algo} trainer was built: the resume was not refused first")

    monkeypatch.setattr(llmgym.rl.trainer, "Trainer", refuse)


@pytest.mark.parametrize(
    "args, env, says",
    [
        ((), B, f"trained in {A}, not {B}; resume it as `llmgym train {A} ... --resume`"),
        (("--model", "smollm2-135m"), A, "trained model tiny, not smollm2-135m"),
        (("--set", "model=smollm2-135m"), A, "trained model tiny, not smollm2-135m"),
        (("--algo", "ppo"), A, "trained with reinforce, not ppo; resume it without --algo"),
        (("--env-kwarg", "good=b"), A, 'trained with env kwargs none, not good="b"'),
    ],
    ids=["env", "model", "set-model", "algo", "env-kwargs"],
)
def test_a_resume_that_changes_the_run_is_refused(run, no_model_load, args, env, says):
    result = _resume(run, *args, env=env)
    assert result.exit_code == 2, result.output
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and says in lines[0], result.stderr
    assert "pass another --output to start a new run" in lines[0]


def test_a_resume_without_algo_or_model_continues_the_run_as_it_was(run):
    before = json.loads((run / "result.json").read_text())
    result = _resume(run, "--steps", "16", *SMALL)  # no --algo (default ppo), no --model
    assert result.exit_code == 0, result.output
    assert "REINFORCE on" in result.output and "with tiny" in result.output
    after = json.loads((run / "result.json").read_text())
    assert after["algo"] == "reinforce" and after["model"] == "tiny" and after["resumed"]
    assert after["env_steps"] > before["env_steps"]


def test_the_same_env_model_and_algorithm_given_again_resume(run):
    args = ["--model", "tiny", "--algo", "reinforce", "--steps", "24", *SMALL]
    result = _resume(run, *args)
    assert result.exit_code == 0, result.output


def test_a_trainer_resuming_another_envs_checkpoint_is_refused(run):
    trainer = make_trainer(
        "reinforce", env_id=B, model="tiny", output_dir=str(run), progress=False, num_envs=8
    )
    with pytest.raises(TrainingError, match=f"trained in {A}, not {B}"):
        trainer.load_checkpoint()
