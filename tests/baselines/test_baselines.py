"""Reference agents: exact values, Monte Carlo agreement, text actions, name resolution."""

from __future__ import annotations

import json

import gymnasium as gym
import numpy as np
import pytest

import llmgym  # noqa: F401  (registers Text-* ids)
from llmgym.agents.registry import AgentError
from llmgym.baselines.agents import format_action, make_baseline
from llmgym.baselines.planning import blackjack_solution, evaluate_tabular, solve_tabular
from llmgym.bench.suites import SUITES


def _monte_carlo(env_id: str, agent, episodes: int) -> np.ndarray:
    env = gym.make(env_id)
    returns = np.zeros(episodes)
    for i in range(episodes):
        obs, _ = env.reset(seed=i)
        done = False
        while not done:
            obs, reward, terminated, truncated, _ = env.step(agent.act(obs))
            returns[i] += reward
            done = terminated or truncated
    return returns


def test_blackjack_dp_matches_known_values():
    assert blackjack_solution().start_value == pytest.approx(-0.0431, abs=5e-4)
    assert blackjack_solution(sab=False).start_value == pytest.approx(-0.0466, abs=5e-4)


def test_blackjack_optimal_agent_reaches_dp_value():
    returns = _monte_carlo("Blackjack-v1", make_baseline("optimal", "Blackjack-v1"), 20_000)
    standard_error = returns.std() / np.sqrt(len(returns))
    assert abs(returns.mean() - blackjack_solution().start_value) < 4 * standard_error


def test_frozen_lake_optimal_value_and_agent():
    lake = gym.make("FrozenLake-v1").unwrapped
    _, exact = solve_tabular(lake.P, lake.initial_state_distrib, horizon=100)
    # 0.744 is the time-aware optimum; the best stationary policy gets 0.7402.
    assert exact == pytest.approx(0.744, abs=0.005)
    returns = _monte_carlo("FrozenLake-v1", make_baseline("optimal", "FrozenLake-v1"), 3_000)
    assert abs(returns.mean() - exact) < 4 * returns.std() / np.sqrt(len(returns))


@pytest.mark.parametrize(("env_id", "horizon", "expected"), [("CliffWalking-v1", 200, -13.0)])
def test_deterministic_grid_is_solved_exactly(env_id, horizon, expected):
    base = gym.make(env_id).unwrapped
    policy, value = solve_tabular(base.P, base.initial_state_distrib, horizon)
    assert value == expected
    assert evaluate_tabular(base.P, policy, base.initial_state_distrib, horizon) == expected


def test_taxi_optimal_is_near_the_published_optimum():
    base = gym.make("Taxi-v4").unwrapped
    assert solve_tabular(base.P, base.initial_state_distrib, 200)[1] == pytest.approx(
        7.93, abs=0.01
    )


def test_cartpole_controller_balances_through_the_text_env():
    env = gym.make("Text-CartPole-v1")
    agent = make_baseline("optimal", "Text-CartPole-v1")
    for seed in range(3):
        obs, info = env.reset(seed=seed)
        total, done = 0.0, False
        while not done:
            obs, reward, terminated, truncated, info = env.step(agent.act_text(obs, info))
            assert info["parse"]["ok"]
            total += reward
            done = terminated or truncated
        assert total == 500.0


@pytest.mark.parametrize("env_id", SUITES["classic"])
@pytest.mark.parametrize("name", ["random", "optimal"])
def test_text_actions_parse_in_every_classic_env(env_id, name):
    env = gym.make(env_id)
    agent = make_baseline(name, env_id, seed=0)
    obs, info = env.reset(seed=0)
    for _ in range(3):
        obs, _, terminated, truncated, info = env.step(agent.act_text(obs, info))
        assert info["parse"]["ok"] and info["parse"]["method"] == "json"
        if terminated or truncated:
            break


def test_random_agent_is_seeded():
    a, b = make_baseline("random", "Taxi-v4", seed=3), make_baseline("random", "Taxi-v4", seed=3)
    assert [a.act(0) for _ in range(20)] == [b.act(0) for _ in range(20)]


def test_random_agent_answers_a_free_text_env_with_its_sampled_text():
    """On a Text action space (math) the random agent's answer is the text it drew, which the
    env parses as any answer (it was read as numbers: `bench --suite language` exited 2)."""
    env = gym.make("Text-Arithmetic-v0")
    agent = make_baseline("random", "Text-Arithmetic-v0", seed=0)
    obs, info = env.reset(seed=0)
    answer = agent.act_text(obs, info)
    assert isinstance(answer, str) and not answer.startswith('{"action"')
    _, reward, terminated, truncated, _ = env.step(answer)
    assert reward in (0.0, 1.0) and (terminated or truncated)


def test_random_agent_seeded_per_episode_is_not_the_envs_stream():
    """Seeded by the episode seed, the agent must not draw the numbers the env draws with it:
    that made random Blackjack worth -0.33 (the uniform random policy is worth -0.40)."""
    env = gym.make("Text-Blackjack-v1")
    agent = make_baseline("random", "Text-Blackjack-v1")
    returns = []
    for seed in range(5000):
        obs, info = env.reset(seed=seed)
        agent.seed_episodes([seed])
        done, total = False, 0.0
        while not done:
            [action] = agent.act_batch([obs], [info])
            obs, reward, terminated, truncated, info = env.step(action)
            total, done = total + reward, terminated or truncated
        returns.append(total)
    assert abs(np.mean(returns) - (-0.40)) < 0.035  # 95 % CI of 5,000 episodes: +-0.027


def test_batched_and_single_actions_agree():
    env = gym.make("Text-Blackjack-v1")
    agent = make_baseline("optimal", "Text-Blackjack-v1")
    starts = [env.reset(seed=s) for s in range(10)]
    batch = agent.act_batch([o for o, _ in starts], [i for _, i in starts])
    assert batch == [agent.act_text(o, i) for o, i in starts]


def test_format_action_round_trips_continuous_actions():
    assert format_action(np.array([1.25, -0.5]), None) == '{"action": [1.25, -0.5]}'


@pytest.mark.parametrize(
    ("name", "env_id", "message"),
    [
        ("oracle", "CartPole-v1", "Unknown baseline 'oracle'"),
        ("random", "NoSuchEnv-v0", "Unknown environment"),
        ("sb3-dqn", "Pendulum-v1", "DQN needs discrete actions"),
    ],
)
def test_user_errors_are_one_sentence(name, env_id, message):
    with pytest.raises(AgentError, match=message):
        make_baseline(name, env_id)


def test_random_agent_picks_among_varying_valid_actions():
    agent = make_baseline("random", "Text-Arithmetic-v0", seed=0)
    infos = [{"valid_actions": ["go west", "look", "eat apple"], "raw_obs": ""}] * 30
    answers = {json.loads(a)["action"] for a in agent.act_batch([""] * 30, infos)}
    assert answers == {"go west", "look", "eat apple"}
