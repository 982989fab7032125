"""Fixtures for the agents tests: the tiny random-init model and a few text observations."""

from __future__ import annotations

import gymnasium as gym
import pytest

import llmgym  # noqa: F401  (registers the Text-* envs)

pytest.importorskip("torch")
pytest.importorskip("transformers")


@pytest.fixture
def tiny():
    from llmgym.agents.testing import tiny_model

    return tiny_model(0)


def observations(env_id: str, n: int, seed: int = 0, steps: int = 0) -> tuple[list, list]:
    """``n`` (observation, info) pairs from different seeds (prompts of different lengths)."""
    obs, infos = [], []
    for i in range(n):
        env = gym.make(env_id)
        o, info = env.reset(seed=seed + i)
        for _ in range(steps + i % 2):
            o, _, terminated, truncated, info = env.step('{"action": "LEFT"}')
            if terminated or truncated:
                break
        obs.append(o)
        infos.append(info)
    return obs, infos


@pytest.fixture
def blackjack():
    return observations("Text-Blackjack-v1", 4)


@pytest.fixture
def cartpole():
    return observations("Text-CartPole-v1", 4)
