"""Agent names for ``llmgym eval`` (and benchmarks): ``make_agent("llm:smollm2-135m", env_id)``.

A name is ``kind`` or ``kind:argument``. Built in: ``random`` and ``llm[:MODEL]`` (MODEL is
anything ``load_model`` takes; default ``smollm2-135m``). Add a kind with ``register_agent``:
a factory ``(argument, env_id, **options) -> TextAgent``, where a TextAgent answers a batch
of text observations with a batch of answer strings:

Example:
    >>> class AlwaysFirst:
    ...     def act(self, observations, infos):
    ...         return ['{"action": "%s"}' % info["valid_actions"][0] for info in infos]
    ...     def reset(self, indices=None):
    ...         pass
    >>> register_agent("first", lambda argument, env_id, **options: AlwaysFirst())
    >>> make_agent("first", "Text-CartPole-v1").act(["obs"], [{"valid_actions": ["LEFT"]}])
    ['{"action": "LEFT"}']
    >>> del AGENTS["first"]
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any, Protocol

import gymnasium as gym
import numpy as np
from gymnasium import spaces


class TextAgent(Protocol):
    """What ``evaluate`` needs from an agent."""

    def act(self, observations: Sequence[str], infos: Sequence[dict[str, Any]]) -> list[str]:
        """One answer string per env."""
        ...

    def reset(self, indices: Sequence[int] | None = None) -> None:
        """Envs ``indices`` start new episodes (forget their history)."""
        ...


class UnknownAgentError(ValueError):
    """An agent name whose kind is not registered."""


AgentFactory = Callable[..., TextAgent]
AGENTS: dict[str, AgentFactory] = {}


def register_agent(kind: str, factory: AgentFactory) -> None:
    """Make ``kind`` (and ``kind:argument``) a valid agent name."""
    AGENTS[kind] = factory


def make_agent(name: str, env_id: str, **options: Any) -> TextAgent:
    """The agent a name stands for; ``options`` (mode, seed, device, temperature, greedy...)
    go to its factory, which ignores those it has no use for."""
    kind, _, argument = name.partition(":")
    if kind not in AGENTS:
        raise UnknownAgentError(
            f"Unknown agent {name!r}; use one of {', '.join(f'{k}[:ARG]' for k in AGENTS)}."
        )
    return AGENTS[kind](argument, env_id, **options)


class RandomAgent:
    """Uniformly random valid actions, written as the JSON answer the envs ask for.

    Example:
        >>> agent = RandomAgent(gym.make("Text-Blackjack-v1"), seed=0)
        >>> agent.act(["obs"], [{"valid_actions": ["stick", "hit"]}])
        ['{"action": "hit"}']
    """

    def __init__(self, env: gym.Env, seed: int = 0) -> None:
        self.space = env.unwrapped.action_space
        self.rng = np.random.default_rng(seed)
        self.space.seed(seed)

    def act(self, observations: Sequence[str], infos: Sequence[dict[str, Any]]) -> list[str]:
        answers = []
        for info in infos:
            names = info.get("valid_actions")
            if names:
                action: Any = names[int(self.rng.integers(len(names)))]
            elif isinstance(self.space, spaces.Discrete):
                action = int(self.space.start) + int(self.rng.integers(int(self.space.n)))
            else:
                action = np.asarray(self.space.sample()).tolist()
            answers.append(json.dumps({"action": action}))
        return answers

    def reset(self, indices: Sequence[int] | None = None) -> None:
        """Random actions need no memory."""


class LLMAgent:
    """An LLMPolicy as a TextAgent (``self.policy`` exposes it, with its token counts)."""

    def __init__(self, policy: Any) -> None:
        self.policy = policy

    def act(self, observations: Sequence[str], infos: Sequence[dict[str, Any]]) -> list[str]:
        return [sample.text for sample in self.policy.act(observations, infos)]

    def reset(self, indices: Sequence[int] | None = None) -> None:
        self.policy.reset(indices)


def _random(argument: str, env_id: str, *, seed: int = 0, **_: Any) -> RandomAgent:
    return RandomAgent(gym.make(env_id), seed=seed)


def _llm(
    argument: str,
    env_id: str,
    *,
    mode: str = "score",
    seed: int = 0,
    device: str = "auto",
    **config: Any,
) -> LLMAgent:
    from llmgym.agents.models import DEFAULT_MODEL, load_model
    from llmgym.agents.policy import LLMPolicy, PolicyConfig

    known = PolicyConfig.__dataclass_fields__
    policy_config = PolicyConfig(
        mode=mode, seed=seed, **{k: v for k, v in config.items() if k in known and v is not None}
    )
    model, tokenizer = load_model(argument or DEFAULT_MODEL, device=device)
    return LLMAgent(LLMPolicy(model, tokenizer, policy_config))


register_agent("random", _random)
register_agent("llm", _llm)

__all__ = [
    "AGENTS",
    "LLMAgent",
    "RandomAgent",
    "TextAgent",
    "UnknownAgentError",
    "make_agent",
    "register_agent",
]
