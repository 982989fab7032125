"""Exact evaluation of a FrozenLake map set (llmgym.evaluation.exact): the mean exact value
over its maps, against Monte Carlo on the text env (issue 53)."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

import llmgym  # noqa: F401  (registers the Text-* ids)
from llmgym.envs.registration import make_eval_env
from llmgym.evaluation.exact import exact_value, state_texts

HELDOUT = "Text-FrozenLakeMaps4x4-Heldout-v0"


def right_then_down(observations, infos):
    """A map-blind policy: along the top row, then down the right column."""
    return [json.dumps({"action": "RIGHT" if i["raw_obs"] % 4 < 3 else "DOWN"}) for i in infos]


def toward_goal_avoiding_holes(observations, infos):
    """A map-reading policy: from the map in the text, DOWN unless that cell is a hole or the
    bottom row, else RIGHT."""
    answers = []
    for obs in observations:
        rows = [line.split() for line in obs.splitlines()[1:]]
        row, col = next(
            (r, c) for r, line in enumerate(rows) for c, x in enumerate(line) if x == "A"
        )
        down_ok = row + 1 < len(rows) and rows[row + 1][col] != "H"
        answers.append(json.dumps({"action": "DOWN" if down_ok else "RIGHT"}))
    return answers


def sampled_returns(env_id, act, kwargs, episodes):
    """Returns of ``act`` played in the text env, episode j with seed j (map j % N)."""
    env = make_eval_env(env_id, **kwargs)
    returns = []
    for seed in range(episodes):
        obs, info = env.reset(seed=seed)
        total, done = 0.0, False
        while not done:
            obs, reward, terminated, truncated, info = env.step(act([obs], [info])[0])
            total, done = total + float(reward), terminated or truncated
        returns.append(total)
    return np.asarray(returns)


@pytest.mark.parametrize("act", [right_then_down, toward_goal_avoiding_holes])
def test_non_slippery_map_set_value_is_the_mean_success_over_its_maps(act):
    result = exact_value(HELDOUT, act)
    assert result.maps == 100 and result.horizon == 30 and result.parse_rate == 1.0
    assert result.value == pytest.approx(sampled_returns(HELDOUT, act, {}, 100).mean())


@pytest.mark.parametrize("act", [right_then_down, toward_goal_avoiding_holes])
def test_slippery_map_set_matches_monte_carlo(act):
    kwargs = {"is_slippery": True}
    result = exact_value(HELDOUT, act, kwargs)
    returns = sampled_returns(HELDOUT, act, kwargs, 3000)  # every map 30 times
    half = 1.96 * returns.std(ddof=1) / math.sqrt(len(returns))
    assert abs(returns.mean() - result.value) <= half, (result.value, returns.mean(), half)


def test_state_texts_cover_every_map():
    rows = state_texts("Text-FrozenLakeMaps5x5-Heldout-v0")
    starts = [text for raw, text, _ in rows if raw == 0]
    assert len(starts) == len(set(starts)) == 100  # one start per map, every map distinct
    assert [info["map_index"] for raw, _, info in rows if raw == 0] == list(range(100))
