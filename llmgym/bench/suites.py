"""Benchmark suites and episode counts: an env joins a suite through ``SUITES`` and gets its
own episode count through ``EPISODES``, both keyed by the catalog's text ids
(``llmgym.envs.catalog``). Every language-native env is in the ``language`` suite.

Example:
    >>> suite_envs("classic")[:2]
    ['Text-CartPole-v1', 'Text-Acrobot-v1']
    >>> "Text-GSM-v0" in suite_envs("language"), len(suite_envs("all"))
    (True, 19)
    >>> episodes_for("Text-Blackjack-v1"), episodes_for("Text-Blackjack-v1", override=10)
    (2000, 10)
    >>> episodes_for("Text-FrozenLakeMaps4x4-Heldout-v0")  # every map of the set once
    100
"""

from __future__ import annotations

from llmgym.envs.catalog import CATALOG, text_id
from llmgym.envs.language import LANGUAGE_SUITE
from llmgym.envs.maps import BASE_IDS, MAP_SETS
from llmgym.errors import ConfigError

#: Bench episodes of an env ``EPISODES`` gives no count of its own.
DEFAULT_EPISODES = 50

#: Suite name -> text env ids, in leaderboard order. ``all`` is every suite, deduplicated.
SUITES: dict[str, list[str]] = {
    "classic": [
        text_id(name)
        for name in (
            "CartPole",
            "Acrobot",
            "MountainCar",
            "MountainCarContinuous",
            "Pendulum",
            "Blackjack",
            "FrozenLake",
            "FrozenLake8x8",
            "Taxi",
            "CliffWalking",
        )
    ],
    "language": list(LANGUAGE_SUITE),
}

# Enough episodes to separate the reference agents, few where episodes are long and returns
# vary little. Blackjack's return has a standard deviation of ~0.95: 2,000 episodes give +-0.04.
_COUNTS = {
    text_id("CartPole"): 30,
    text_id("Acrobot"): 30,
    text_id("MountainCarContinuous"): 20,
    text_id("Blackjack"): 2000,
    text_id("FrozenLake"): 1000,
    text_id("FrozenLake8x8"): 500,
    text_id("Taxi"): 200,
    # a FrozenLake map set: seeds 0..N-1 play each of its N maps once
    **{f"Text-{base}": MAP_SETS[kwargs["map_set"]] for base, kwargs in BASE_IDS.items()},
}
#: Episodes per catalog env when ``--episodes`` is not given.
EPISODES: dict[str, int] = {e.id: _COUNTS.get(e.id, DEFAULT_EPISODES) for e in CATALOG}


def suite_envs(name: str) -> list[str]:
    """The env ids of a suite (``all`` for every suite); ``ConfigError`` if unknown."""
    if name == "all":
        return list(dict.fromkeys(env for envs in SUITES.values() for env in envs))
    if name not in SUITES:
        raise ConfigError(f"Unknown suite {name!r}: use one of {', '.join([*SUITES, 'all'])}.")
    return list(SUITES[name])


def episodes_for(env_id: str, override: int | None = None) -> int:
    """Episodes to run on ``env_id``: ``override`` if given, else the suite default."""
    return override if override is not None else EPISODES.get(env_id, DEFAULT_EPISODES)
