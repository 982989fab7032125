"""``llmgym.wrap`` takes action names and field descriptions (issue 36, item 3)."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

import llmgym
from llmgym.errors import ConfigError


def test_named_actions_and_fields_reach_the_prompt_and_the_parser():
    env = llmgym.wrap(
        gym.make("CartPole-v1"),
        actions={"LEFT": "push the cart left", "RIGHT": "push the cart right"},
        fields={
            "position": "metres from the centre",
            "velocity": "m/s",
            "angle": "rad",
            "spin": "rad/s",
        },
    )
    obs, info = env.reset(seed=0)
    assert info["valid_actions"] == ["LEFT", "RIGHT"]
    assert (
        "LEFT: push the cart left" in info["system_prompt"]
        or "push the cart left" in info["system_prompt"]
    )
    assert "- position: metres from the centre" in info["system_prompt"]
    assert obs.splitlines()[0].startswith("position = ")
    *_, info = env.step('{"action": "RIGHT"}')
    assert info["parse"]["ok"] and info["parse"]["action"] == 1


def test_a_dict_observation_gets_key_descriptions():
    class DictEnv(gym.Env):
        observation_space = gym.spaces.Dict({"pos": gym.spaces.Discrete(4)})
        action_space = gym.spaces.Discrete(2)

        def reset(self, *, seed=None, options=None):
            super().reset(seed=seed)
            return {"pos": 1}, {}

        def step(self, action):
            return {"pos": 2}, 0.0, True, False, {}

    env = llmgym.wrap(DictEnv(), fields={"pos": "the cell you stand on"})
    _, info = env.reset(seed=0)
    assert "(the cell you stand on)" in info["system_prompt"]


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(actions=["A"]), "actions must give 2 different names"),
        (dict(actions=["A", "A"]), "actions must give 2 different names"),
        (dict(fields=["x"]), "fields must name the 4 entries"),
        (dict(fields="some text"), "fields must be a list of names or a dict"),
        (dict(actions="LEFT"), "actions must be a list of names or a dict"),
    ],
)
def test_names_that_do_not_fit_the_spaces_are_refused(kwargs, message):
    with pytest.raises(ConfigError, match=message):
        llmgym.wrap(gym.make("CartPole-v1"), **kwargs).reset(seed=0)


def test_a_json_list_never_names_a_discrete_action():
    env = llmgym.wrap(gym.make("Taxi-v3" if "Taxi-v3" in gym.registry else "Taxi-v4"))
    env.reset(seed=0)
    *_, info = env.step('{"action": [2, 1]}')
    assert info["parse"]["method"] == "fallback" and not info["parse"]["ok"]
    assert np.isscalar(info["parse"]["action"]) or info["parse"]["action"] is not None


def test_fields_on_an_observation_they_cannot_name_is_refused():
    with pytest.raises(ConfigError, match="this observation is Discrete"):
        llmgym.wrap(gym.make("FrozenLake-v1"), fields=["cell"]).reset(seed=0)
