"""Issue 37, item 9: a bench never exits 0 having done nothing. An agent that cannot play an
env (``UnsupportedEnvError``) leaves that cell out and the others run; an agent that cannot be
built at all (a broken ``llm:`` name, a missing or damaged run) stops the bench in one
sentence, where it printed "skip" and exited 0 before; a bench whose every cell was left out
fails."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from llmgym.agents.registry import AGENTS, make_agent, register_agent
from llmgym.bench.runner import run_bench
from llmgym.cli import app
from llmgym.errors import AgentError, UnsupportedEnvError

sys.path.insert(0, str(Path(__file__).parents[1] / "support"))
import bandit  # noqa: E402

ENVS = ["Text-CartPole-v1", "Text-Blackjack-v1"]


@pytest.fixture
def agents():
    """``picky`` plays Blackjack only; ``broken`` cannot be built anywhere."""

    def picky(argument, env_id, **options):
        if env_id != "Text-Blackjack-v1":
            raise UnsupportedEnvError(f"picky plays Blackjack only, not {env_id}.")
        return make_agent("optimal", env_id, **options)

    def broken(argument, env_id, **options):
        raise AgentError("broken cannot be built.")

    register_agent("picky", picky)
    register_agent("broken", broken)
    yield
    del AGENTS["picky"], AGENTS["broken"]


def test_a_cell_the_agent_cannot_play_is_left_out_and_the_others_run(agents, tmp_path):
    skipped = []
    rows = run_bench(
        ENVS, ["picky"], episodes=2, output=tmp_path, on_skip=lambda *a: skipped.append(a)
    )
    assert skipped == [("Text-CartPole-v1", "picky", "picky plays Blackjack only, not "
                        "Text-CartPole-v1.")]  # fmt: skip
    assert {r["env_id"] for r in rows} == {"Text-Blackjack-v1"} and len(rows) == 2


def test_an_agent_that_cannot_be_built_stops_the_bench(agents, tmp_path):
    with pytest.raises(AgentError, match="broken cannot be built"):
        run_bench(ENVS, ["random", "broken"], episodes=2, output=tmp_path, on_skip=print)


def test_the_cli_exits_2_when_an_agent_cannot_be_built(agents, tmp_path):
    args = ["bench", "--envs", ",".join(ENVS), "--agents", "random,broken", "--episodes", "1"]
    result = CliRunner().invoke(app, [*args, "--output", str(tmp_path)])
    assert result.exit_code == 2 and "skip" not in result.output, result.output
    assert result.stderr.splitlines() == ["Error: broken cannot be built."]


def test_the_cli_exits_2_when_no_cell_could_be_played(agents, tmp_path):
    args = ["bench", "--envs", "Text-CartPole-v1", "--agents", "picky", "--episodes", "1"]
    result = CliRunner().invoke(app, [*args, "--output", str(tmp_path)])
    assert result.exit_code == 2, result.output
    assert result.stderr.startswith("Error: No agent asked for can play these envs (picky")
    assert not (tmp_path / "leaderboard.md").exists()


@pytest.mark.parametrize("damage", ["truncated", "missing"])
def test_a_run_with_damaged_weights_stops_the_bench(tmp_path, damage):
    pytest.importorskip("peft")
    from llmgym.rl import make_trainer

    run = tmp_path / "run"
    trainer = make_trainer(
        "reinforce",
        env_id=bandit.register("a"),
        model="tiny",
        output_dir=str(run),
        num_envs=8,
        episodes_per_update=8,
        progress=False,
    )
    trainer.checkpointer.save_checkpoint()
    (ckpt,) = (run / "checkpoints").glob("iter_*")
    weights = ckpt / "model.safetensors"
    if damage == "truncated":
        weights.write_bytes(weights.read_bytes()[:100])
    else:
        weights.unlink()
    args = ["bench", "--envs", "Text-Blackjack-v1", "--agents", f"llm:tiny@{run}"]
    result = CliRunner().invoke(app, [*args, "--episodes", "1", "--output", str(tmp_path / "b")])
    assert result.exit_code == 2 and "skip" not in result.output, result.output
    (line,) = result.stderr.splitlines()
    assert line.startswith(f"Error: The checkpoint {ckpt} is damaged"), line
    rows = tmp_path / "b" / "episodes.jsonl"
    assert not rows.exists() or not [json.loads(r) for r in rows.read_text().splitlines()]
