"""FrozenLake map sets (llmgym.envs.maps): disjoint, solvable, and on each map the same env
as Gymnasium's FrozenLake built with that map (issue 53)."""

from __future__ import annotations

from collections import deque

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.envs.toy_text.frozen_lake import generate_random_map

import llmgym  # noqa: F401  (registers the Text-* ids)
from llmgym.envs.maps import (
    MAP_SETS,
    MAP_SIZES,
    FrozenLakeMapsEnv,
    map_kind,
    map_seeds,
    maps_of,
)
from llmgym.envs.registration import check_env_kwargs
from llmgym.errors import ConfigError

IDS = [f"Text-FrozenLakeMaps{n}x{n}-{name.capitalize()}-v0" for n in MAP_SIZES for name in MAP_SETS]


def solvable(desc: list[str]) -> bool:
    """A path from S to G over non-hole tiles (breadth-first search)."""
    n = len(desc)
    seen, todo = {(0, 0)}, deque([(0, 0)])
    while todo:
        row, col = todo.popleft()
        if desc[row][col] == "G":
            return True
        for r, c in ((row + 1, col), (row - 1, col), (row, col + 1), (row, col - 1)):
            if 0 <= r < n and 0 <= c < n and desc[r][c] != "H" and (r, c) not in seen:
                seen.add((r, c))
                todo.append((r, c))
    return False


@pytest.mark.parametrize("size", MAP_SIZES)
def test_sets_are_disjoint_full_and_solvable(size):
    train, heldout = maps_of("train", size), maps_of("heldout", size)
    assert (len(train), len(heldout)) == (MAP_SETS["train"], MAP_SETS["heldout"]) == (1000, 100)
    assert not set(map_seeds("train", size)) & set(map_seeds("heldout", size))
    assert not {tuple(m) for m in train} & {tuple(m) for m in heldout}
    for desc in train + heldout:
        assert len(desc) == size and desc[0][0] == "S" and desc[-1][-1] == "G"
        assert solvable(desc)


@pytest.mark.parametrize("size", MAP_SIZES)
@pytest.mark.parametrize("name", MAP_SETS)
def test_a_set_holds_each_map_once_at_its_first_seed(name, size):
    """Distinct maps, so a mean over the set weights each map once; each at the first seed
    that draws it, and every seed skipped before the last repeats a map of the set or is of
    the other set."""
    seeds, maps = map_seeds(name, size), maps_of(name, size)
    assert len({tuple(m) for m in maps}) == len(maps) == MAP_SETS[name]
    assert seeds == sorted(seeds)
    held = {tuple(m): s for s, m in zip(seeds, maps)}
    for seed in range(seeds[-1]):
        desc = tuple(generate_random_map(size, p=0.8, seed=seed))
        if map_kind(list(desc)) == name:
            assert held[desc] <= seed  # in the set, first drawn at or before this seed


@pytest.mark.parametrize("name", MAP_SETS)
def test_maps_are_generate_random_map_of_their_seeds(name):
    seeds, maps = map_seeds(name, 5), maps_of(name, 5)
    assert all(generate_random_map(5, p=0.8, seed=s) == m for s, m in zip(seeds, maps))


@pytest.mark.parametrize("is_slippery", [False, True])
@pytest.mark.parametrize("env_id", IDS)
def test_a_map_variant_equals_gymnasium_frozen_lake_with_the_same_desc(env_id, is_slippery):
    text_env = gym.make(env_id, is_slippery=is_slippery)
    maps = text_env.unwrapped.maps
    for seed in range(20):
        desc = maps[seed % len(maps)]
        base = gym.make("FrozenLake-v1", desc=desc, is_slippery=is_slippery, max_episode_steps=30)
        obs, info = text_env.reset(seed=seed)
        state, _ = base.reset(seed=seed)
        assert info["raw_obs"] == state and np.array_equal(
            text_env.unwrapped.desc, base.unwrapped.desc
        )
        assert text_env.unwrapped.P == base.unwrapped.P
        names, rng = info["valid_actions"], np.random.default_rng(seed)
        done = False
        while not done:
            action = int(rng.integers(4))
            obs, reward, terminated, truncated, info = text_env.step(names[action])
            expected = base.step(action)
            assert (info["raw_obs"], reward, terminated, truncated) == (*expected[:4],)
            done = terminated or truncated


def test_seed_picks_the_map_and_the_step_cap_is_30():
    env = gym.make("Text-FrozenLakeMaps4x4-Heldout-v0")
    assert env.spec.max_episode_steps == 30
    n = len(env.unwrapped.maps)
    env.reset(seed=7)
    assert env.unwrapped.map_index == 7
    env.reset(seed=7 + n)
    assert env.unwrapped.map_index == 7
    assert "not slippery" in env.reset(seed=0)[1]["system_prompt"]  # non-slippery by default
    obs, _ = gym.make("Text-FrozenLakeMaps4x4-Heldout-v0", is_slippery=True).reset(seed=0)
    assert obs.startswith("You are at row 0, column 0")


def test_map_kwargs_select_the_set_and_size():
    env = gym.make("Text-FrozenLakeMaps4x4-Train-v0", map_set="heldout", map_size=5)
    assert env.unwrapped.maps == maps_of("heldout", 5)
    assert isinstance(env.unwrapped, FrozenLakeMapsEnv)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"map_set": "foo"}, "Unknown map_set 'foo': use train or heldout."),
        ({"map_size": 3}, "map_size must be 4 or 5 (a side of the square map), not 3."),
        ({"map_size": "big"}, "Env kwarg map_size must be a whole number, not 'big'."),
    ],
)
def test_bad_map_kwargs_are_one_sentence(kwargs, message):
    with pytest.raises(ConfigError) as error:
        check_env_kwargs("Text-FrozenLakeMaps4x4-Train-v0", kwargs)
    assert str(error.value) == message


def test_the_env_info_names_the_map_it_plays():
    env = gym.make("Text-FrozenLakeMaps4x4-Heldout-v0")
    _, info = env.reset(seed=103)
    assert info["map_index"] == 3 and info["map"] == maps_of("heldout", 4)[3]
    *_, info = env.step(info["valid_actions"][1])
    assert info["map_index"] == 3 and info["map"] == maps_of("heldout", 4)[3]


def test_the_map_grid_shows_each_maps_cells_and_the_agent():
    """``MapGrid`` (the observation SB3 is given in benchmarks/maps_sb3.py): the planes hold
    exactly the map the episode plays, and the agent plane follows the position."""
    from llmgym.envs.maps import MapGrid

    env = MapGrid(FrozenLakeMapsEnv("train", 5))
    for seed in (0, 7, 999):
        obs, info = env.reset(seed=seed)
        frozen, hole, goal, agent = obs.reshape(4, 5, 5)
        desc = np.array([list(row) for row in info["map"]])
        assert (hole == (desc == "H")).all() and (goal == (desc == "G")).all()
        assert (frozen == np.isin(desc, ["F", "S"])).all()
        assert agent[0, 0] == 1 and agent.sum() == 1
        obs, *_ = env.step(2)  # RIGHT
        agent = obs.reshape(4, 5, 5)[3]
        assert agent.sum() == 1 and agent.flat[env.unwrapped.s] == 1
