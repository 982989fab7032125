"""The catalog: one entry per ``Text-*`` env, holding the facts about the env itself (the
Gymnasium id it wraps and its class, its describer, which carries the action names, its
mirror symmetry, and what registration needs: the library it requires, a language-native
env's entry point, kwargs and step cap). Registration and the policy read it; nothing here
knows about agents, recipes or benchmarks (``llmgym.envs`` imports none of
``llmgym.baselines``, ``llmgym.evaluation``, ``llmgym.bench``: they import it).

Adding an env is one entry per audience, each keyed by the env's catalog id:

- the env: an ``EnvEntry`` in ``CATALOG`` here (``_wrapped`` for a Gymnasium env, with its
  describer from ``llmgym/envs/classic.py`` or ``toy_text.py``; ``_language`` for a
  language-native one under ``llmgym/envs/language/``);
- its optimal or heuristic agent: ``OPTIMAL`` in ``llmgym/baselines/agents.py`` (keyed by
  ``env_class``);
- its SB3 recipes: ``RECIPES`` in ``llmgym/baselines/sb3_recipes.py`` (keyed by base id);
- its bench suite and episode count: ``SUITES`` and ``EPISODES`` in
  ``llmgym/bench/suites.py`` (language-native envs join the ``language`` suite themselves);
- its published (random, best known) returns: ``REFERENCE_RETURNS`` in
  ``llmgym/bench/report.py``.

Only the first is required; an env without the others has no expert, trains SB3 with its
defaults, is benched on request (``--envs``) for 50 episodes and is normalized by its run's
own random and reference rows.

Example:
    >>> blackjack = entry("Text-Blackjack-v1")
    >>> blackjack.base, blackjack.env_class, entry("Text-GSM-v0").requires
    ('Blackjack-v1', 'BlackjackEnv', 'reasoning_gym')
    >>> base_id("Taxi") in ("Taxi-v3", "Taxi-v4"), text_id("CartPole")
    (True, 'Text-CartPole-v1')
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym

from llmgym.describers import Describer
from llmgym.envs import classic, toy_text
from llmgym.envs.maps import BASE_IDS
from llmgym.envs.symmetry import CARTPOLE_MIRROR, Mirror


@dataclass(frozen=True)
class EnvEntry:
    """The facts about one text env."""

    id: str
    """The text env id: ``Text-<base>`` for a wrapped env."""
    base: str | None = None
    """The Gymnasium id it wraps; None for a language-native env (its own base)."""
    env_class: str | None = None
    """Class name of the unwrapped base env: the ``describer``, ``mirror`` and expert serve
    every env of that class, also one that ``llmgym.wrap`` gets without an id."""
    describer: Describer | None = None
    """The curated describer (None: derived from the spaces, or language-native)."""
    requires: str | None = None
    """A module that must be installed for the id to be registered (found, not imported)."""
    entry_point: str | None = None
    """A language-native env's entry point (a wrapped env's is ``make_text_env``)."""
    kwargs: Mapping[str, Any] = field(default_factory=dict)
    """A language-native env's ``gym.make`` keyword arguments."""
    max_episode_steps: int | None = None
    """A language-native env's step cap (a wrapped env keeps its base env's)."""
    mirror: Mirror | None = None
    """A mirror symmetry of the base env (``PPOConfig.mirror`` trains on mirrored states)."""
    reworded: Describer | None = None
    """The describer's second wording (``wording="alt"``, ``llmgym.envs.variants``)."""
    synonyms: tuple[str, ...] | None = None
    """Other names of the describer's actions, in action-id order (``action_names="alt"``)."""


def _newest(name: str) -> str:
    """The newest registered id of a base env name: ``_newest("Taxi")`` is ``Taxi-v3`` or
    ``Taxi-v4`` depending on the Gymnasium release."""
    versions = [k for k in gym.registry if k.rsplit("-v", 1)[0] == name]
    return max(versions, key=lambda k: int(k.rsplit("-v", 1)[1]))


def _wrapped(name: str, env_class: str, describer: Describer, **fields: Any) -> EnvEntry:
    """The entry of a Gymnasium env, under the newest version of ``name`` that is registered."""
    base = _newest(name)
    return EnvEntry(f"Text-{base}", base, env_class, describer, **fields)


def _language(env_id: str, requires: str, entry_point: str, **fields: Any) -> EnvEntry:
    """The entry of a language-native env (``llmgym.envs.language``)."""
    return EnvEntry(
        env_id, requires=requires, entry_point=f"llmgym.envs.language.{entry_point}", **fields
    )


#: ``Text-Arithmetic-v0``'s reasoning-gym config (its default goes up to 6 terms of 4 digits).
ARITHMETIC_CONFIG = {"min_terms": 2, "max_terms": 3, "min_digits": 1, "max_digits": 2}

_LAKE = dict(reworded=toy_text.FROZEN_LAKE_ALT, synonyms=("WEST", "SOUTH", "EAST", "NORTH"))

