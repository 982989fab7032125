"""The trainer's envs: copies of one text env, each keeping the chat history of its own
episodes (``policy.history``)."""

from __future__ import annotations

from typing import Any

import gymnasium as gym

import llmgym  # noqa: F401  (registers the Text-* ids)
from llmgym.envs.registration import check_env_id


def make_envs(
    env_id: str, n: int, env_kwargs: dict[str, Any] | None = None, history: int = 0
) -> list[gym.Env]:
    """``n`` independent copies of a text env (reset each with an explicit seed). With
    ``history``, each env keeps its last turns in ``info["messages"]``: a prompt's history is
    its own episode's, whichever env plays it and whatever plays beside it.

    Example:
        >>> [env] = make_envs("Text-CliffWalking-v1", 1, history=1)
        >>> _, info = env.reset(seed=0)
        >>> _, *_, info = env.step('{"action": "UP"}')
        >>> _, info = env.reset(seed=1)  # a new episode starts with no past turns
        >>> [m["role"] for m in info["messages"]]
        ['system', 'user']
    """
    check_env_id(env_id)
    kwargs = {**(env_kwargs or {}), **({"history": history} if history else {})}
    return [gym.make(env_id, **kwargs) for _ in range(n)]


__all__ = ["make_envs"]
