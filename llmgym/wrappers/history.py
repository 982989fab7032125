"""Chat history: the last k turns of an episode as chat messages."""

from __future__ import annotations

from collections import deque
from typing import Any, SupportsFloat

import gymnasium as gym

from llmgym.errors import ConfigError

Message = dict[str, str]
#: The most past turns a prompt may keep (far past any model's context).
MAX_HISTORY = 1_000_000


class ChatHistory:
    """Keeps the last ``k`` (observation, answer) turns and builds chat messages from them.

    Example:
        >>> h = ChatHistory(k=1)
        >>> h.add("obs 1", "LEFT"); h.add("obs 2", "RIGHT")
        >>> [m["content"] for m in h.messages("Be good.", "obs 3")]
        ['Be good.', 'obs 2', 'RIGHT', 'obs 3']
    """

    def __init__(self, k: int = 0) -> None:
        if not 0 <= k <= MAX_HISTORY:
            raise ConfigError(f"history must be from 0 to {MAX_HISTORY:,} turns, not {k}.")
        self.k = k
        self.turns: deque[tuple[str, str]] = deque(maxlen=k or None)

    def clear(self) -> None:
        self.turns.clear()

    def add(self, observation: str, answer: str) -> None:
        if self.k:
            self.turns.append((observation, answer))

    def messages(self, system_prompt: str, observation: str) -> list[Message]:
        """System message, the last k turns, then the current observation as a user message."""
        messages = [{"role": "system", "content": system_prompt}]
        for obs, answer in self.turns:
            messages += [{"role": "user", "content": obs}, {"role": "assistant", "content": answer}]
        messages.append({"role": "user", "content": observation})
        return messages


class HistoryWrapper(gym.Wrapper):
    """Adds ``info["messages"]``: the chat (system prompt, last ``k`` turns, current
    observation) a model should answer next. Wraps a text env (outside TextAction).

    Example:
        >>> import llmgym, gymnasium as gym
        >>> env = gym.make("Text-CartPole-v1", history=2)
        >>> _, info = env.reset(seed=0)
        >>> _, *_, info = env.step('{"action": "LEFT"}')
        >>> [m["role"] for m in info["messages"]]
        ['system', 'user', 'assistant', 'user']
    """

    def __init__(self, env: gym.Env, k: int) -> None:
        super().__init__(env)
        self.history = ChatHistory(k)
        self._observation = ""

    def _with_messages(self, obs: str, info: dict[str, Any]) -> dict[str, Any]:
        self._observation = obs
        return {**info, "messages": self.history.messages(info["system_prompt"], obs)}

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[str, dict[str, Any]]:
        self.history.clear()
        obs, info = self.env.reset(seed=seed, options=options)
        return obs, self._with_messages(obs, info)

    def step(self, action: Any) -> tuple[str, SupportsFloat, bool, bool, dict[str, Any]]:
        self.history.add(self._observation, str(action))
        obs, reward, terminated, truncated, info = self.env.step(action)
        return obs, reward, terminated, truncated, self._with_messages(obs, info)
