"""The algorithm table (issue 50): a toy algorithm added through ``ALGORITHMS`` alone trains
from ``make_trainer`` and the CLI; the Q-critic is its own algorithm, and runs made as PPO's
``q_critic=true`` still build, restore and resume as it."""

from __future__ import annotations

import json
import sys
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("peft")

sys.path.insert(0, str(Path(__file__).parents[1] / "support"))
from bandit import register  # noqa: E402
from typer.testing import CliRunner  # noqa: E402

from llmgym.cli import app  # noqa: E402
from llmgym.rl import ALGORITHMS, make_trainer, restore_trainer  # noqa: E402
from llmgym.rl.algorithms import Algorithm, legacy_algo  # noqa: E402
from llmgym.rl.algorithms.qac import QCriticActor  # noqa: E402
from llmgym.rl.batch import RolloutBatch  # noqa: E402
from llmgym.rl.config import TrainConfig  # noqa: E402

BANDIT = register("b")  # the tiny model prefers "b": most turns pay, so every update moves
FAST = dict(
    model="tiny", env_id=BANDIT, num_envs=8, episodes_per_update=8, minibatch_size=8,
    learning_rate=3e-3, eval_episodes=4, eval_every=0, checkpoint_every=0, progress=False,
    num_threads=1,
)  # fmt: skip


@dataclass
class ToyConfig(TrainConfig):
    """Vanilla policy gradient on raw rewards (a test's algorithm)."""

    algo: str = "toy"
    """Algorithm name (fixed)."""
    scale: float = 1.0
    """The rewards' multiplier."""


class Toy:
    """The algorithm: its targets (rewards) and its loss, handed to the learner."""

    def __init__(self, config: ToyConfig, learner: Any, collector: Any, state: Any) -> None:
        self.config, self.learner = config, learner

    def update(self, episodes: list[Any], acted: Any = None) -> dict[str, float]:
        samples = [s.sample for e in episodes for s in e.steps]
        rewards = [self.config.scale * s.reward for e in episodes for s in e.steps]
        batch = RolloutBatch(samples=samples, advantages=torch.tensor(rewards))

        def loss_fn(idx: list[int]) -> tuple[Any, dict[str, float]]:
            mb = batch.select(idx)
            out = self.learner.evaluate_samples(mb.samples)
            loss = -(out.logprob.float() * mb.advantages).mean()
            return loss, {"losses/total": loss.item()}

        return self.learner.run_epochs(len(batch), loss_fn, 1)


@pytest.fixture
def toy(monkeypatch):
    monkeypatch.setitem(ALGORITHMS, "toy", Algorithm(ToyConfig, Toy, "a test's toy"))


def test_a_toy_algorithm_trains_through_the_table_alone(toy, tmp_path):
    trainer = make_trainer("toy", total_episodes=16, output_dir=str(tmp_path / "api"), **FAST)
    before = [p.detach().clone() for p in trainer.model.parameters() if p.requires_grad]
    trainer.train()
    after = [p for p in trainer.model.parameters() if p.requires_grad]
    assert any(not torch.equal(b, a) for b, a in zip(before, after))
    out = tmp_path / "cli"
    result = CliRunner().invoke(
        app,
        ["train", BANDIT, "--algo", "toy", "--model", "tiny", "--episodes", "8", "--num-envs",
         "8", "--episodes-per-update", "8", "--set", "scale=2.0", "--output", str(out),
         "--no-progress", "--threads", "1", "--final-eval-episodes", "4"],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert json.loads((out / "result.json").read_text())["algo"] == "toy"
    help_text = CliRunner().invoke(app, ["train", "--help"], env={"COLUMNS": "300"}).output
    assert "qac: Q-critic actor-critic" in help_text  # written from the table at import


def test_an_unknown_algorithm_is_one_sentence():
    result = CliRunner().invoke(app, ["train", "Text-Blackjack-v1", "--algo", "nope"])
    assert result.exit_code == 2
    assert "Unknown --algo 'nope'; choose one of ppo, qac, grpo, reinforce." in result.output


def test_ppo_holds_no_q_critic_and_the_old_name_warns_and_still_works(tmp_path):
    from llmgym.rl.algorithms.ppo import PPOConfig

    assert not [f for f in PPOConfig.__dataclass_fields__ if f.startswith("q_")]
    source = Path(sys.modules[PPOConfig.__module__].__file__).read_text()
    assert "q_critic" not in source and "q_head" not in source
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        trainer = make_trainer("ppo", q_critic=True, q_window=2, output_dir=str(tmp_path), **FAST)
    assert isinstance(trainer.algorithm.critic, QCriticActor) and trainer.config.q_window == 2
    assert [str(w.message) for w in caught if w.category is DeprecationWarning] == [
        'make_trainer("ppo", q_critic=True) is deprecated; use make_trainer("qac").'
    ]
    assert legacy_algo("ppo", {"q_critic": False, "gamma": 0.5}) == ("ppo", {"gamma": 0.5})


def _as_written_before_qac(run_dir: Path) -> None:
    """Rewrite a qac run's files as PPO with ``q_critic=true`` wrote them before 2026-11-28."""
    paths = list(run_dir.rglob("config.json")) + list(run_dir.rglob("trainer_state.json"))
    for path in paths + [run_dir / "run.json"]:
        data = json.loads(path.read_text())
        config = data.get("config", data)
        if path.name in ("config.json", "run.json"):
            config["algo"], config["q_critic"] = "ppo", True
        if "algo" in data:
            data["algo"] = "ppo"
        path.write_text(json.dumps(data))


def test_a_run_made_as_ppo_with_q_critic_restores_and_resumes_as_qac(tmp_path):
    cfg = dict(FAST, action_head=False, q_window=2, q_step=3.0, q_ridge=0.0, head_layers=[1])
    run = make_trainer("qac", total_episodes=16, output_dir=str(tmp_path), **cfg)
    run.train()  # two updates, then a checkpoint
    _as_written_before_qac(tmp_path)
    assert json.loads((tmp_path / "run.json").read_text())["config"]["q_critic"] is True
    restored = restore_trainer(str(tmp_path), device="cpu")
    critic = restored.algorithm.critic
    assert isinstance(critic, QCriticActor) and len(critic.q_memory) == 2
    result = CliRunner().invoke(
        app,
        ["train", BANDIT, "--resume", "--output", str(tmp_path), "--episodes", "24",
         "--no-progress", "--final-eval-episodes", "4"],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "QAC on" in result.output
    assert json.loads((tmp_path / "result.json").read_text())["episodes"] == 24
