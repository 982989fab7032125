"""Benchmark suites and episode counts, read from the catalog (``llmgym.envs.catalog``):
an env joins a suite through its entry's ``suites``.

Example:
    >>> suite_envs("classic")[:2]
    ['Text-CartPole-v1', 'Text-Acrobot-v1']
    >>> episodes_for("Text-Blackjack-v1"), episodes_for("Text-Blackjack-v1", override=10)
    (2000, 10)
"""

from __future__ import annotations

from llmgym.envs.catalog import CATALOG, DEFAULT_EPISODES
from llmgym.errors import ConfigError

#: Suite name -> text env ids, in leaderboard order (from the catalog). ``all`` is every
#: suite, deduplicated.
SUITES: dict[str, list[str]] = {
    suite: [e.id for e in CATALOG if suite in e.suites]
    for suite in dict.fromkeys(suite for e in CATALOG for suite in e.suites)
}

#: Episodes per env when ``--episodes`` is not given (from the catalog): enough to separate
#: the reference agents, few where episodes are long and returns vary little.
EPISODES: dict[str, int] = {e.id: e.episodes for e in CATALOG}


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
