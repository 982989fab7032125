"""``evaluate``, ``make_agent`` and the ``llmgym eval`` command."""

from __future__ import annotations

import json

import pytest
import typer
from typer.testing import CliRunner

from llmgym.agents.evaluate import evaluate
from llmgym.agents.registry import AgentError, LLMAgent, make_agent
from llmgym.cli.eval import register


@pytest.fixture
def app():
    app = typer.Typer()
    register(app)
    app.command("noop")(lambda: None)  # with two commands typer keeps "eval" as a subcommand
    return app


def test_random_agent_json(tmp_path):
    out = tmp_path / "r.json"
    result = evaluate(
        "Text-FrozenLake-v1", "random", episodes=30, num_envs=7, output=out, progress=False
    )
    saved = json.loads(out.read_text())
    for key in ("env_id", "agent", "episodes", "mean_return", "ci95", "parse_rate"):
        assert saved[key] == result[key]
    assert saved["episodes"] == len(saved["returns"]) == 30 and saved["env_steps_per_s"] > 0


def test_episode_seeds_do_not_depend_on_num_envs():
    class First:
        def act_batch(self, observations, infos):
            return ['{"action": "stick"}' for _ in infos]

        def reset(self, indices=None):
            pass

    one = evaluate("Text-Blackjack-v1", First(), episodes=12, num_envs=1, progress=False)
    many = evaluate("Text-Blackjack-v1", First(), episodes=12, num_envs=5, progress=False)
    assert one["returns"] == many["returns"] and len(one["returns"]) == 12


def test_llm_agent_with_the_tiny_model(tiny):
    from llmgym.policy import LLMPolicy, PolicyConfig

    model, tokenizer = tiny
    agent = LLMAgent(LLMPolicy(model, tokenizer, PolicyConfig(mode="score")))
    result = evaluate("Text-CartPole-v1", agent, episodes=3, num_envs=3, progress=False)
    assert result["parse_rate"] == 1.0 and result["mean_return"] >= 8


def test_sampled_llm_episodes_repeat_when_their_batches_do(tiny):
    from llmgym.bench.runner import run_episodes
    from llmgym.policy import LLMPolicy, PolicyConfig

    def play(warm_up: bool) -> list[tuple[int, float, int]]:
        model, tokenizer = tiny
        config = PolicyConfig(mode="score", temperature=50.0)  # the tiny model is near-greedy
        agent = LLMAgent(LLMPolicy(model, tokenizer, config))
        rows: list[dict] = []
        if warm_up:  # moves the sampler on, as earlier cells of a bench worker would
            run_episodes("Text-Blackjack-v1", agent, [100, 101, 102], rows.append, 3)
        rows.clear()
        run_episodes("Text-Blackjack-v1", agent, list(range(8)), rows.append, 4)
        return sorted((r["seed"], r["return"], r["length"]) for r in rows)

    assert play(warm_up=False) == play(warm_up=True)


def test_unknown_agent_kind():
    with pytest.raises(AgentError, match="Unknown agent 'sb3-sac'"):
        make_agent("sb3-sac", "Text-CartPole-v1")


def test_baselines_share_the_registry():
    result = evaluate("Text-CliffWalking-v1", "optimal", episodes=2, progress=False)
    assert result["returns"] == [-13.0, -13.0]


def test_cli_runs_and_writes_json(app, tmp_path):
    out = tmp_path / "e.json"
    args = ["eval", "Text-Blackjack-v1", "--agent", "random", "--episodes", "6"]
    result = CliRunner().invoke(
        app, [*args, "--num-envs", "3", "--output", str(out), "--no-progress"]
    )
    assert result.exit_code == 0, result.output
    assert "mean return" in result.output and "parse rate 100.0%" in result.output
    assert json.loads(out.read_text())["episodes"] == 6


@pytest.mark.parametrize(
    "args, message",
    [
        (["Text-Nope-v0", "--agent", "random"], "Unknown environment"),
        (["Text-Blackjack-v1", "--agent", "oracle"], "Unknown agent"),
        (["Text-Blackjack-v1", "--agent", "random", "--mode", "think"], "Unknown mode"),
        (["Text-Blackjack-v1", "--agent", "llm:/no/such/model/dir"], "No model directory"),
    ],
)
def test_cli_errors_are_one_sentence(app, args, message):
    result = CliRunner().invoke(app, ["eval", *args, "--no-progress"])
    assert result.exit_code == 2
    assert message in result.output and "Traceback" not in result.output


def test_history_comes_from_the_envs():
    seen = []

    class Recorder:
        def act_batch(self, observations, infos):
            seen.extend(len(info["messages"]) for info in infos)
            return ['{"action": "LEFT"}' for _ in infos]

        def reset(self, indices=None):
            pass

    evaluate("Text-CartPole-v1", Recorder(), episodes=3, num_envs=2, history=2, progress=False)
    assert seen[:2] == [2, 2] and max(seen) == 6  # system + 2 turns + observation


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("llm:smollm2-135m,bogus=1", "Unknown LLM option 'bogus'"),
        ("llm:smollm2-135m,greedy", "must look like key=value"),
    ],
)
def test_llm_agent_options_are_checked_before_loading(name, message):
    with pytest.raises(AgentError, match=message):
        make_agent(name, "Text-Blackjack-v1")


def test_llm_agent_reseeds_at_the_start_of_every_batch():
    class Generator:
        def __init__(self) -> None:
            self.seeds: list[int] = []

        def manual_seed(self, seed: int) -> None:
            self.seeds.append(seed)

    class Policy:
        generator = Generator()

        def reset(self, indices=None) -> None:
            pass

    agent = LLMAgent(Policy())
    agent.seed_episodes([0, 1])
    agent.seed_episodes([1])  # the same batch, one episode left: no reseed
    assert Policy.generator.seeds == [0]
    agent.reset([0])
    agent.seed_episodes([1])
    assert Policy.generator.seeds == [0]
    agent.reset(None)  # a new batch (e.g. another env) with the same seeds reseeds
    agent.seed_episodes([0, 1])
    assert Policy.generator.seeds == [0, 0]
