"""FrozenLake map sets: generated maps for measuring transfer to maps a policy never trained on.

A map set is a fixed list of distinct maps from ``generate_random_map(size, p=0.8, seed)``.
Each map belongs to ``train`` or ``heldout`` by a hash of its layout (a fifth are held out), so
the two sets share no map and no seed. A set holds the first ``MAP_SETS[name]`` distinct maps
of its kind from generator seeds 0, 1, 2, ... in that order: a seed whose map repeats one the
set already holds is skipped (4x4 maps repeat often), so a mean over the set weights each
distinct map once. ``map_seeds`` lists the generator seed of each map (its first occurrence).
``FrozenLakeMapsEnv`` loads map ``seed % len(maps)`` on ``reset(seed=seed)``: episode seeds
0..N-1 play every map once (an episode seed is a place in the set, not a generator seed).

Example:
    >>> env = FrozenLakeMapsEnv("heldout", 4)
    >>> _ = env.reset(seed=3)
    >>> env.map_index, env.desc.shape
    (3, (4, 4))
    >>> [len({tuple(m) for m in maps_of(name, 4)}) for name in MAP_SETS], sorted(BASE_IDS)[0]
    ([1000, 100], 'FrozenLakeMaps4x4-Heldout-v0')
"""

from __future__ import annotations

import functools
import zlib
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.envs.toy_text.frozen_lake import FrozenLakeEnv, generate_random_map

from llmgym.errors import ConfigError

#: Distinct maps in each set (of either size).
MAP_SETS = {"train": 1000, "heldout": 100}
#: Map sides a set can have.
MAP_SIZES = (4, 5)
#: Probability that a generated tile is frozen (not a hole).
FROZEN_P = 0.8
#: Generator seeds tried at most for a set (4x4 train, the slowest, is full at seed 5,578).
MAX_SEEDS = 100_000
#: Step cap of the registered map-set ids.
MAX_STEPS = 30
#: Base Gymnasium ids of the map sets (their ``Text-`` twins are in the catalog) -> kwargs.
BASE_IDS = {
    f"FrozenLakeMaps{size}x{size}-{name.capitalize()}-v0": {"map_set": name, "map_size": size}
    for size in MAP_SIZES
    for name in MAP_SETS
}


def map_kind(desc: list[str]) -> str:
    """``heldout`` for the fifth of layouts whose CRC-32 is divisible by 5, else ``train``.

    Example:
        >>> map_kind(["SFFF", "FHFH", "FFFH", "HFFG"])
        'train'
    """
    return "heldout" if zlib.crc32("".join(desc).encode()) % 5 == 0 else "train"


@functools.cache
def _generated(name: str, size: int) -> tuple[tuple[int, tuple[str, ...]], ...]:
    """``(seed, map)`` of set ``name``: generator seeds 0, 1, 2, ... until it holds
    ``MAP_SETS[name]`` distinct maps of its kind, each at the first seed that draws it."""
    found: list[tuple[int, tuple[str, ...]]] = []
    seen: set[tuple[str, ...]] = set()
    for seed in range(MAX_SEEDS):
        if len(found) == MAP_SETS[name]:
            return tuple(found)
        desc = tuple(generate_random_map(size, p=FROZEN_P, seed=seed))
        if desc not in seen and map_kind(list(desc)) == name:
            seen.add(desc)
            found.append((seed, desc))
    raise RuntimeError(f"Seeds 0..{MAX_SEEDS - 1} draw too few distinct {size}x{size} {name} maps.")


def check_map_set(name: str, size: int) -> None:
    """Refuse, in one sentence (``ConfigError``), a set or size that does not exist.

    Example:
        >>> check_map_set("test", 4)
        Traceback (most recent call last):
        ...
        llmgym.errors.ConfigError: Unknown map_set 'test': use train or heldout.
    """
    if name not in MAP_SETS:
        raise ConfigError(f"Unknown map_set {name!r}: use {' or '.join(MAP_SETS)}.")
    if size not in MAP_SIZES:
        sizes = " or ".join(str(s) for s in MAP_SIZES)
        raise ConfigError(f"map_size must be {sizes} (a side of the square map), not {size!r}.")


def map_seeds(name: str, size: int) -> list[int]:
    """The seeds of ``generate_random_map`` that make the maps of a set, in set order (the
    first seed drawing each distinct map; seeds repeating a map are skipped).

    Example:
        >>> map_seeds("heldout", 4)[:3]  # seed 20 repeats seed 13's map
        [13, 18, 23]
    """
    check_map_set(name, size)
    return [seed for seed, _ in _generated(name, size)]


def maps_of(name: str, size: int) -> list[list[str]]:
    """The maps of a set, each as ``generate_random_map`` returns it (rows of S, F, H, G), all
    distinct."""
    check_map_set(name, size)
    return [list(desc) for _, desc in _generated(name, size)]