#: Every env, in registration order.
CATALOG: tuple[EnvEntry, ...] = (
    _wrapped(
        "CartPole",
        "CartPoleEnv",
        classic.CARTPOLE,
        mirror=CARTPOLE_MIRROR,
        reworded=classic.CARTPOLE_ALT,
        synonyms=("WEST", "EAST"),
    ),
    _wrapped(
        "Acrobot",
        "AcrobotEnv",
        classic.ACROBOT,
        reworded=classic.ACROBOT_ALT,
        synonyms=("MINUS", "IDLE", "PLUS"),
    ),
    _wrapped(
        "MountainCar",
        "MountainCarEnv",
        classic.MOUNTAIN_CAR,
        reworded=classic.MOUNTAIN_CAR_ALT,
        synonyms=("WEST", "COAST", "EAST"),
    ),
    _wrapped(
        "MountainCarContinuous",
        "Continuous_MountainCarEnv",
        classic.MOUNTAIN_CAR_CONTINUOUS,
        reworded=classic.MOUNTAIN_CAR_CONTINUOUS_ALT,
    ),
    _wrapped("Pendulum", "PendulumEnv", classic.PENDULUM, reworded=classic.PENDULUM_ALT),
    _wrapped(
        "Blackjack",
        "BlackjackEnv",
        toy_text.BLACKJACK,
        reworded=toy_text.BLACKJACK_ALT,
        synonyms=("stand", "draw"),
    ),
    _wrapped("FrozenLake", "FrozenLakeEnv", toy_text.FROZEN_LAKE, **_LAKE),
    _wrapped("FrozenLake8x8", "FrozenLakeEnv", toy_text.FROZEN_LAKE, **_LAKE),
    _wrapped(
        "Taxi",
        "TaxiEnv",
        toy_text.TAXI,
        reworded=toy_text.TAXI_ALT,
        synonyms=("DOWN", "UP", "RIGHT", "LEFT", "LOAD", "UNLOAD"),
    ),
    _wrapped(
        "CliffWalking",
        "CliffWalkingEnv",
        toy_text.CLIFF_WALKING,
        reworded=toy_text.CLIFF_WALKING_ALT,
        synonyms=("NORTH", "EAST", "SOUTH", "WEST"),
    ),
    _wrapped(
        "LunarLander",
        "LunarLander",
        classic.LUNAR_LANDER,
        requires="Box2D",
        reworded=classic.LUNAR_LANDER_ALT,
        synonyms=("COAST", "PORT", "THRUST", "STARBOARD"),
    ),
    # FrozenLake on generated maps, train and held-out sets (``llmgym.envs.maps``); their base
    # ids are registered by ``llmgym.envs.maps.register_map_sets``
    *(
        EnvEntry(f"Text-{base}", base, "FrozenLakeMapsEnv", toy_text.FROZEN_LAKE, **_LAKE)
        for base in BASE_IDS
    ),
    _language(
        "Text-TextWorld-Simple-v0",
        "textworld",
        "textworld_env:TextWorldEnv",
        kwargs={"family": "simple"},
        max_episode_steps=50,
    ),
    _language(
        "Text-TextWorld-Cooking-v0",
        "textworld",
        "textworld_env:TextWorldEnv",
        kwargs={"family": "cooking"},
        max_episode_steps=100,
    ),
    _language(
        "Text-Arithmetic-v0",
        "reasoning_gym",
        "math_env:ReasoningEnv",
        kwargs={"dataset": "basic_arithmetic", "config": ARITHMETIC_CONFIG},
    ),
    _language(
        "Text-GSM-v0", "reasoning_gym", "math_env:ReasoningEnv", kwargs={"dataset": "gsm_symbolic"}
    ),
    _language(
        "Text-GSM-Stepwise-v0",
        "reasoning_gym",
        "math_env:ReasoningEnv",
        kwargs={"dataset": "gsm_symbolic", "max_turns": 8},
    ),
    # minigrid truncates at each level's own max_steps
    *(
        _language(
            f"Text-BabyAI-{level}-v0",
            "minigrid",
            "babyai_env:make_babyai",
            kwargs={"level": f"BabyAI-{level}-v0"},
        )
        for level in ("GoToLocal", "PickupLoc", "PutNextLocal", "OpenDoor")
    ),
)


def entry(env_id: str) -> EnvEntry | None:
    """The catalog entry of a text env id (None for an id llmgym does not list)."""
    return next((e for e in CATALOG if e.id == env_id), None)


def base_id(name: str) -> str:
    """The base id the catalog wraps for Gymnasium env ``name`` (unversioned): the tables
    that other packages key by env use it, so they follow the catalog's version.

    Example:
        >>> base_id("FrozenLake8x8")
        'FrozenLake8x8-v1'
    """
    found = [e.base for e in CATALOG if e.base and e.base.rsplit("-v", 1)[0] == name]
    if not found:
        raise KeyError(f"The catalog wraps no env named {name!r}.")
    return found[0]


def text_id(name: str) -> str:
    """The text env id of Gymnasium env ``name`` in the catalog: ``Text-`` and its base id."""
    return f"Text-{base_id(name)}"


__all__ = ["ARITHMETIC_CONFIG", "CATALOG", "EnvEntry", "base_id", "entry", "text_id"]
