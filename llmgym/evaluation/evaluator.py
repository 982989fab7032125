"""The one evaluator: play one episode per explicit seed with an actor, K envs at a time, and
summarise them (mean return with its 95 % CI, success and parse rates, env-steps/s).

Training's periodic and final evaluations, ``llmgym eval``, the bench and the SFT reference
returns all call :func:`evaluate`. Episodes are played ``batch_size`` seeds at a time (all at
once by default) and each is handed to ``on_end`` as it ends, then reduced to its numbers, so
with a batch size memory follows the batch, not the number of episodes asked for.

Example:
    >>> import gymnasium as gym, llmgym
    >>> envs = [gym.make("Text-CliffWalking-v1") for _ in range(2)]
    >>> def always_up(observations, infos):
    ...     return ['{"action": "UP"}' for _ in observations]
    >>> result = evaluate(always_up, envs, seeds=[0, 1, 2], max_steps=3)
    >>> result.episodes, result.mean_return, result.parse_rate, result.mean_length
    (3, -3.0, 1.0, 3.0)
"""

from __future__ import annotations

import itertools
import math
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym
import numpy as np

from llmgym.evaluation.stats import mean_ci95, warn_nonfinite
from llmgym.rollout import Actor, Episode, play


@dataclass
class EvalResult:
    """What an evaluation measured: running statistics of the episodes' returns, lengths and
    parsed answers, the returns themselves (``keep_returns``; off, memory stays constant
    whatever the number of episodes) and wall time (``method="sampled"``), or an exact
    expected return (``method="exact"``, no episodes, CI 0; see :meth:`exact`).

    Example:
        >>> r = EvalResult(keep_returns=False)
        >>> for ret in [1.0, 0.0, float("nan"), 1.0]:
        ...     r.add_return(ret, length=2, parsed=2)
        >>> r.episodes, r.returns, round(r.mean_return, 4), r.success_rate, r.env_steps
        (4, [], 0.6667, 0.5, 8)
    """

    returns: list[float] = field(default_factory=list)
    """Every episode's return, in the order they ended (empty unless ``keep_returns``)."""
    parsed: int = 0
    """Answers the env parsed without falling back."""
    wall_s: float = 0.0
    method: str = "sampled"
    exact_value: float | None = None
    exact_parse_rate: float | None = None
    keep_returns: bool = True
    count: int = 0
    """Episodes counted."""
    env_steps: int = 0
    positive: int = 0
    """Episodes with a positive return."""
    # over the finite returns: their count, their compensated (Neumaier) sum, and Welford's
    # running mean and sum of squared deviations
    _finite: int = field(default=0, init=False, repr=False)
    _sum: float = field(default=0.0, init=False, repr=False)
    _carry: float = field(default=0.0, init=False, repr=False)
    _mean: float = field(default=0.0, init=False, repr=False)
    _m2: float = field(default=0.0, init=False, repr=False)

    @classmethod
    def exact(cls, value: float, parse_rate: float, wall_s: float = 0.0) -> EvalResult:
        """An exact evaluation (``llmgym.evaluation.exact``) in the same shape.

        Example:
            >>> r = EvalResult.exact(-0.07, 1.0)
            >>> r.mean_return, r.ci95, r.episodes, r.method
            (-0.07, 0.0, 0, 'exact')
        """
        return cls(wall_s=wall_s, method="exact", exact_value=value, exact_parse_rate=parse_rate)

    def add(self, episode: Episode) -> None:
        """Count one finished episode."""
        self.add_return(episode.ret, episode.length, sum(s.parse_ok for s in episode.steps))

    def add_return(self, ret: float, length: int, parsed: int) -> None:
        """Count one finished episode by its numbers."""
        ret = float(ret)
        self.count += 1
        self.env_steps += int(length)
        self.parsed += int(parsed)
        self.positive += ret > 0
        if self.keep_returns:
            self.returns.append(ret)
        if not math.isfinite(ret):
            return
        self._finite += 1
        total = self._sum + ret
        if abs(self._sum) >= abs(ret):
            self._carry += (self._sum - total) + ret
        else:
            self._carry += (ret - total) + self._sum
        self._sum = total
        delta = ret - self._mean
        self._mean += delta / self._finite
        self._m2 += delta * (ret - self._mean)

    @property
    def episodes(self) -> int:
        return self.count

    @property
    def finite_episodes(self) -> int:
        """Episodes with a finite return (those the mean is over)."""
        return self._finite

    @property
    def _kept(self) -> bool:
        """Whether every return is at hand (the statistics then come from them, exactly as
        numpy computes them)."""
        return self.keep_returns and len(self.returns) == self.count

    @property
    def finite(self) -> list[float]:
        """The finite returns (a broken reward function's episodes are left out); empty
        unless ``keep_returns``."""
        return [float(r) for r in self.returns if math.isfinite(r)]

    def _mean_ci95(self) -> tuple[float, float]:
        if self._kept:
            return mean_ci95(self.finite)
        n = self._finite
        if n == 0:
            return math.nan, math.nan
        mean = (self._sum + self._carry) / n
        return mean, 1.96 * self._std() / math.sqrt(n) if n > 1 else math.nan

    def _std(self) -> float:
        if self._kept:
            finite = self.finite
            return float(np.std(finite, ddof=1)) if len(finite) > 1 else 0.0
        return math.sqrt(max(self._m2, 0.0) / (self._finite - 1)) if self._finite > 1 else 0.0

    @property
    def mean_return(self) -> float:
        if self.exact_value is not None:
            return float(self.exact_value)
        return self._mean_ci95()[0]

    @property
    def ci95(self) -> float:
        return 0.0 if self.exact_value is not None else self._mean_ci95()[1]

    @property
    def success_rate(self) -> float:
        """Share of episodes with a positive return (NaN for an exact evaluation)."""
        return self.positive / self.count if self.count else math.nan

    @property
    def parse_rate(self) -> float:
        if self.exact_parse_rate is not None:
            return float(self.exact_parse_rate)
        return self.parsed / self.env_steps if self.env_steps else math.nan

    @property
    def mean_length(self) -> float:
        return self.env_steps / self.count if self.count else math.nan

    @property
    def env_steps_per_s(self) -> float:
        return self.env_steps / self.wall_s if self.wall_s > 0 else math.nan

    def summary(self) -> dict[str, Any]:
        """The numbers as a dict (what training logs and ``llmgym eval`` writes); warns when
        episodes with a non-finite return were left out of the mean."""
        nonfinite = self.count - self._finite
        if nonfinite:
            warn_nonfinite(nonfinite)
        return {
            "method": self.method,
            "mean_return": self.mean_return,
            "ci95": self.ci95,
            "episodes": self.episodes,
            "nonfinite_episodes": nonfinite,
            "std_return": self._std(),
            "success_rate": self.success_rate,
            "parse_rate": self.parse_rate,
            "mean_length": self.mean_length,
            "env_steps": self.env_steps,
            "env_steps_per_s": self.env_steps_per_s,
            "wall_s": self.wall_s,
            "returns": list(self.returns),
        }