@functools.cache
def _lake(desc: tuple[str, ...], is_slippery: bool) -> FrozenLakeEnv:
    """Gymnasium's FrozenLake on one map (its transition table is what a map-set env loads)."""
    return FrozenLakeEnv(desc=list(desc), is_slippery=is_slippery)


class FrozenLakeMapsEnv(FrozenLakeEnv):
    """Gymnasium's FrozenLake whose map changes at each reset: ``reset(seed=s)`` plays map
    ``s % len(maps)`` of the set, ``reset()`` a map drawn from the env's random generator.
    On one map it steps as ``FrozenLakeEnv(desc=map, is_slippery=is_slippery)``. Non-slippery
    by default: the transfer study trains on the maps, not on the slip."""

    def __init__(
        self,
        map_set: str = "train",
        map_size: int = 4,
        is_slippery: bool = False,
        render_mode: str | None = None,
    ) -> None:
        self.maps = maps_of(map_set, map_size)
        self.map_index = 0
        super().__init__(render_mode=render_mode, desc=self.maps[0], is_slippery=is_slippery)
        self.is_slippery = is_slippery

    def map_info(self) -> dict[str, Any]:
        """What ``reset`` and ``step`` add to ``info``: ``map_index`` (the map's place in the
        set) and ``map`` (its rows of S, F, H, G), so an agent can plan on the map it is on
        (the optimal agent does; the exact evaluator writes them into its infos too).

        Example:
            >>> env = FrozenLakeMapsEnv("heldout", 4)
            >>> _, info = env.reset(seed=0)
            >>> info["map_index"], info["map"] == env.maps[0], sorted(info)
            (0, True, ['map', 'map_index', 'prob'])
        """
        return {"map_index": self.map_index, "map": list(self.maps[self.map_index])}

    def load_map(self, index: int) -> None:
        """Play map ``index`` of the set from now on (the start cell is always the top-left)."""
        lake = _lake(tuple(self.maps[index]), self.is_slippery)
        self.map_index = index
        self.desc, self.P = lake.desc, lake.P
        self.initial_state_distrib = lake.initial_state_distrib

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[int, dict[str, Any]]:
        gym.Env.reset(self, seed=seed)
        n = len(self.maps)
        self.load_map(seed % n if seed is not None else int(self.np_random.integers(n)))
        state, info = super().reset(options=options)
        return state, {**info, **self.map_info()}

    def step(self, action: int) -> tuple[int, float, bool, bool, dict[str, Any]]:
        state, reward, terminated, truncated, info = super().step(action)
        return state, reward, terminated, truncated, {**info, **self.map_info()}


#: Channels of :class:`MapGrid`'s observation, one plane each.
GRID_CHANNELS = ("frozen", "hole", "goal", "agent")


class MapGrid(gym.ObservationWrapper):
    """The map as numbers, for a numeric policy that should see what the text shows: one
    plane per channel of :data:`GRID_CHANNELS` over the cells (the start counts as frozen),
    flattened to ``4 * side * side`` floats. FrozenLake's own observation is the position
    alone, which says nothing about a map the policy has not seen.

    Example:
        >>> env = MapGrid(FrozenLakeMapsEnv("heldout", 4))
        >>> obs, info = env.reset(seed=0)
        >>> obs.shape, info["map"][3][3], obs.reshape(4, 4, 4)[:, 3, 3].tolist()
        ((64,), 'G', [0.0, 0.0, 1.0, 0.0])
        >>> float(obs.reshape(4, 4, 4)[3].sum())  # the agent is on one cell
        1.0
    """

    def __init__(self, env: gym.Env) -> None:
        super().__init__(env)
        rows, cols = env.unwrapped.desc.shape
        self.shape = (len(GRID_CHANNELS), rows, cols)
        size = len(GRID_CHANNELS) * rows * cols
        self.observation_space = gym.spaces.Box(0.0, 1.0, (size,), dtype=np.float32)

    def observation(self, observation: int) -> np.ndarray:
        desc = self.env.unwrapped.desc
        grid = np.zeros(self.shape, dtype=np.float32)
        grid[0] = (desc == b"F") | (desc == b"S")
        grid[1] = desc == b"H"
        grid[2] = desc == b"G"
        grid[3].flat[int(observation)] = 1.0
        return grid.reshape(-1)


def register_map_sets() -> None:
    """Register the base ids of ``BASE_IDS`` (non-slippery, ``MAX_STEPS`` steps)."""
    for env_id, kwargs in BASE_IDS.items():
        if env_id not in gym.registry:
            gym.register(
                env_id,
                entry_point="llmgym.envs.maps:FrozenLakeMapsEnv",
                kwargs=kwargs,
                max_episode_steps=MAX_STEPS,
            )


__all__ = [
    "BASE_IDS",
    "FROZEN_P",
    "GRID_CHANNELS",
    "MAP_SETS",
    "MAP_SIZES",
    "MAX_STEPS",
    "FrozenLakeMapsEnv",
    "MapGrid",
    "check_map_set",
    "map_kind",
    "map_seeds",
    "maps_of",
    "register_map_sets",
]
