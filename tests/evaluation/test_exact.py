"""Exact evaluation (llmgym.evaluation.exact) against Monte Carlo, known optima and env text."""

from __future__ import annotations

import json
import math

import gymnasium as gym
import numpy as np
import pytest
import typer
from typer.testing import CliRunner

import llmgym  # noqa: F401  (registers the Text-* ids)
from llmgym.agents.evaluate import evaluate
from llmgym.agents.registry import AgentError
from llmgym.baselines.agents import make_baseline, make_eval_env
from llmgym.cli import app
from llmgym.cli.checks import key_values
from llmgym.evaluation.exact import agent_act, exact_value, state_texts, supports_exact

BLACKJACK, LAKE = "Text-Blackjack-v1", "Text-FrozenLake-v1"


def stick_at(threshold: int):
    """A Blackjack threshold policy, answering as an LLM would (JSON naming the action)."""

    def act(observations, infos):
        return [
            json.dumps({"action": "stick" if info["raw_obs"][0] >= threshold else "hit"})
            for info in infos
        ]

    return act


def sampled_returns(env_id, act, episodes, seed=0):
    """Episode returns of ``act`` played one step at a time in the text env itself."""
    env = make_eval_env(env_id)
    returns = []
    for episode in range(episodes):
        obs, info = env.reset(seed=seed + episode)
        total, done = 0.0, False
        while not done:
            obs, reward, terminated, truncated, info = env.step(act([obs], [info])[0])
            total += float(reward)
            done = terminated or truncated
        returns.append(total)
    return np.asarray(returns)


def assert_within_ci(exact, returns):
    half = 1.96 * returns.std(ddof=1) / math.sqrt(len(returns))
    assert abs(returns.mean() - exact) <= half, (exact, returns.mean(), half)


@pytest.mark.parametrize("threshold", [17, 12])
def test_blackjack_threshold_policies_match_monte_carlo(threshold):
    act = stick_at(threshold)
    result = exact_value(BLACKJACK, act)
    assert result.states == 280 and result.parse_rate == 1.0
    assert_within_ci(result.value, sampled_returns(BLACKJACK, act, 6000))


def test_frozen_lake_optimum_matches_monte_carlo_and_known_value():
    expert = make_baseline("optimal", LAKE)
    result = exact_value(LAKE, agent_act(expert))
    assert round(result.value, 4) == 0.7402 and result.horizon == 100
    # Monte Carlo on the base env with the same per-state actions (text parsing is covered
    # by the Blackjack tests), 6000 episodes under the same 100-step cap.
    env, rng_returns = gym.make("FrozenLake-v1"), []
    for episode in range(6000):
        state, _ = env.reset(seed=episode)
        total, done = 0.0, False
        while not done:
            state, reward, terminated, truncated, _ = env.step(result.actions[state])
            total, done = total + float(reward), terminated or truncated
        rng_returns.append(total)
    assert_within_ci(result.value, np.asarray(rng_returns))


def test_known_optima_and_horizon():
    optimal = agent_act(make_baseline("optimal", BLACKJACK))
    assert round(exact_value(BLACKJACK, optimal).value, 4) == -0.0431  # sab=True registration
    no_sab = agent_act(make_baseline("optimal", BLACKJACK, sab=False))
    assert round(exact_value(BLACKJACK, no_sab, {"sab": False}).value, 4) == -0.0466
    expert = agent_act(make_baseline("optimal", LAKE))
    assert exact_value(LAKE, expert, max_steps=5).value == 0.0  # the goal is 6 moves away
    cliff = agent_act(make_baseline("optimal", "Text-CliffWalking-v1"))
    result = exact_value("Text-CliffWalking-v1", cliff)
    assert result.value == -13.0 and result.horizon == 200  # the default cap (no time limit)
    taxi = exact_value("Text-Taxi-v4", agent_act(make_baseline("optimal", "Text-Taxi-v4")))
    assert 7.5 < taxi.value < 8.5 and taxi.states == 400  # 500 minus delivered states


def test_unparseable_answers_take_the_fallback_and_the_penalty():
    def babble(observations, infos):
        return ["no idea"] * len(observations)

    result = exact_value(BLACKJACK, babble)
    assert result.parse_rate == 0.0 and set(result.actions.values()) == {0}  # fallback: stick
    stick = exact_value(BLACKJACK, stick_at(0))
    assert result.value == pytest.approx(stick.value)
    penalized = exact_value(BLACKJACK, babble, {"invalid_penalty": -0.5})
    assert penalized.value == pytest.approx(stick.value - 0.5)  # one step per hand


@pytest.mark.parametrize(
    "env_id, env_kwargs",
    [
        (BLACKJACK, None),
        (BLACKJACK, {"natural": True, "sab": False}),
        (LAKE, None),
        (LAKE, {"map_name": "8x8", "is_slippery": False}),
        ("Text-Taxi-v4", None),
        ("Text-CliffWalking-v1", {"is_slippery": True}),
    ],
)
def test_state_texts_equal_the_env_text(env_id, env_kwargs):
    rows = {raw: (text, info) for raw, text, info in state_texts(env_id, env_kwargs)}
    env = make_eval_env(env_id, **(env_kwargs or {}))
    rng = np.random.default_rng(0)
    seen = 0
    for episode in range(20):
        obs, info = env.reset(seed=episode)
        done = False
        while not done:
            text, state_info = rows[info["raw_obs"]]  # every state met was enumerated
            assert text == obs
            for key, value in state_info.items():
                assert np.array_equal(value, info[key]), key
            seen += 1
            answer = json.dumps({"action": str(rng.choice(info["valid_actions"]))})
            obs, _, terminated, truncated, info = env.step(answer)
            done = terminated or truncated or seen > 100 * (episode + 1)
    assert seen > 20


