"""Exact evaluation agrees with long Monte Carlo runs, shows the policy the env's own text,
and is reachable from ``llmgym eval --exact``."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
from typer.testing import CliRunner

import llmgym  # noqa: F401
from llmgym.agents.exact import exact_value, supports_exact
from llmgym.agents.registry import make_agent
from llmgym.cli import app


def stick_from(threshold: int):
    """Hit below ``threshold`` (the player's total), stick from it on."""

    def act(observations, infos):
        totals = [info["raw_obs"][0] for info in infos]
        return [f'{{"action": "{"hit" if t < threshold else "stick"}"}}' for t in totals]

    return act


def monte_carlo(env_id, act, episodes, env_kwargs=None):
    """Mean return and 95 % CI half-width of ``act`` over seeded episodes."""
    env = gym.make(env_id, **(env_kwargs or {}))
    returns = []
    for seed in range(episodes):
        obs, info = env.reset(seed=seed)
        total, done = 0.0, False
        while not done:
            [answer] = act([obs], [info])
            obs, reward, terminated, truncated, info = env.step(answer)
            total += reward
            done = terminated or truncated
        returns.append(total)
    return float(np.mean(returns)), 1.96 * float(np.std(returns)) / np.sqrt(episodes)


@pytest.mark.parametrize("threshold", [12, 17])
def test_blackjack_exact_matches_monte_carlo(threshold):
    act = stick_from(threshold)
    exact = exact_value("Text-Blackjack-v1", act).value
    mean, ci = monte_carlo("Text-Blackjack-v1", act, 6000)
    assert abs(exact - mean) <= ci


def test_frozenlake_optimum_matches_monte_carlo():
    act = make_agent("optimal", "Text-FrozenLake-v1").act_batch
    result = exact_value("Text-FrozenLake-v1", act)
    assert result.value == pytest.approx(0.7402, abs=1e-4)
    mean, ci = monte_carlo("Text-FrozenLake-v1", act, 3000)
    assert abs(result.value - mean) <= ci


def test_known_values_and_the_step_cap():
    optimal = make_agent("optimal", "Text-Blackjack-v1").act_batch
    assert exact_value("Text-Blackjack-v1", optimal).value == pytest.approx(-0.0431, abs=1e-4)
    always_left = lambda obs, infos: ['{"action": "LEFT"}'] * len(obs)  # noqa: E731
    # FrozenLake: always LEFT from the start never reaches the goal; CliffWalking: -1 per step
    # until the 200-step default cap (it has no registered limit).
    assert exact_value("Text-FrozenLake-v1", always_left).value == 0.0
    assert exact_value("Text-CliffWalking-v1", always_left).value == pytest.approx(-200.0)
    assert exact_value("Text-CliffWalking-v1", always_left, max_steps=10).value == -10.0


def test_unparseable_answers_take_the_envs_fallback():
    garbage = lambda obs, infos: ["no idea"] * len(obs)  # noqa: E731
    result = exact_value("Text-Blackjack-v1", garbage)
    assert result.parse_rate == 0.0
    # The fallback is the first valid action, stick: the always-stick value.
    assert result.value == pytest.approx(exact_value("Text-Blackjack-v1", stick_from(0)).value)


def test_the_policy_sees_the_envs_own_text():
    seen: dict = {}

    def record(observations, infos):
        for obs, info in zip(observations, infos):
            seen[info["raw_obs"]] = (obs, info["system_prompt"], info["valid_actions"])
        return ['{"action": "DOWN"}'] * len(observations)

    exact_value("Text-Taxi-v4", record)
    env = gym.make("Text-Taxi-v4")
    for seed in range(5):
        obs, info = env.reset(seed=seed)
        for action in ["SOUTH", "NORTH", "EAST", "WEST"]:
            assert seen[info["raw_obs"]] == (obs, info["system_prompt"], info["valid_actions"])
            obs, _, _, _, info = env.step(f'{{"action": "{action}"}}')


def test_supported_envs():
    assert supports_exact("Text-FrozenLake8x8-v1")
    assert supports_exact("Text-FrozenLake-v1", {"is_slippery": False})
    assert not supports_exact("Text-CartPole-v1")
    assert not supports_exact("Text-Taxi-v4", {"fickle_passenger": True})
    with pytest.raises(ValueError, match="sampled episodes"):
        exact_value("Text-CartPole-v1", lambda o, i: [])


def test_cli_exact():
    runner = CliRunner()
    args = ["eval", "Text-FrozenLake-v1", "--agent", "optimal", "--exact", "--no-progress"]
    result = runner.invoke(app, [*args, "--env-kwarg", "is_slippery=false"])
    assert result.exit_code == 0, result.output
    assert "+1.0000" in result.output
    refused = runner.invoke(app, ["eval", "Text-CartPole-v1", "--agent", "optimal", "--exact"])
    assert refused.exit_code == 2
    assert "Traceback" not in refused.output
