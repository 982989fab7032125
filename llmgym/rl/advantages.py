"""Advantages as pure functions of rewards, values and groups: GAE across the turns of an
episode (PPO), group-relative returns (GRPO) and reward-to-go minus a baseline (REINFORCE).
Nothing here touches a model or an episode record: each takes numbers and returns numbers.

Example:
    >>> discounted_returns([0.0, 0.0, 1.0], 0.5)
    [0.25, 0.5, 1.0]
    >>> adv, ret = gae([0.0, 1.0], [0.5, 0.5], last_value=0.0, gamma=1.0, lam=1.0)
    >>> adv, ret
    ([0.5, 0.5], [1.0, 1.0])
    >>> group_advantages([1.0, 0.0, 5.0, 5.0], groups=[0, 0, 1, 1], scale=False)
    [0.5, -0.5, 0.0, 0.0]
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def discounted_returns(rewards: Sequence[float], gamma: float) -> list[float]:
    """Reward-to-go of each turn.

    Example:
        >>> discounted_returns([1.0, 1.0], 0.9)
        [1.9, 1.0]
    """
    out, running = [], 0.0
    for r in reversed(rewards):
        running = r + gamma * running
        out.append(running)
    return out[::-1]


def gae(
    rewards: Sequence[float],
    values: Sequence[float],
    last_value: float,
    gamma: float,
    lam: float,
) -> tuple[list[float], list[float]]:
    """Generalised advantage estimation over one episode's turns: (advantages, returns), with
    ``returns = advantages + values`` (the critic's targets). ``last_value`` is V of the state
    after the last turn: 0 when the episode terminated, the critic's estimate when it was cut.

    Example:
        >>> gae([1.0, 1.0], [0.0, 0.0], last_value=2.0, gamma=0.5, lam=1.0)
        ([2.0, 2.0], [2.0, 2.0])
    """
    advantages = [0.0] * len(rewards)
    running = 0.0
    for t in reversed(range(len(rewards))):
        next_value = values[t + 1] if t + 1 < len(rewards) else last_value
        delta = rewards[t] + gamma * next_value - values[t]
        running = delta + gamma * lam * running
        advantages[t] = running
    return advantages, [a + v for a, v in zip(advantages, values)]


def normalize(advantages: Sequence[float], mean: float, std: float, scale: bool = True) -> list:
    """``(a - mean) / (std + 1e-4)``, or only centred when ``scale`` is off (Dr. GRPO).

    Example:
        >>> normalize([3.0, 1.0], mean=2.0, std=1.0, scale=False)
        [1.0, -1.0]
    """
    adv = np.asarray(advantages, dtype=float) - mean
    if scale:
        adv = adv / (std + 1e-4)
    return adv.tolist()


def group_stats(pairs: Sequence[tuple[int, float]]) -> dict[int, tuple[float, float]]:
    """Mean and std of the returns of each group, from (group, return) pairs.

    Example:
        >>> group_stats([(0, 1.0), (0, 3.0), (1, 5.0)])
        {0: (2.0, 1.0), 1: (5.0, 0.0)}
    """
    by_group: dict[int, list[float]] = {}
    for g, r in pairs:
        by_group.setdefault(g, []).append(r)
    return {g: (float(np.mean(r)), float(np.std(r))) for g, r in by_group.items()}


def group_advantages(
    returns: Sequence[float],
    groups: Sequence[int],
    scale: bool = True,
    stats: dict[int, tuple[float, float]] | None = None,
) -> list[float]:
    """GRPO: each return minus its group's mean, over the group's std (``scale``). ``stats``:
    the groups' statistics when they span more returns than these (several processes).

    Example:
        >>> [round(a, 3) for a in group_advantages([2.0, 0.0], groups=[7, 7])]
        [1.0, -1.0]
    """
    stats = stats or group_stats(list(zip(groups, returns)))
    return [normalize([r], *stats[g], scale=scale)[0] for g, r in zip(groups, returns)]


def baseline_advantages(
    returns: Sequence[float], baseline: float, std: float | None = None
) -> list[float]:
    """REINFORCE: reward-to-go minus a baseline, divided by ``std`` when given (and > 1e-8).

    Example:
        >>> baseline_advantages([3.0, 1.0], baseline=2.0), baseline_advantages([4.0], 2.0, std=0.0)
        ([1.0, -1.0], [2.0])
    """
    adv = np.asarray(returns, dtype=float) - baseline
    if std is not None and std > 1e-8:
        adv = adv / (std + 1e-8)
    return adv.tolist()


__all__ = [
    "baseline_advantages",
    "discounted_returns",
    "gae",
    "group_advantages",
    "group_stats",
    "normalize",
]
