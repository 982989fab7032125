"""TextAction: the text a model wrote -> a base action, through the layered parser."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any, SupportsFloat

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from llmgym.describers import CHARSET, Describer
from llmgym.errors import ConfigError, InvalidActionError
from llmgym.parsing import ParseResult, parse_box, parse_discrete

MAX_ACTION_CHARS = 4_096
ON_INVALID = ("fallback", "random", "penalty", "terminate", "raise")
DEFAULT_PENALTY = -0.1


def make_parser(
    action_space: spaces.Space, names: list[str] | None
) -> Callable[[str], ParseResult]:
    """A parser for ``action_space`` whose ``ParseResult.action`` is already a base action.

    Example:
        >>> parse = make_parser(spaces.Discrete(2, start=1), ["UP", "DOWN"])
        >>> parse("DOWN").action
        2
    """
    if isinstance(action_space, spaces.Discrete):
        labels = names or [str(int(action_space.start) + i) for i in range(int(action_space.n))]
        start = int(action_space.start)

        def parse(text: str) -> ParseResult:
            r = parse_discrete(text, labels)
            return ParseResult(r.ok, r.method, start + int(r.action), r.error)

        return parse
    if isinstance(action_space, (spaces.Box, spaces.MultiDiscrete, spaces.MultiBinary)):
        low, high, integer = action_bounds(action_space)
        shape, dtype = action_space.shape, action_space.dtype

        def parse(text: str) -> ParseResult:
            r = parse_box(text, low, high, integer=integer, dtype=np.float64)
            action = r.action.reshape(shape).astype(dtype)
            return ParseResult(r.ok, r.method, action, r.error, r.clipped)

        return parse
    raise ConfigError(
        f"llmgym cannot parse text into a {type(action_space).__name__} action space; "
        "pass parser=<a function from text to llmgym.parsing.ParseResult> to TextAction."
    )


def action_bounds(space: spaces.Space) -> tuple[np.ndarray, np.ndarray, bool]:
    """Finite flat ``(low, high, integer)`` bounds of a Box, MultiDiscrete or MultiBinary.

    MultiDiscrete counts from its ``start``; an integer Box rounds; an unbounded float Box is
    bounded by its dtype's largest finite values, so no parsed number becomes ``inf``.

    Example:
        >>> low, high, integer = action_bounds(spaces.MultiDiscrete([3, 5], start=[-2, 10]))
        >>> low.tolist(), high.tolist(), integer
        ([-2.0, 10.0], [0.0, 14.0], True)
        >>> float(action_bounds(spaces.Box(-np.inf, np.inf, (1,), np.float32))[1][0])
        3.4028234663852886e+38
    """
    if isinstance(space, spaces.MultiDiscrete):
        start = np.asarray(space.start, dtype=np.float64).ravel()
        return start, start + space.nvec.astype(np.float64).ravel() - 1, True
    if isinstance(space, spaces.MultiBinary):
        size = int(np.prod(space.shape))
        return np.zeros(size), np.ones(size), True
    low = np.asarray(space.low, dtype=np.float64).ravel()
    high = np.asarray(space.high, dtype=np.float64).ravel()
    integer = bool(np.issubdtype(space.dtype, np.integer))
    info = np.iinfo(space.dtype) if integer else np.finfo(space.dtype)
    lo_limit, hi_limit = float(info.min), float(info.max)
    if hi_limit > info.max:  # int64's max is not a float: stay one float below it
        lo_limit, hi_limit = np.nextafter(lo_limit, 0.0), np.nextafter(hi_limit, 0.0)
    return np.clip(low, lo_limit, hi_limit), np.clip(high, lo_limit, hi_limit), integer


class TextAction(gym.ActionWrapper):
    """Accepts a string action, parses it (JSON → regex → fuzzy → fallback) into a base action
    and reports the outcome in ``info["parse"]`` = ``{"ok", "method", "action", "error",
    "clipped"}``.

    ``on_invalid`` says what an unparseable answer does:

    - ``"fallback"`` (default): take the parser's fallback action (the first valid action;
      zero clipped into bounds for continuous actions);
    - ``"random"``: take a uniformly random action from an RNG seeded by ``reset(seed=...)``;
    - ``"penalty"``: the fallback action, plus ``invalid_penalty`` (default -0.1) on the reward;
    - ``"terminate"``: end the episode without stepping the base env, reward = the penalty
      (0 unless ``invalid_penalty`` is set);
    - ``"raise"``: raise ``InvalidActionError`` (for debugging prompts and parsers).

    ``invalid_penalty`` is added to the reward of every invalid answer, whatever the policy.

    Example:
        >>> import gymnasium as gym
        >>> env = TextAction(gym.make("CartPole-v1"), names=["LEFT", "RIGHT"])
        >>> _ = env.reset(seed=0)
        >>> *_, info = env.step('Thinking... {"action": "RIGHT"}')
        >>> info["parse"]["ok"], info["parse"]["method"], info["parse"]["action"]
        (True, 'json', 1)
    """

    def __init__(
        self,
        env: gym.Env,
        names: list[str] | None = None,
        *,
        on_invalid: str = "fallback",
        invalid_penalty: float | None = None,
        parser: Callable[[str], ParseResult] | None = None,
    ) -> None:
        super().__init__(env)
        if on_invalid not in ON_INVALID:
            raise ConfigError(
                f"on_invalid must be one of {', '.join(ON_INVALID)}, not {on_invalid!r}."
            )
        self.on_invalid = on_invalid
        if invalid_penalty is None:
            invalid_penalty = DEFAULT_PENALTY if on_invalid == "penalty" else 0.0
        self.invalid_penalty = float(invalid_penalty)
        self.parser = parser or make_parser(env.action_space, names)
        self.action_space = spaces.Text(max_length=MAX_ACTION_CHARS, min_length=0, charset=CHARSET)
        self._rng = np.random.default_rng()
        self._last: tuple[Any, dict[str, Any]] | None = None

    @classmethod
    def from_describer(cls, env: gym.Env, describer: Describer, **kwargs: Any) -> TextAction:
        """A TextAction whose discrete names come from ``describer``."""
        return cls(env, describer.action_names(env.unwrapped), **kwargs)

    def action(self, action: Any) -> Any:
        return self.parser(action).action

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        if seed is not None:
            self._rng = np.random.default_rng(seed)
        obs, info = self.env.reset(seed=seed, options=options)
        self._last = (obs, info)
        return obs, info

    def step(self, action: Any) -> tuple[Any, SupportsFloat, bool, bool, dict[str, Any]]:
        result = self.parser(action)
        if result.ok:
            return self._step(result.action, result, 0.0)
        if self.on_invalid == "raise":
            shown = str(action)[:200]
            raise InvalidActionError(f"Could not parse an action from {shown!r}: {result.error}.")
        if self.on_invalid == "terminate":
            obs, info = self._last if self._last is not None else (None, {})
            info = {**copy.deepcopy(info), "parse": result.as_dict()}
            return obs, self.invalid_penalty, True, False, info
        base_action = result.action
        if self.on_invalid == "random":
            base_action = self._random_action()
            result = ParseResult(False, result.method, base_action, result.error, result.clipped)
        return self._step(base_action, result, self.invalid_penalty)

    def _random_action(self) -> Any:
        space = self.env.action_space
        if isinstance(space, spaces.Discrete):
            return int(space.start) + int(self._rng.integers(int(space.n)))
        if isinstance(space, spaces.MultiDiscrete):
            return (space.start + self._rng.integers(space.nvec)).astype(space.dtype)
        if isinstance(space, spaces.MultiBinary):
            return self._rng.integers(2, size=space.shape).astype(space.dtype)
        bounded = np.isfinite(space.low) & np.isfinite(space.high)
        low, high = np.where(bounded, space.low, -1.0), np.where(bounded, space.high, 1.0)
        return self._rng.uniform(low, high).astype(space.dtype)

    def _step(
        self, base_action: Any, result: ParseResult, penalty: float
    ) -> tuple[Any, SupportsFloat, bool, bool, dict[str, Any]]:
        obs, reward, terminated, truncated, info = self.env.step(base_action)
        self._last = (obs, info)
        info = {**info, "parse": result.as_dict()}
        return obs, float(reward) + penalty, terminated, truncated, info
