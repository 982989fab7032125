"""SB3 baselines: a tiny training run, the cache, and the agent on the text env."""

from __future__ import annotations

import gymnasium as gym
import pytest

import llmgym  # noqa: F401

pytest.importorskip("stable_baselines3")

from llmgym.agents import sb3  # noqa: E402
from llmgym.agents.baselines import make_baseline  # noqa: E402


@pytest.fixture(autouse=True)
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("LLMGYM_CACHE", str(tmp_path))
    return tmp_path


def test_train_caches_and_reuses(cache):
    path = sb3.train("CartPole-v1", "ppo", timesteps=512, progress=False)
    assert path.exists() and path.parent == cache
    assert path.with_suffix(".json").exists()
    stamp = path.stat().st_mtime_ns
    assert sb3.train("CartPole-v1", "ppo", timesteps=512, progress=False) == path
    assert path.stat().st_mtime_ns == stamp
    assert sb3.model_path("CartPole-v1", "ppo", timesteps=1024) != path


def test_flattened_tuple_observations_play_the_text_env(monkeypatch):
    tiny = sb3.SB3Config(300, "test", hyperparams=dict(learning_starts=100))
    monkeypatch.setitem(sb3.HYPERPARAMS, ("Blackjack-v1", "dqn"), tiny)
    agent = make_baseline("sb3-dqn", "Text-Blackjack-v1")  # trains (300 steps), then loads
    env = gym.make("Text-Blackjack-v1")
    obs, info = env.reset(seed=0)
    _, _, _, _, info = env.step(agent.act_text(obs, info))
    assert info["parse"]["ok"]
    assert agent.name == "sb3-dqn"


def test_discrete_observations_batch(monkeypatch):
    tiny = sb3.SB3Config(256, "test", n_envs=2, hyperparams=dict(n_steps=64))
    monkeypatch.setitem(sb3.HYPERPARAMS, ("FrozenLake-v1", "a2c"), tiny)
    agent = make_baseline("sb3-a2c", "FrozenLake-v1")
    actions = agent.act_many([0, 1, 2])
    assert len(actions) == 3 and all(isinstance(a, int) for a in actions)


def test_unknown_algorithm_is_a_user_error():
    with pytest.raises(ValueError, match="Unknown algorithm"):
        sb3.train("CartPole-v1", "sac")