def test_support_and_refusals():
    assert supports_exact(LAKE, {"is_slippery": False})
    assert supports_exact("Text-FrozenLake8x8-v1") and supports_exact("Text-Taxi-v4")
    assert not supports_exact("Text-CartPole-v1")
    assert not supports_exact("FrozenLake-v1")  # not a text env
    assert not supports_exact(LAKE, {"history": 2})
    assert not supports_exact(LAKE, {"on_invalid": "random"})
    assert not supports_exact("Text-Taxi-v4", {"fickle_passenger": True})
    assert not supports_exact("Text-Nope-v0")
    with pytest.raises(ValueError, match="transition model"):
        exact_value("Text-CartPole-v1", stick_at(17))
    with pytest.raises(AgentError):
        agent_act(make_baseline("random", LAKE))


def test_llm_agent_acts_greedily_under_exact(tiny):
    """A sampling policy (temperature 1) gets greedy=True for the exact call, so two calls
    agree, and its config is restored afterwards."""
    from llmgym.agents.registry import LLMAgent
    from llmgym.policy import LLMPolicy, PolicyConfig

    model, tokenizer = tiny
    agent = LLMAgent(LLMPolicy(model, tokenizer, PolicyConfig(mode="score", seed=0)))
    act = agent_act(agent)
    first = exact_value(BLACKJACK, act)
    assert first.actions == exact_value(BLACKJACK, act).actions
    assert agent.policy.config.greedy is False


def test_evaluate_exact_and_env_kwargs():
    result = evaluate(LAKE, "optimal", exact=True, env_kwargs={"is_slippery": False})
    assert result["exact"] and result["mean_return"] == 1.0 and result["ci95"] == 0.0
    assert key_values(["a=1", "b=True", "c=x y"], "--env-kwarg") == {"a": 1, "b": True, "c": "x y"}
    with pytest.raises(typer.Exit):
        key_values(["is_slippery"], "--env-kwarg")
    with pytest.raises(ValueError, match="Markov"):
        evaluate(LAKE, "optimal", exact=True, history=2)
    sampled = evaluate(
        LAKE, "optimal", episodes=3, env_kwargs={"is_slippery": False}, progress=False
    )
    assert sampled["mean_return"] == 1.0


def test_cli_exact(tmp_path):
    runner = CliRunner()
    out = tmp_path / "exact.json"
    args = ["eval", LAKE, "--agent", "optimal", "--exact", "--output", str(out)]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    assert "exact return +0.7402" in result.output and "exact" in result.output
    assert json.loads(out.read_text())["mean_return"] == pytest.approx(0.7402, abs=1e-4)
    flat = runner.invoke(app, [*args[:5], "--env-kwarg", "is_slippery=false"])
    assert flat.exit_code == 0 and "exact return +1.0000" in flat.output
    refusals = {
        "transition model": ["Text-CartPole-v1", "--exact"],
        "KEY=VALUE": [LAKE, "--env-kwarg", "oops"],
    }
    for words, bad_args in refusals.items():
        bad = runner.invoke(app, ["eval", *bad_args, "--agent", "optimal"])
        text = " ".join(bad.output.split())  # one sentence, however the console wraps it
        assert bad.exit_code == 2 and words in text, bad.output
        assert text.startswith("Error:") and ". " not in text and text.endswith(".")


def test_bench_records_the_exact_value(tmp_path):
    from llmgym.bench.report import write_report
    from llmgym.bench.runner import EXACT_FILE, load_rows, run_bench

    rows = run_bench([LAKE], ["random", "optimal"], episodes=2, output=tmp_path)
    assert len(rows) == 4  # the sampled episodes are kept as they are
    exact = load_rows(tmp_path, EXACT_FILE)
    assert [(r["agent"], round(r["exact_return"], 4)) for r in exact] == [("optimal", 0.7402)]
    stats = {s.agent: s for s in write_report(tmp_path, [LAKE], ["random", "optimal"], "t", False)}
    assert stats["random"].exact is None and round(stats["optimal"].exact, 4) == 0.7402
    assert "| 0.7402 |" in (tmp_path / "leaderboard.md").read_text()


def test_an_llm_agent_answers_the_states_in_bounded_batches():
    """All of an env's states in one forward pass held ~18 GB of KV cache on Taxi."""
    from types import SimpleNamespace

    from llmgym.evaluation.exact import LLM_BATCH_SIZE
    from llmgym.policy import PolicyConfig

    sizes: list[int] = []

    class Recorder:
        policy = SimpleNamespace(config=PolicyConfig())

        def reset(self, seed):
            pass

        def act_batch(self, observations, infos):
            assert self.policy.config.greedy  # acting greedily during the call
            sizes.append(len(observations))
            return [str(o) for o in observations]

    agent = Recorder()
    answers = agent_act(agent)(list(range(70)), [{}] * 70)
    assert answers == [str(i) for i in range(70)]
    assert sizes == [LLM_BATCH_SIZE, LLM_BATCH_SIZE, 70 - 2 * LLM_BATCH_SIZE]
    assert not agent.policy.config.greedy  # restored
