"""``gym.make_vec`` gives the same text observations in every vectorization mode (issue 36:
async's shared memory used to return ``'aaaa...'``)."""

from __future__ import annotations

import gymnasium as gym
import pytest

import llmgym  # noqa: F401  (registers the Text-* ids)

IDS = ["Text-Blackjack-v1", "Text-CartPole-v1", "Text-FrozenLake-v1"]


def _trace(env_id: str, mode: str, **vector_kwargs) -> list:
    envs = gym.make_vec(env_id, num_envs=2, vectorization_mode=mode, vector_kwargs=vector_kwargs)
    try:
        observations, infos = envs.reset(seed=7)
        trace = [tuple(observations)]
        for _ in range(3):
            answers = [f'{{"action": "{a[0]}"}}' for a in infos["valid_actions"]]
            observations, rewards, _, _, infos = envs.step(answers)
            trace.append((tuple(observations), tuple(rewards)))
        return trace
    finally:
        envs.close()


@pytest.mark.parametrize("env_id", IDS)
def test_async_observations_equal_sync(env_id):
    sync = _trace(env_id, "sync")
    assert all(o and not set(o) <= {"a"} for o in sync[0])
    assert _trace(env_id, "async") == sync
    assert _trace(env_id, "async", shared_memory=False) == sync


def test_a_free_text_env_travels_through_async_too():
    """The math envs (free-text answers, no valid actions) use the same observation space."""
    pytest.importorskip("reasoning_gym")

    def trace(mode: str, **vector_kwargs) -> list:
        envs = gym.make_vec(
            "Text-Arithmetic-v0", num_envs=2, vectorization_mode=mode, vector_kwargs=vector_kwargs
        )
        try:
            observations, _ = envs.reset(seed=7)
            out = [tuple(observations)]
            observations, rewards, *_ = envs.step(['{"answer": "1"}'] * 2)
            return out + [(tuple(observations), tuple(rewards))]
        finally:
            envs.close()

    sync = trace("sync")
    assert all(o and not set(o) <= {"a"} for o in sync[0])
    assert trace("async") == sync
    assert trace("async", shared_memory=False) == sync
