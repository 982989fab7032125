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

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym
import numpy as np

from llmgym.evaluation.stats import finite_returns, mean_ci95
from llmgym.rollout import Actor, Episode, play


@dataclass
class EvalResult:
    """What an evaluation measured: per-episode returns and lengths, parsed answers and wall
    time (``method="sampled"``), or an exact expected return (``method="exact"``, no episodes,
    CI 0; see :meth:`exact`)."""

    returns: list[float] = field(default_factory=list)
    lengths: list[int] = field(default_factory=list)
    parsed: int = 0
    """Answers the env parsed without falling back."""
    wall_s: float = 0.0
    method: str = "sampled"
    exact_value: float | None = None
    exact_parse_rate: float | None = None

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
        self.returns.append(episode.ret)
        self.lengths.append(episode.length)
        self.parsed += sum(s.parse_ok for s in episode.steps)

    @property
    def episodes(self) -> int:
        return len(self.returns)

    @property
    def env_steps(self) -> int:
        return int(sum(self.lengths))

    @property
    def finite(self) -> list[float]:
        """The finite returns (a broken reward function's episodes are left out)."""
        return [float(r) for r in self.returns if math.isfinite(r)]

    @property
    def mean_return(self) -> float:
        if self.exact_value is not None:
            return float(self.exact_value)
        return mean_ci95(self.finite)[0]

    @property
    def ci95(self) -> float:
        return 0.0 if self.exact_value is not None else mean_ci95(self.finite)[1]

    @property
    def success_rate(self) -> float:
        """Share of episodes with a positive return (NaN for an exact evaluation)."""
        if not self.returns:
            return math.nan
        return float(np.mean([r > 0 for r in self.returns]))

    @property
    def parse_rate(self) -> float:
        if self.exact_parse_rate is not None:
            return float(self.exact_parse_rate)
        return self.parsed / self.env_steps if self.env_steps else math.nan

    @property
    def mean_length(self) -> float:
        return float(np.mean(self.lengths)) if self.lengths else math.nan

    @property
    def env_steps_per_s(self) -> float:
        return self.env_steps / self.wall_s if self.wall_s > 0 else math.nan

    def summary(self) -> dict[str, Any]:
        """The numbers as a dict (what training logs and ``llmgym eval`` writes); warns when
        episodes with a non-finite return were left out of the mean."""
        finite = finite_returns(self.returns)
        return {
            "method": self.method,
            "mean_return": self.mean_return,
            "ci95": self.ci95,
            "episodes": self.episodes,
            "nonfinite_episodes": self.episodes - len(finite),
            "std_return": float(np.std(finite, ddof=1)) if len(finite) > 1 else 0.0,
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
    seeds: Sequence[int],
    *,
    batch_size: int | None = None,
    max_steps: int | None = None,
    on_end: Callable[[int, Episode], None] | None = None,
    before_batch: Callable[[], None] | None = None,
    before_act: Callable[[list[Episode]], None] | None = None,
) -> EvalResult:
    """Play one episode per seed with ``act`` on ``envs`` (``batch_size`` seeds at a time,
    default all: a stochastic actor then acts as one uninterrupted stream) and return an
    :class:`EvalResult`. ``on_end(slot, episode)``
    sees each episode as it ends; ``before_batch()`` runs before each batch of seeds (a fresh
    agent state); ``before_act`` is :func:`llmgym.rollout.play`'s hook."""
    result = EvalResult()
    size = max(1, batch_size or len(seeds))
    start = time.perf_counter()

    def ended(slot: int, episode: Episode) -> None:
        result.add(episode)
        if on_end is not None:
            on_end(slot, episode)

    for first in range(0, len(seeds), size):
        chunk = list(seeds[first : first + size])
        if before_batch is not None:
            before_batch()
        play(
            act,
            envs[: len(chunk)],
            chunk,
            max_steps=max_steps,
            before_act=before_act,
            on_end=ended,
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
