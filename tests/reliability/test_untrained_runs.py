"""Issue 37, item 10: a run that trained nothing never looks like a success (rewards of
+-1e30 under PPO are refused in one sentence), and a policy or checkpoint folder that links
its files to somewhere outside itself is refused."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import gymnasium as gym
import pytest
from typer.testing import CliRunner

pytest.importorskip("torch")
pytest.importorskip("peft")

sys.path.insert(0, str(Path(__file__).parents[1] / "support"))
import bandit  # noqa: E402

from llmgym.agents.registry import make_agent  # noqa: E402
from llmgym.cli import app  # noqa: E402
from llmgym.errors import AgentError, TrainingError  # noqa: E402
from llmgym.rl import load_trained_policy, make_trainer  # noqa: E402

HUGE = "LLMGymTest-HugeBandit-v0"


class HugeBandit(bandit.TextBandit):
    """The bandit with rewards of +1e30 (the good answer) and -1e30."""

    def step(self, action):
        obs, reward, terminated, truncated, info = super().step(action)
        return obs, 1e30 if reward > 0 else -1e30, terminated, truncated, info


if HUGE not in gym.registry:
    gym.register(HUGE, entry_point=HugeBandit)

SMALL = dict(
    model="tiny",
    num_envs=8,
    episodes_per_update=8,
    minibatch_size=8,
    eval_every=0,
    checkpoint_every=0,
    progress=False,
    num_threads=1,
)


def test_ppo_refuses_rewards_that_overflow_every_step(tmp_path):
    trainer = make_trainer("ppo", env_id=HUGE, output_dir=str(tmp_path), **SMALL)
    with pytest.raises(TrainingError, match=r"returns up to 1e\+30 .*value_norm=true"):
        trainer.run_iteration()


def test_train_with_such_rewards_exits_2_in_one_sentence(tmp_path):
    args = ["train", HUGE, "--algo", "ppo", "--model", "tiny", "--no-progress", "--steps", "16"]
    result = CliRunner().invoke(app, [*args, "--no-start-eval", "--output", str(tmp_path / "r")])
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "nothing can be trained" in lines[0]
    assert not (tmp_path / "r" / "result.json").exists()
    assert not (tmp_path / "r" / "policy").exists()


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A REINFORCE trainer on the plain bandit after one real update, and its policy dir."""
    root = tmp_path_factory.mktemp("trained")
    trainer = make_trainer(
        "reinforce",
        env_id=bandit.register("a"),
        output_dir=str(root / "run"),
        action_head=False,
        **SMALL,
    )
    trainer.run_iteration()
    assert trainer.learner.optimizer.steps == 1, "one optimizer step was taken"
    trainer.checkpointer.save_checkpoint()
    return trainer, trainer.save_policy(root / "policy")


def test_a_run_whose_every_update_was_skipped_is_not_saved_as_trained(tmp_path):
    trainer = make_trainer(
        "reinforce", env_id=bandit.register("a"), output_dir=str(tmp_path), **SMALL
    )
    trainer.state.skipped_updates = (
        3  # as after three non-finite losses: the optimizer never stepped
    )
    with pytest.raises(TrainingError, match="All 3 update steps of this run were skipped"):
        trainer.save_policy(tmp_path / "policy")
    assert not (tmp_path / "policy").exists()


def test_a_run_that_stepped_saves_as_before(trained, tmp_path):
    trainer, _ = trained
    trainer.state.skipped_updates = 2  # some steps skipped, others taken: a trained policy
    try:
        assert (trainer.save_policy(tmp_path / "p") / "trainer_state.json").exists()
    finally:
        trainer.state.skipped_updates = 0


def _linked_out(folder: Path, name: str, outside: Path) -> None:
    outside.mkdir(exist_ok=True)
    shutil.move(folder / name, outside / name)
    (folder / name).symlink_to(outside / name)


@pytest.mark.parametrize("name", ["model.safetensors", "config.json", "trainer_state.json"])
def test_a_policy_dir_linking_a_file_outside_itself_is_refused(trained, tmp_path, name):
    _, policy = trained
    copy = tmp_path / "policy"
    shutil.copytree(policy, copy)
    assert load_trained_policy(str(copy), device="cpu") is not None  # the copy loads
    _linked_out(copy, name, tmp_path / "elsewhere")
    with pytest.raises(TrainingError, match="links outside its folder"):
        load_trained_policy(str(copy), device="cpu")
    with pytest.raises(AgentError, match="links outside its folder"):
        make_agent(f"llm:tiny@{copy}", "Text-Blackjack-v1", device="cpu")


def test_a_link_inside_the_folder_is_fine(trained, tmp_path):
    _, policy = trained
    copy = tmp_path / "policy"
    shutil.copytree(policy, copy)
    (copy / "weights").mkdir()
    shutil.move(copy / "model.safetensors", copy / "weights" / "model.safetensors")
    (copy / "model.safetensors").symlink_to(copy / "weights" / "model.safetensors")
    assert load_trained_policy(str(copy), device="cpu") is not None


def test_a_run_whose_checkpoint_links_outside_is_refused(trained, tmp_path):
    trainer, _ = trained
    run = tmp_path / "run"
    shutil.copytree(trainer.run_dir, run)
    ckpt = max((run / "checkpoints").glob("iter_*"))
    _linked_out(ckpt, "optimizer.pt", tmp_path / "elsewhere")
    with pytest.raises(TrainingError, match="links outside its folder"):
        load_trained_policy(str(run), device="cpu")
    resumed = make_trainer(
        "reinforce", env_id=bandit.register("a"), output_dir=str(run), action_head=False, **SMALL
    )
    with pytest.raises(TrainingError, match="links outside its folder"):
        resumed.load_checkpoint()
    shutil.move(ckpt, tmp_path / "moved")  # the whole checkpoint folder linked in instead
    ckpt.symlink_to(tmp_path / "moved", target_is_directory=True)
    with pytest.raises(TrainingError, match="outside its run directory"):
        load_trained_policy(str(run), device="cpu")
