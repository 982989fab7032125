"""The exact value of each constant policy, the best of them, and telling a constant greedy
policy from a state-dependent one (issue 35, item 4)."""

from __future__ import annotations

import json

import gymnasium as gym
import pytest

import llmgym  # noqa: F401  (registers the Text-* ids)
from llmgym.evaluation.constant import constant_values, greedy_constant
from llmgym.evaluation.exact import exact_value


def _always(name: str):
    return lambda observations, infos: [json.dumps({"action": name})] * len(observations)


def test_blackjack_constants():
    consts = constant_values("Text-Blackjack-v1")
    assert consts.values["stick"] == pytest.approx(-0.1829, abs=5e-5)  # the README's figure
    assert consts.values["hit"] == pytest.approx(-1.0)  # hitting forever always busts
    assert consts.best == "stick" and consts.best_value == consts.values["stick"]
    assert consts.actions == {0: "stick", 1: "hit"}


def _recursion(P, start, action: int, horizon: int) -> float:
    """Expected return of always ``action`` within ``horizon`` steps, from the env's own
    transition table (no llmgym code)."""
    value = [0.0] * len(P)
    for _ in range(horizon):
        value = [
            sum(p * (r + (0.0 if done else value[nxt])) for p, nxt, r, done in P[s][action])
            for s in range(len(P))
        ]
    return sum(q * v for q, v in zip(start, value))


@pytest.mark.parametrize("slippery", [True, False])
def test_frozenlake_constants_match_a_direct_recursion(slippery):
    kwargs = {"is_slippery": slippery}
    consts = constant_values("Text-FrozenLake-v1", kwargs)
    lake = gym.make("FrozenLake-v1", **kwargs).unwrapped
    horizon = gym.spec("Text-FrozenLake-v1").max_episode_steps
    expected = {
        name: _recursion(lake.P, lake.initial_state_distrib, a, horizon)
        for a, name in enumerate(["LEFT", "DOWN", "RIGHT", "UP"])
    }
    assert consts.values == pytest.approx(expected, abs=1e-12)
    assert consts.best_value == pytest.approx(max(expected.values()), abs=1e-12)
    if slippery:  # DOWN slides towards the goal now and then; no constant walks the ice
        assert consts.best == "DOWN" and 0.04 < consts.best_value < 0.06
    else:
        assert consts.best_value == 0.0


def test_a_constant_policy_is_told_from_a_state_dependent_one():
    consts = constant_values("Text-Blackjack-v1")

    def stick_at_17(observations, infos):
        return [json.dumps({"action": "stick" if i["raw_obs"][0] >= 17 else "hit"}) for i in infos]

    assert consts.constant_action(exact_value("Text-Blackjack-v1", stick_at_17)) is None
    assert greedy_constant("Text-Blackjack-v1", _always("stick")) == "stick"
    assert greedy_constant("Text-Blackjack-v1", lambda obs, _: ["??"] * len(obs)) == "stick"
    lake = greedy_constant("Text-FrozenLake-v1", _always("UP"), {"is_slippery": False})
    assert lake == "UP"


def test_envs_without_exact_evaluation_have_none():
    assert constant_values("Text-CartPole-v1") is None

    def never(observations, infos):
        raise AssertionError("act must not be called without exact evaluation")

    assert greedy_constant("Text-CartPole-v1", never) is None
