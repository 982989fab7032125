"""Held-out variants of a curated text env: a second wording of its observation and system
prompt (``wording="alt"``), other names for its actions (``action_names="alt"``), and its
actions listed in another order (``shuffle_actions=True`` or a seed). The base env and the
action ids are untouched, so a variant steps as its base env given the same semantic action.

Example:
    >>> import gymnasium as gym, llmgym
    >>> env = gym.make("Text-Blackjack-v1", action_names="alt", shuffle_actions=True)
    >>> obs, info = env.reset(seed=0)
    >>> info["valid_actions"]  # in action-id order: stand is 0, draw is 1
    ['stand', 'draw']
    >>> [line for line in info["system_prompt"].splitlines() if line.startswith("- ")]
    ['- draw: draw another card', '- stand: stop drawing and let the dealer play']
    >>> env.step('{"action": "draw"}')[-1]["parse"]["action"]
    1
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np

from llmgym.describers import CuratedDescriber, Describer
from llmgym.errors import ConfigError

#: Values of ``wording``: the curated text, or its second wording.
WORDINGS = ("base", "alt")
#: Values of ``action_names``: the curated names, or their synonyms.
ACTION_NAMES = ("base", "alt")


def check_variant(wording: str, action_names: str, shuffle_actions: bool | int) -> None:
    """Refuse, in one sentence (``ConfigError``), a variant option with a value it cannot take.

    Example:
        >>> check_variant("formal", "base", False)
        Traceback (most recent call last):
        ...
        llmgym.errors.ConfigError: Unknown wording 'formal': use base or alt.
    """
    if wording not in WORDINGS:
        raise ConfigError(f"Unknown wording {wording!r}: use {' or '.join(WORDINGS)}.")
    if action_names not in ACTION_NAMES:
        raise ConfigError(
            f"Unknown action_names {action_names!r}: use {' or '.join(ACTION_NAMES)}."
        )
    if not isinstance(shuffle_actions, (bool, int)) or shuffle_actions < 0:
        raise ConfigError(
            f"shuffle_actions must be true, false or a seed (a whole number >= 0), "
            f"not {shuffle_actions!r}."
        )


def shuffled_order(n: int, seed: int) -> tuple[int, ...]:
    """A permutation of ``range(n)`` drawn from ``seed``, never the identity (for n >= 2).

    Example:
        >>> shuffled_order(2, 0), shuffled_order(4, 0)
        ((1, 0), (2, 0, 1, 3))
    """
    rng = np.random.default_rng(seed)
    order = tuple(range(n))
    while n > 1 and order == tuple(range(n)):
        order = tuple(int(i) for i in rng.permutation(n))
    return order


def renamed(describer: CuratedDescriber, names: Sequence[str]) -> CuratedDescriber:
    """``describer`` with its actions called ``names`` (in action-id order), meanings kept.

    Example:
        >>> from llmgym.envs.toy_text import BLACKJACK
        >>> renamed(BLACKJACK, ["stand", "draw"]).actions[1]
        ('draw', 'draw another card')
    """
    actions = describer.actions or []
    return dataclasses.replace(
        describer, actions=[(name, meaning) for name, (_, meaning) in zip(names, actions)]
    )


def make_variant(
    describer: Describer,
    env_name: str,
    *,
    reworded: CuratedDescriber | None,
    synonyms: Sequence[str] | None,
    wording: str = "base",
    action_names: str = "base",
    shuffle_actions: bool | int = False,
) -> Describer:
    """``describer`` as the variant asks: replaced by ``reworded`` for ``wording="alt"``, its
    actions renamed to ``synonyms`` for ``action_names="alt"``, and listed in the order
    ``shuffled_order`` draws from the seed ``shuffle_actions`` (``True`` is seed 0).
    ``env_name`` names the env in the one-sentence errors."""
    check_variant(wording, action_names, shuffle_actions)
    if wording == "alt":
        if reworded is None:
            raise ConfigError(
                f"{env_name} has no second wording (wording=alt covers the classic and "
                "toy-text envs)."
            )
        describer = reworded
    if action_names == "base" and shuffle_actions is False:
        return describer
    if not isinstance(describer, CuratedDescriber) or not describer.actions:
        raise ConfigError(
            f"{env_name} has no curated action names, so action_names and shuffle_actions "
            "do not apply."
        )
    if action_names == "alt":
        if synonyms is None:
            raise ConfigError(f"{env_name} has no other names for its actions.")
        describer = renamed(describer, synonyms)
    if shuffle_actions is not False:
        seed = 0 if shuffle_actions is True else int(shuffle_actions)
        order = shuffled_order(len(describer.actions), seed)
        describer = dataclasses.replace(describer, order=order)
    return describer


__all__ = [
    "ACTION_NAMES",
    "WORDINGS",
    "check_variant",
    "make_variant",
    "renamed",
    "shuffled_order",
]
