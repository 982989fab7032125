"""Adapters to other ecosystems: TRL's ``GRPOTrainer`` (``trl``), an OpenEnv server (``openenv``).

Each module imports its framework lazily: ``import llmgym.integrations`` needs neither.
"""

from __future__ import annotations

from typing import Any


def make_text_env(env_id: str, **make_kwargs: Any) -> Any:
    """``gym.make(env_id)`` for a registered text env, with a one-sentence error otherwise.

    Example:
        >>> make_text_env("Text-Nope-v0")  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        llmgym.errors.ConfigError: Unknown environment 'Text-Nope-v0'; run `llmgym envs` to ...
    """
    import gymnasium as gym

    import llmgym  # noqa: F401  (registers the Text-* envs)
    from llmgym.envs.registration import check_env_id

    check_env_id(env_id)
    return gym.make(env_id, **make_kwargs)
