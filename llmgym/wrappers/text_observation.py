"""TextObservation: numeric observations -> prompt text, with the prompt facts in ``info``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, SupportsFloat

import gymnasium as gym
from gymnasium import spaces
from gymnasium.vector.utils import read_from_shared_memory

from llmgym.describers import CHARSET, Describer

MAX_OBSERVATION_CHARS = 8_192
_ALLOWED = frozenset(CHARSET)


class TextSpace(spaces.Text):
    """The ``Text`` space of llmgym's observations: a ``spaces.Text`` that also travels through
    ``gym.make_vec(..., vectorization_mode="async")``'s shared memory. (Gymnasium decodes a
    ``Text`` buffer once, when the vector env is built, so every later observation would read
    as that first, empty buffer: ``'aaaa...'``. This space's buffer is read again at each step.)

    Example:
        >>> import gymnasium as gym, llmgym
        >>> envs = gym.make_vec("Text-Blackjack-v1", num_envs=2, vectorization_mode="async")
        >>> observations, infos = envs.reset(seed=3)
        >>> observations[0]
        'Your hand totals 7 with no usable ace. The dealer shows a 10.'
        >>> envs.close()
    """

    def __init__(self, max_length: int = 0) -> None:
        super().__init__(max_length=max_length, min_length=0, charset=CHARSET)


class SharedTexts(Sequence):
    """The observations of a vector env's shared-memory buffer, decoded when read (a copy,
    which the vector env hands out by default, is a plain tuple of strings)."""

    def __init__(self, space: spaces.Text, memory: Any, n: int) -> None:
        self.space, self.memory, self.n = space, memory, n

    def read(self) -> tuple[str, ...]:
        decode = read_from_shared_memory.dispatch(spaces.Text)  # gymnasium's own decoding
        return decode(self.space, self.memory, self.n)

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, index: Any) -> Any:
        return self.read()[index]

    def __deepcopy__(self, memo: dict[int, Any]) -> tuple[str, ...]:
        return self.read()


@read_from_shared_memory.register(TextSpace)
def _read_texts(space: TextSpace, memory: Any, n: int = 1) -> SharedTexts:
    return SharedTexts(space, memory, n)


def sanitize(text: str, max_length: int = MAX_OBSERVATION_CHARS) -> str:
    """Keep ``text`` inside the declared charset (others become ``?``) and length.

    Example:
        >>> sanitize("45° left")
        '45? left'
    """
    return "".join(c if c in _ALLOWED else "?" for c in text[:max_length])


class TextObservation(gym.ObservationWrapper):
    """Turns each observation into text with a describer, and adds to ``info``:
    ``system_prompt`` (task, valid actions, answer format), ``valid_actions`` (names of the
    discrete actions; ``[]`` for continuous ones) and ``raw_obs`` (the base observation).

    Example:
        >>> import gymnasium as gym
        >>> from llmgym.envs.toy_text import BLACKJACK
        >>> env = TextObservation(gym.make("Blackjack-v1"), BLACKJACK)
        >>> obs, info = env.reset(seed=3)
        >>> obs
        'Your hand totals 7 with no usable ace. The dealer shows a 10.'
        >>> info["valid_actions"], info["raw_obs"]
        (['stick', 'hit'], (7, 10, 0))
    """

    def __init__(self, env: gym.Env, describer: Describer) -> None:
        super().__init__(env)
        self.describer = describer
        self.observation_space = TextSpace(MAX_OBSERVATION_CHARS)
        self.system_prompt = sanitize(describer.system_prompt(env.unwrapped))
        self.valid_actions = list(describer.action_names(env.unwrapped) or [])

    def observation(self, observation: Any) -> str:
        return sanitize(self.describer.describe(observation, self.env.unwrapped))

    def with_prompt(self, info: dict[str, Any], raw_obs: Any) -> dict[str, Any]:
        """A copy of ``info`` with the prompt facts this wrapper adds: ``system_prompt``,
        ``valid_actions`` and ``raw_obs``.

        Example:
            >>> import gymnasium as gym
            >>> from llmgym.envs.toy_text import BLACKJACK
            >>> env = TextObservation(gym.make("Blackjack-v1"), BLACKJACK)
            >>> info = env.with_prompt({"prob": 1.0}, (7, 10, 0))
            >>> info["prob"], info["valid_actions"], info["raw_obs"]
            (1.0, ['stick', 'hit'], (7, 10, 0))
        """
        return {
            **info,
            "system_prompt": self.system_prompt,
            "valid_actions": list(self.valid_actions),
            "raw_obs": raw_obs,
        }

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[str, dict[str, Any]]:
        raw_obs, info = self.env.reset(seed=seed, options=options)
        return self.observation(raw_obs), self.with_prompt(info, raw_obs)

    def step(self, action: Any) -> tuple[str, SupportsFloat, bool, bool, dict[str, Any]]:
        raw_obs, reward, terminated, truncated, info = self.env.step(action)
        return (
            self.observation(raw_obs),
            reward,
            terminated,
            truncated,
            self.with_prompt(info, raw_obs),
        )


def text_wrapper(env: gym.Env) -> TextObservation:
    """The ``TextObservation`` layer of a text env, which renders base observations as text.

    Example:
        >>> import llmgym
        >>> text_wrapper(gym.make("Text-CartPole-v1")).describer.action_names(None)
        ['LEFT', 'RIGHT']
    """
    layer = env
    while not isinstance(layer, TextObservation):
        if not hasattr(layer, "env"):
            raise ValueError(f"{env} is not a text env: it has no TextObservation wrapper.")
        layer = layer.env
    return layer
