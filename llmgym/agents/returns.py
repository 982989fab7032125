"""Episode returns that can be averaged: non-finite ones (a broken reward function) are
counted, warned about and left out, so no NaN mean is ever reported.

Example:
    >>> import warnings
    >>> with warnings.catch_warnings(record=True):
    ...     finite_returns([1.0, float("nan"), 0.0])
    [1.0, 0.0]
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence


def finite_returns(returns: Sequence[float]) -> list[float]:
    """The finite returns of ``returns``; warns (RuntimeWarning) when any were dropped."""
    finite = [float(r) for r in returns if math.isfinite(r)]
    if len(finite) < len(returns):
        warnings.warn(
            f"llmgym: {len(returns) - len(finite)} episode(s) had non-finite rewards and are "
            "left out of the mean",
            RuntimeWarning,
            stacklevel=3,
        )
    return finite


__all__ = ["finite_returns"]
