"""Episode returns that can be averaged: non-finite ones (a broken reward function) are
counted, warned about and left out, so no NaN mean is ever reported; and the one mean with
its 95 % confidence interval that training, ``llmgym eval`` and the SFT references report.

Example:
    >>> import warnings
    >>> with warnings.catch_warnings(record=True):
    ...     finite = finite_returns([1.0, float("nan"), 0.0])
    >>> finite, mean_ci95(finite)[0]
    ([1.0, 0.0], 0.5)
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence

import numpy as np


def finite_returns(returns: Sequence[float]) -> list[float]:
    """The finite returns of ``returns``; warns (RuntimeWarning) when any were dropped."""
    finite = [float(r) for r in returns if math.isfinite(r)]
    if len(finite) < len(returns):
        warn_nonfinite(len(returns) - len(finite), stacklevel=4)
    return finite


def warn_nonfinite(count: int, stacklevel: int = 3) -> None:
    """Warn (RuntimeWarning) that ``count`` episodes were left out of a mean."""
    warnings.warn(
        f"llmgym: {count} episode(s) had non-finite rewards and are left out of the mean",
        RuntimeWarning,
        stacklevel=stacklevel,
    )


def mean_ci95(values: Sequence[float]) -> tuple[float, float]:
    """The mean and the half-width of its 95 % confidence interval (normal approximation:
    1.96 standard errors); the half-width is NaN below two values, both are NaN for none.

    Example:
        >>> mean, half = mean_ci95([1.0, -1.0] * 50)
        >>> round(mean, 3), round(half, 3)
        (0.0, 0.197)
        >>> mean_ci95([2.0]), mean_ci95([])
        ((2.0, nan), (nan, nan))
    """
    data = np.asarray(values, dtype=float)
    if data.size == 0:
        return math.nan, math.nan
    if data.size == 1:
        return float(data[0]), math.nan
    return float(data.mean()), 1.96 * float(data.std(ddof=1)) / math.sqrt(data.size)


__all__ = ["finite_returns", "mean_ci95", "warn_nonfinite"]
