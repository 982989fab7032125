"""Spaces with a start, any shape, integer or infinite bounds: parsed into the space and
described with their real ranges (issue 13, items 3 and 4)."""

import gymnasium as gym
import numpy as np
import pytest
from gymnasium import spaces

import llmgym


class ActEnv(gym.Env):
    """A one-number observation and whatever action space the test gives."""

    def __init__(self, action_space: spaces.Space):
        self.observation_space = spaces.Box(-1.0, 1.0, (1,), np.float32)
        self.action_space = action_space
        self.last_action = None

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return np.zeros(1, np.float32), {}

    def step(self, action):
        self.last_action = action
        return np.zeros(1, np.float32), 0.0, False, False, {}


def _step(space, text, **kwargs):
    env = llmgym.wrap(ActEnv(space), **kwargs)
    _, info = env.reset(seed=0)
    *_, step_info = env.step(text)
    return env.unwrapped.last_action, step_info["parse"], info["system_prompt"]


def test_multidiscrete_start_parses_into_the_space_and_prompt_states_ranges():
    space = spaces.MultiDiscrete([3, 5], start=[-2, 10])
    action, parse, prompt = _step(space, '{"action": [-1, 12]}')
    assert action.tolist() == [-1, 12] and space.contains(action)
    assert parse["ok"] and not parse["clipped"]
    assert "[-2, 0], [10, 14]" in prompt
    action, parse, _ = _step(space, '{"action": [5, 0]}')
    assert action.tolist() == [0, 10] and parse["clipped"]


def test_multidiscrete_start_random_fallback_stays_in_the_space():
    space = spaces.MultiDiscrete([3, 5], start=[-2, 10])
    env = llmgym.wrap(ActEnv(space), on_invalid="random")
    env.reset(seed=0)
    for _ in range(20):
        env.step("no idea")
        assert space.contains(env.unwrapped.last_action)


def test_discrete_start_names_and_values():
    space = spaces.Discrete(3, start=-1)
    action, parse, prompt = _step(space, '{"action": "1"}')
    assert action == 1 and space.contains(action)
    assert "- -1: action -1" in prompt and "- 1: action 1" in prompt


@pytest.mark.parametrize("shape", [4, (2, 3), (1, 2, 2)])
def test_multibinary_of_any_shape(shape):
    space = spaces.MultiBinary(shape)
    size = int(np.prod(space.shape))
    bits = [1, 0] * size
    action, parse, prompt = _step(space, f'{{"action": {bits[:size]}}}')
    assert parse["ok"] and space.contains(action)
    assert action.ravel().tolist() == bits[:size]
    assert f"{size} bits" in prompt


def test_integer_box_rounds_clips_and_states_integer_bounds():
    space = spaces.Box(0, 10, (2,), np.int64)
    action, parse, prompt = _step(space, "[3.7, 99]")
    assert action.tolist() == [4, 10] and space.contains(action) and parse["clipped"]
    assert "[0, 10], [0, 10]" in prompt


def test_large_integer_box_keeps_precision():
    space = spaces.Box(0, 2**40, (1,), np.int64)
    action, parse, _ = _step(space, "[123456789012]")
    assert action.tolist() == [123456789012] and not parse["clipped"]


def test_unbounded_float_box_is_clipped_to_finite_values_and_reported():
    space = spaces.Box(-np.inf, np.inf, (2,), np.float32)
    action, parse, prompt = _step(space, "[1e300, 0.5]")
    assert np.all(np.isfinite(action)) and space.contains(action)
    assert action[0] == np.finfo(np.float32).max and action[1] == 0.5
    assert parse["clipped"] and "clipped" in parse["error"]
    assert "[-inf, inf]" in prompt


def test_half_bounded_float64_box():
    space = spaces.Box(np.array([0.0]), np.array([np.inf]), dtype=np.float64)
    action, parse, _ = _step(space, "[-1e308]")
    assert action.tolist() == [0.0] and parse["clipped"]
    action, parse, _ = _step(space, "[1e308]")
    assert action.tolist() == [1e308] and not parse["clipped"]