def evaluate(
    act: Actor,
    envs: Sequence[gym.Env],
    seeds: Iterable[int],
    *,
    batch_size: int | None = None,
    max_steps: int | None = None,
    on_end: Callable[[int, Episode], None] | None = None,
    before_batch: Callable[[], None] | None = None,
    before_act: Callable[[list[Episode]], None] | None = None,
    keep_returns: bool = True,
) -> EvalResult:
    """Play one episode per seed with ``act`` on ``envs`` (``batch_size`` seeds at a time,
    default all: a stochastic actor then acts as one uninterrupted stream) and return an
    :class:`EvalResult`. ``on_end(slot, episode)``
    sees each episode as it ends; ``before_batch()`` runs before each batch of seeds (a fresh
    agent state); ``before_act`` is :func:`llmgym.rollout.play`'s hook.

    ``seeds`` is read lazily (a ``range`` or generator of any length) and no episode is kept
    once counted, so memory follows ``len(envs)`` (and, with ``keep_returns``, one float per
    episode played), never the number of seeds asked for."""
    result = EvalResult(keep_returns=keep_returns)
    start = time.perf_counter()

    def ended(slot: int, episode: Episode) -> None:
        result.add(episode)
        if on_end is not None:
            on_end(slot, episode)

    upcoming = iter(seeds)
    while True:
        if batch_size:
            chunk: Iterable[int] = list(itertools.islice(upcoming, max(1, batch_size)))
            if not chunk:
                break
            width = len(chunk)  # type: ignore[arg-type]
        else:  # one stream over every seed: each env takes the next seed as it frees up
            first = next(upcoming, None)
            if first is None:
                break
            chunk, width = itertools.chain([first], upcoming), len(envs)
        if before_batch is not None:
            before_batch()
        play(
            act,
            envs[:width],
            chunk,
            max_steps=max_steps,
            before_act=before_act,
            on_end=ended,
            keep=False,
        )
    result.wall_s = time.perf_counter() - start
    return result


def evaluation_kwargs(env_kwargs: dict[str, Any]) -> dict[str, Any]:
    """The evaluation env's kwargs: without a training-only ``max_episode_steps`` cap, and
    on the held-out ``split="test"`` where training draws from ``split="train"`` (math).

    Example:
        >>> evaluation_kwargs({"is_slippery": False, "max_episode_steps": 30})
        {'is_slippery': False}
        >>> evaluation_kwargs({"split": "train"})
        {'split': 'test'}
    """
    out = {k: v for k, v in env_kwargs.items() if k != "max_episode_steps"}
    if out.get("split") == "train":
        out["split"] = "test"
    return out


__all__ = ["EvalResult", "evaluate", "evaluation_kwargs"]
