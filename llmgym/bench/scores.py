"""The leaderboard's numbers: per (env, agent) cell the mean return with its 95 % bootstrap
CI, the normalized score and its anchors (``REFERENCE_RETURNS`` where a run lacks random or
reference rows), parse rate and env-steps/s, as ``CellStats`` (``summarize``), and the labels
of a variant's envs (``env_label``). ``llmgym.bench.report`` writes them as tables,
``llmgym.bench.charts`` draws them.

Example:
    >>> rows = [{"env_id": "E", "agent": a, "seed": s, "return": r, "length": 1,
    ...          "parse_rate": 1.0, "wall_s": 0.001}
    ...         for a, r in [("random", 0.0), ("optimal", 1.0)] for s in range(4)]
    >>> [(s.agent, s.normalized) for s in summarize(rows, ["E"], ["optimal"])]
    [('optimal', 1.0)]
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from llmgym.bench.costs import TrainingCost
from llmgym.envs.catalog import text_id

#: Published (random, best known) returns for when a run lacks random or reference rows (see
#: the project's REFERENCE.md), keyed by the catalog's text ids.
REFERENCE_RETURNS: dict[str, tuple[float, float]] = {
    text_id("CartPole"): (22.0, 500.0),
    text_id("Acrobot"): (-500.0, -73.5),
    text_id("MountainCar"): (-200.0, -100.8),
    text_id("Blackjack"): (-0.394, -0.0431),
    text_id("FrozenLake"): (0.0139, 0.744),
}
REFERENCE_AGENTS = ("optimal", "sb3-ppo", "sb3-dqn", "sb3-a2c")
BOOTSTRAP_SAMPLES = 2000


def bootstrap_ci(
    values: Sequence[float], level: float = 0.95, seed: int = 0
) -> tuple[float, float]:
    """Percentile bootstrap confidence interval of the mean (deterministic for a seed).

    Example:
        >>> bootstrap_ci([1.0, 1.0, 1.0])
        (1.0, 1.0)
    """
    data = np.asarray(values, dtype=float)
    rng = np.random.default_rng(seed)
    means = data[rng.integers(len(data), size=(BOOTSTRAP_SAMPLES, len(data)))].mean(axis=1)
    tail = (1 - level) / 2 * 100
    low, high = np.percentile(means, [tail, 100 - tail])
    return float(low), float(high)


@dataclass(frozen=True)
class CellStats:
    """One leaderboard line."""

    env_id: str
    agent: str
    episodes: int
    mean: float
    ci_low: float
    ci_high: float
    normalized: float | None
    normalized_ci: tuple[float, float] | None
    parse_rate: float
    steps_per_s: float
    exact: float | None = None
    training: TrainingCost | None = None
    #: The env kwargs the bench made the env with, as ``env_label`` writes them ("" if none).
    variant: str = ""

    @property
    def label(self) -> str:
        """The env as the leaderboard names it: its id, then its env kwargs in brackets."""
        return f"{self.env_id} [{self.variant}]" if self.variant else self.env_id


def variant_text(env_kwargs: dict[str, Any] | None) -> str:
    """Env kwargs as a leaderboard label writes them: ``KEY=VALUE``, comma-separated.

    Example:
        >>> variant_text({"action_names": "alt", "shuffle_actions": True}), variant_text(None)
        ('action_names=alt, shuffle_actions=true', '')
    """
    import json

    return ", ".join(
        f"{k}={v if isinstance(v, str) else json.dumps(v)}" for k, v in (env_kwargs or {}).items()
    )


def env_label(env_id: str, env_kwargs: dict[str, Any] | None = None) -> str:
    """An env's name in the leaderboard: its id, with the bench's env kwargs in brackets.

    Example:
        >>> env_label("Text-Blackjack-v1", {"action_names": "alt"}), env_label("Text-Taxi-v4")
        ('Text-Blackjack-v1 [action_names=alt]', 'Text-Taxi-v4')
    """
    variant = variant_text(env_kwargs)
    return f"{env_id} [{variant}]" if variant else env_id


def _anchors(means: dict[str, float], env_id: str) -> tuple[float, float] | None:
    random, best = REFERENCE_RETURNS.get(env_id, (None, None))
    random = means.get("random", random)
    references = [means[a] for a in REFERENCE_AGENTS if a in means]
    best = max(references) if references else best
    if random is None or best is None or math.isclose(best, random):
        return None
    return random, best


def _normalizer(random: float, best: float) -> Any:
    return lambda value: (value - random) / (best - random)


def _ordered(a: float, b: float) -> tuple[float, float]:
    """``(low, high)``: a normalizer whose best reference lies below random (a sampled
    random mean above the published best) reverses the interval; keep it ordered."""
    return (a, b) if a <= b else (b, a)


def summarize(
    rows: Sequence[dict[str, Any]],
    env_ids: Sequence[str],
    agents: Sequence[str],
    exact: dict[tuple[str, str], float] | None = None,
    costs: dict[tuple[str, str], TrainingCost | None] | None = None,
) -> list[CellStats]:
    """Leaderboard lines for ``agents`` on ``env_ids`` (in that order); the normalization
    anchors come from every agent's rows on the env. ``exact[(env, agent)]`` is the exact
    value of a cell and ``costs[(env, agent)]`` its agent's training, where known."""
    by_cell: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for row in sorted(rows, key=lambda r: r["seed"]):  # statistics ignore the order of arrival
        by_cell.setdefault((row["env_id"], row["agent"]), []).append(row)
    stats = []
    for env_id in env_ids:
        means = {
            a: float(np.mean([r["return"] for r in rs]))
            for (e, a), rs in by_cell.items()
            if e == env_id
        }
        anchors = _anchors(means, env_id)
        for agent in agents:
            cell = by_cell.get((env_id, agent))
            if not cell:
                continue
            returns = [r["return"] for r in cell]
            low, high = bootstrap_ci(returns)
            steps = sum(r["length"] for r in cell)
            parsed = sum(r["parse_rate"] * r["length"] for r in cell)
            wall = sum(r["wall_s"] for r in cell)
            mean = means[agent]
            scale = None if anchors is None else _normalizer(*anchors)
            stats.append(
                CellStats(
                    env_id=env_id,
                    agent=agent,
                    episodes=len(cell),
                    mean=mean,
                    ci_low=low,
                    ci_high=high,
                    normalized=None if scale is None else scale(mean),
                    normalized_ci=None if scale is None else _ordered(scale(low), scale(high)),
                    parse_rate=parsed / steps,
                    steps_per_s=steps / wall if wall > 0 else float("nan"),
                    exact=(exact or {}).get((env_id, agent)),
                    training=(costs or {}).get((env_id, agent)),
                )
            )
    return stats
