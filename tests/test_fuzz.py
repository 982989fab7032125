"""Fuzz harness: arbitrary text into env.step never raises and always yields an action inside
the base action space (issue 13, item 10). A bounded number of examples by default; the
``fuzz``-marked test runs 10^5 (about 17 minutes: ``make test-fuzz``, not part of
``make test``)."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
from gymnasium import spaces
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import llmgym

SPACES = {
    "discrete-start": spaces.Discrete(5, start=-3),
    "multidiscrete-start": spaces.MultiDiscrete([3, 5], start=[-2, 10]),
    "box-infinite": spaces.Box(-np.inf, np.inf, (2,), np.float32),
    "box-half": spaces.Box(np.array([0.0, -np.inf]), np.array([np.inf, 1.0]), dtype=np.float64),
    "box-int": spaces.Box(-5, 5, (3,), np.int64),
    "multibinary-2d": spaces.MultiBinary((2, 2)),
}
LANGUAGE = ["Text-Arithmetic-v0", "Text-GSM-Stepwise-v0"]

pieces = st.sampled_from(
    [
        "action:",
        "Action = ",
        "answer is",
        "\\boxed{",
        "{",
        "}",
        "[",
        "]",
        '"action": ',
        "\n",
        " ",
        "1e300",
        "-1e308",
        "nan",
        "inf",
        "-2",
        "12",
        "0.5",
        ",",
        "LEFT",
        "```",
    ]
)
texts = st.one_of(
    st.text(max_size=300),
    st.lists(st.one_of(pieces, st.text(max_size=5)), max_size=60).map("".join),
    st.builds(lambda p, n: p * n, pieces, st.integers(0, 3000)),
)


class ActEnv(gym.Env):
    def __init__(self, action_space):
        self.observation_space = spaces.Box(-1.0, 1.0, (1,), np.float32)
        self.action_space = action_space

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return np.zeros(1, np.float32), {}

    def step(self, action):
        assert self.action_space.contains(np.asarray(action, dtype=self.action_space.dtype)), action
        assert np.all(np.isfinite(np.asarray(action, dtype=np.float64))), action
        return np.zeros(1, np.float32), 0.0, False, False, {}


def _space_envs():
    return {k: llmgym.wrap(ActEnv(s)) for k, s in SPACES.items()}


def _language_envs():
    pytest.importorskip("reasoning_gym")
    return {k: gym.make(k) for k in LANGUAGE}


def _check(env, text):
    env.reset(seed=0)
    obs, reward, terminated, truncated, info = env.step(text)
    assert isinstance(obs, str) and np.isfinite(float(reward))
    assert isinstance(info["parse"]["ok"], bool)


def _run(n: int) -> None:
    envs = _space_envs() | _language_envs()

    @settings(max_examples=n, deadline=None, suppress_health_check=list(HealthCheck))
    @given(name=st.sampled_from(sorted(envs)), text=texts)
    def run(name, text):
        _check(envs[name], text)

    run()


def test_fuzz_bounded():
    _run(300)


@pytest.mark.fuzz
def test_fuzz_100k():
    _run(100_000)
