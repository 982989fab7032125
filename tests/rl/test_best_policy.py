"""The run keeps its best-evaluated policy (``Checkpointing.keep_if_best``, as SB3's
``EvalCallback`` keeps its best model): saved only when an evaluation beats every earlier one,
its record read back on resume, cleared by a fresh run, and loadable as a policy."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("peft")
sys.path.insert(0, str(Path(__file__).parents[1] / "support"))

from bandit import register  # noqa: E402

from llmgym.rl import load_trained_policy, make_trainer, restore_trainer  # noqa: E402
from llmgym.rl.checkpoints import start_fresh  # noqa: E402

SETTINGS = dict(
    model="tiny",
    env_id=register("b"),
    num_envs=4,
    episodes_per_update=4,
    eval_every=1,
    eval_episodes=4,
    eval_start=False,
    checkpoint_every=1,
    progress=False,
    num_threads=1,
)


def test_the_best_evaluation_is_kept_and_survives_resume_and_not_a_fresh_run(tmp_path):
    trainer = make_trainer("ppo", **SETTINGS, total_env_steps=8, output_dir=str(tmp_path))
    trainer.train()
    best_dir = tmp_path / "best_policy"
    # Every evaluation of the run was seen: the kept one is the best of them.
    rows = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    values = [r["eval/mean_return"] for r in rows if "eval/mean_return" in r]
    assert trainer.state.best_eval["value"] == max(values)
    state = json.loads((best_dir / "trainer_state.json").read_text())
    assert state["best_eval"] == trainer.state.best_eval
    assert state["iteration"] == trainer.state.best_eval["iteration"]
    assert load_trained_policy(str(best_dir)) is not None

    # A worse evaluation leaves it alone; a better one replaces it.
    trainer.state.iteration += 1
    trainer.checkpointer.keep_if_best({"mean_return": trainer.state.best_eval["value"] - 1.0})
    assert (
        json.loads((best_dir / "trainer_state.json").read_text())["best_eval"] == state["best_eval"]
    )
    trainer.checkpointer.keep_if_best({"mean_return": 2.0, "method": "sampled"})
    kept = json.loads((best_dir / "trainer_state.json").read_text())["best_eval"]
    assert kept["value"] == 2.0 and kept["iteration"] == trainer.state.iteration

    # Resume reads the record from the kept policy; a fresh run in the same folder drops it.
    resumed = restore_trainer(str(tmp_path))
    assert resumed.state.best_eval == kept
    moved = tmp_path.parent / f"{tmp_path.name}-moved"
    shutil.copytree(tmp_path, moved)  # a run copied elsewhere, resumed there (--resume)
    copy = make_trainer("ppo", **SETTINGS, total_env_steps=8, output_dir=str(moved))
    copy.load_checkpoint()
    assert copy.state.best_eval["weights"] == str(moved / "best_policy")  # its own kept policy
    start_fresh(tmp_path)
    assert not best_dir.exists()
    settings = SETTINGS | {"eval_every": 0}  # the final evaluation is the only one
    fresh = make_trainer("ppo", **settings, total_env_steps=4, output_dir=str(tmp_path))
    fresh.train()
    assert fresh.state.best_eval["iteration"] == 1
    assert json.loads((best_dir / "trainer_state.json").read_text())["best_eval"]["value"] < 2.0


def test_a_trained_policy_acts_in_its_own_mode_unless_one_is_chosen(tmp_path):
    """A policy trained in generate mode is evaluated in generate mode by ``llm:MODEL@DIR``
    (``llmgym eval``, the bench); ``mode=`` or ``,mode=`` still chooses."""
    from llmgym.agents.evaluate import evaluate
    from llmgym.agents.registry import make_agent

    settings = SETTINGS | dict(mode="generate", max_new_tokens=4, eval_every=0)
    trainer = make_trainer("ppo", **settings, total_env_steps=4, output_dir=str(tmp_path))
    trainer.train()
    name = f"llm:tiny@{tmp_path}"
    assert make_agent(name, SETTINGS["env_id"]).policy.config.mode == "generate"
    assert make_agent(name, SETTINGS["env_id"], mode="score").policy.config.mode == "score"
    assert make_agent(name + ",mode=score", SETTINGS["env_id"]).policy.config.mode == "score"
    result = evaluate(SETTINGS["env_id"], name, episodes=2, num_envs=2, progress=False)
    assert result["mode"] == "generate"


def test_stop_at_ends_training_at_the_first_evaluation_that_reaches_it(tmp_path, capsys):
    """``eval.stop_at`` (``--stop-at``, as SB3's ``StopTrainingOnRewardThreshold``): training
    stops after the first periodic evaluation that reaches it, the final evaluation still runs,
    and a resumed run with budget left stops at once; a goal not reached changes nothing."""
    reached = SETTINGS | {"eval_stop_at": -1e9}  # every evaluation reaches it
    trainer = make_trainer("ppo", **reached, total_env_steps=40, output_dir=str(tmp_path))
    final = trainer.train()
    assert (trainer.state.iteration, trainer.state.env_steps) == (1, 4)
    assert "eval.stop_at is reached, so training stops" in capsys.readouterr().out
    assert final["episodes"] == 4 and trainer.state.best_eval["iteration"] == 1
    resumed = restore_trainer(str(tmp_path))
    resumed.train(resume=True)
    assert (resumed.state.iteration, resumed.state.env_steps) == (1, 4)

    far = SETTINGS | {"eval_stop_at": 1e9}
    trainer = make_trainer("ppo", **far, total_env_steps=12, output_dir=str(tmp_path / "far"))
    trainer.train()
    assert trainer.state.env_steps == 12 and "stop_at is reached" not in capsys.readouterr().out


def test_stop_at_from_the_command_line_is_recorded(tmp_path):
    from typer.testing import CliRunner

    from llmgym.cli import app

    out = tmp_path / "run"
    args = ["train", SETTINGS["env_id"], "--model", "tiny", "--steps", "40", "--num-envs", "4"]
    args += ["--episodes-per-update", "4", "--eval-every", "1", "--eval-episodes", "4"]
    args += ["--final-eval-episodes", "4", "--no-start-eval", "--no-progress", "--threads", "1"]
    result = CliRunner().invoke(app, [*args, "--stop-at", "-1000", "--output", str(out)])
    assert result.exit_code == 0, result.output
    record = json.loads((out / "result.json").read_text())
    assert record["stopped_at_goal"] is True and record["env_steps"] == 4
    assert record["best_eval"]["env_steps"] == 4


def test_loading_a_policy_leaves_this_process_thread_count_alone(tmp_path):
    """A run trained with ``--threads 1`` restored to act (``llmgym eval``, exact evaluation)
    does not pin the evaluating process to one torch thread."""
    before = torch.get_num_threads()
    trainer = make_trainer("ppo", **SETTINGS, total_env_steps=4, output_dir=str(tmp_path))
    trainer.train()  # the run itself runs on its one thread
    try:
        torch.set_num_threads(2)
        assert load_trained_policy(str(tmp_path)) is not None
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)
