"""What an agent is: ``TextAgent``, the protocol that ``llmgym eval``, the bench runner and
the exact evaluator play, and ``BaselineAgent``, the base of the reference agents (random,
optimal, SB3), which act on the base observation and write their answers as text.

Example:
    >>> import gymnasium as gym, llmgym
    >>> class Left(BaselineAgent):
    ...     def act(self, raw_obs):
    ...         return 0
    >>> env = gym.make("Text-CartPole-v1")
    >>> obs, info = env.reset(seed=0)
    >>> Left(env).act_batch([obs], [info])
    ['{"action": "LEFT"}']

    Answers use the names of the env that wrote ``info`` (``info["valid_actions"]``), so a
    variant with renamed actions is answered in its own names, each meaning the same action id:

    >>> env = gym.make("Text-CartPole-v1", action_names="alt")
    >>> obs, info = env.reset(seed=0)
    >>> answer = Left(env).act_batch([obs], [info])[0]
    >>> answer != '{"action": "LEFT"}', env.step(answer)[-1]["parse"]["action"]
    (True, 0)
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, Protocol

import gymnasium as gym
import numpy as np

from llmgym.envs.registration import describer_for


class TextAgent(Protocol):
    """What ``evaluate`` and the bench runner need from an agent."""

    name: str

    def act_batch(self, observations: Sequence[str], infos: Sequence[dict[str, Any]]) -> list[str]:
        """One answer string per env."""
        ...

    def reset(self, indices: Sequence[int] | None = None) -> None:
        """Envs ``indices`` start new episodes (forget their history)."""
        ...


def format_action(action: Any, names: Sequence[str] | None, start: int = 0) -> str:
    """The JSON answer an LLM is asked to write, for a base action.

    Example:
        >>> format_action(1, ["LEFT", "RIGHT"]), format_action(np.array([0.5]), None)
        ('{"action": "RIGHT"}', '{"action": [0.5]}')
        >>> format_action("42", None)  # a free-text env (a Text action space): the text itself
        '42'
    """
    if isinstance(action, str):
        return action
    if names:
        return json.dumps({"action": names[int(action) - start]})
    values = np.asarray(action, dtype=float).ravel()
    return json.dumps({"action": [round(float(v), 6) for v in values]})


class BaselineAgent:
    """Base of the reference agents: subclasses implement ``act(raw_obs)``; text and batched
    actions follow from it. ``env`` is the base env (or its text twin) the agent will play."""

    name = "baseline"

    def __init__(self, env: gym.Env) -> None:
        base = env.unwrapped
        self.action_space = base.action_space
        self.observation_space = base.observation_space
        self.names = describer_for(base).action_names(base)
        self.start = int(getattr(self.action_space, "start", 0))

    def act(self, raw_obs: Any) -> Any:
        """A base action for a base observation."""
        raise NotImplementedError

    def act_many(self, raw_observations: Sequence[Any]) -> list[Any]:
        """Base actions for several base observations (override to batch a model)."""
        return [self.act(obs) for obs in raw_observations]

    def act_text(self, obs_text: str, info: dict[str, Any]) -> str:
        """The action string for a text observation, read from ``info["raw_obs"]``."""
        return self.act_batch([obs_text], [info])[0]

    def names_for(self, info: dict[str, Any]) -> Sequence[str] | None:
        """The action names to answer with in the env that wrote ``info``: its own
        ``info["valid_actions"]`` (in action-id order, so a renamed variant, e.g.
        ``action_names="alt"``, is answered in its names) where it lists one name per action,
        else the base env's curated names.

        Example:
            >>> import gymnasium as gym, llmgym
            >>> agent = BaselineAgent(gym.make("Blackjack-v1"))
            >>> agent.names_for({"valid_actions": ["stand", "draw"]}), agent.names_for({})
            (['stand', 'draw'], ['stick', 'hit'])
        """
        own = info.get("valid_actions")
        if self.names and own and len(own) == len(self.names):
            return own
        return self.names

    def act_batch(self, observations: Sequence[str], infos: Sequence[dict[str, Any]]) -> list[str]:
        actions = self.act_many([info["raw_obs"] for info in infos])
        return [
            format_action(a, self.names_for(info), self.start) for a, info in zip(actions, infos)
        ]

    def reset(self, indices: Sequence[int] | None = None) -> None:
        """Reference agents are memoryless."""


__all__ = ["BaselineAgent", "TextAgent", "format_action"]
