"""The one episode loop: seeds decide the episodes, positioned envs, hooks, the step cap."""

from __future__ import annotations

import copy
import dataclasses
import json

import gymnasium as gym
import pytest

import llmgym  # noqa: F401  (registers the Text-* ids)
from llmgym.rollout import Step, cached, play


def _envs(n, **kwargs):
    return [gym.make("Text-FrozenLake-v1", **kwargs) for _ in range(n)]


def _down(observations, infos):
    return [json.dumps({"action": "DOWN"}) for _ in observations]


def _trace(episodes):
    return [(e.seed, e.ret, [s.observation for s in e.steps]) for e in episodes]


def test_episodes_depend_on_their_seeds_not_on_the_number_of_envs():
    seeds = list(range(100, 109))
    one = play(_down, _envs(1), seeds)
    three = play(_down, _envs(3), seeds)
    assert _trace(one) == _trace(three)
    assert [e.index for e in three] == list(range(9))
    assert len({tuple(t[2]) for t in _trace(three)}) > 1  # slippery: the seeds differ


def test_hooks_see_live_episodes_and_each_end_once():
    live_sizes, ended = [], []
    episodes = play(
        _down,
        _envs(2),
        [0, 1, 2],
        before_act=lambda live: live_sizes.append(len(live)),
        on_end=lambda slot, episode: ended.append((slot, episode.seed)),
    )
    assert sorted(seed for _, seed in ended) == [0, 1, 2]
    assert {slot for slot, _ in ended} <= {0, 1}
    assert max(live_sizes) == 2 and sum(live_sizes) == sum(e.length for e in episodes)
    assert all(e.wall_s > 0 for e in episodes)


def test_step_cap_marks_capped_episodes_truncated():
    episodes = play(_down, _envs(1, is_slippery=False), [0, 1], max_steps=2)
    assert [(e.length, e.capped, e.truncated) for e in episodes] == [(2, True, True)] * 2
    ended = play(_down, _envs(1, is_slippery=False), [0], max_steps=50)[0]
    assert not ended.capped and ended.steps[-1].terminated  # DOWN x4 falls in a hole first


def test_positioned_envs_continue_where_they_are():
    env = _envs(1, is_slippery=False)[0]
    prefix = play(_down, [env], [0], max_steps=1)[0]
    branches = [copy.deepcopy(env) for _ in range(2)]
    start = (prefix.final_observation, prefix.final_info)
    continued = play(_down, branches, [0, 0], starts=[start, start])
    full = play(_down, _envs(1, is_slippery=False), [0])[0]
    assert [e.length + 1 for e in continued] == [full.length] * 2
    assert continued[0].steps[0].observation == full.steps[1].observation
    with pytest.raises(ValueError, match="one seed per env"):
        play(_down, branches, [0], starts=[start, start])


def test_cached_actor_is_called_once_per_state():
    calls = []

    def act(observations, infos):
        calls.extend(observations)
        return _down(observations, infos)

    memo = cached(act, {})
    episodes = play(memo, _envs(4, is_slippery=False), [0, 1, 2, 3])
    assert _trace(episodes) == _trace(play(_down, _envs(1, is_slippery=False), [0, 1, 2, 3]))
    assert len(calls) == len(set(calls)) == episodes[0].length


def test_a_step_records_the_turn_and_nothing_a_trainer_computes():
    """Trainers build their own batch from the steps: the dead ``advantage``, ``ret`` and
    ``value`` fields are gone (issue 50), and a step is built as ``play`` builds it."""
    names = [f.name for f in dataclasses.fields(Step)]
    assert not {"advantage", "ret", "value"} & set(names)
    [episode] = play(_down, _envs(1), [0], max_steps=1)
    step = episode.steps[0]
    assert (step.action, step.num_actions, step.parse_ok) == ("DOWN", 4, True)
    assert step.raw_observation == 0 and step.info["parse"]["ok"]
