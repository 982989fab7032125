"""Benchmark suites: plain dicts, so an env can join a suite by adding its id.

Example:
    >>> suite_envs("classic")[:2]
    ['Text-CartPole-v1', 'Text-Acrobot-v1']
    >>> episodes_for("Text-Blackjack-v1"), episodes_for("Text-Blackjack-v1", override=10)
    (2000, 10)
"""

from __future__ import annotations

from llmgym.envs.language import LANGUAGE_SUITE

#: Suite name -> text env ids, in leaderboard order. ``all`` is every suite, deduplicated.
SUITES: dict[str, list[str]] = {
    "classic": [
        "Text-CartPole-v1",
        "Text-Acrobot-v1",
        "Text-MountainCar-v0",
        "Text-MountainCarContinuous-v0",
        "Text-Pendulum-v1",
        "Text-Blackjack-v1",
        "Text-FrozenLake-v1",
        "Text-FrozenLake8x8-v1",
        "Text-Taxi-v4",
        "Text-CliffWalking-v1",
    ],
    "language": list(LANGUAGE_SUITE),
}

#: Episodes per env when ``--episodes`` is not given: enough to separate the reference agents
#: (Blackjack's return has a standard deviation of ~0.95, so 2,000 episodes give +-0.04), few
#: where episodes are long and returns vary little.
EPISODES: dict[str, int] = {
    "Text-CartPole-v1": 30,
    "Text-Acrobot-v1": 30,
    "Text-MountainCar-v0": 50,
    "Text-MountainCarContinuous-v0": 20,
    "Text-Pendulum-v1": 50,
    "Text-Blackjack-v1": 2000,
    "Text-FrozenLake-v1": 1000,
    "Text-FrozenLake8x8-v1": 500,
    "Text-Taxi-v4": 200,
    "Text-CliffWalking-v1": 50,
}
DEFAULT_EPISODES = 50


def suite_envs(name: str) -> list[str]:
    """The env ids of a suite (``all`` for every suite); ValueError if unknown."""
    if name == "all":
        return list(dict.fromkeys(env for envs in SUITES.values() for env in envs))
    if name not in SUITES:
        raise ValueError(f"Unknown suite {name!r}: use one of {', '.join([*SUITES, 'all'])}.")
    return list(SUITES[name])


def episodes_for(env_id: str, override: int | None = None) -> int:
    """Episodes to run on ``env_id``: ``override`` if given, else the suite default."""
    return override if override is not None else EPISODES.get(env_id, DEFAULT_EPISODES)
