"""The losses the trainers share: PPO's clipped surrogate (per answer, or
per token averaged over each completion) and the k3 estimator of KL(pi || ref).

Example:
    >>> import torch
    >>> logratio = torch.log(torch.tensor([1.5, 0.5]))
    >>> clipped_surrogate(logratio, torch.tensor([1.0, -1.0]), clip=0.2)
    tensor([-1.2000,  0.8000])
    >>> round(float(k3_kl(torch.tensor([0.0]), torch.tensor([0.0]))), 6)
    0.0
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def clipped_surrogate(logratio: Any, advantages: Any, clip: float) -> Any:
    """PPO's clipped policy loss per element: ``max(-A r, -A clip(r, 1 - clip, 1 + clip))``
    with ``r = exp(logratio)`` (new over old probability)."""
    ratio = logratio.exp()
    return (-advantages * ratio).max(-advantages * ratio.clamp(1 - clip, 1 + clip))


def token_clipped_surrogate(token_logratios: Sequence[Any], advantages: Any, clip: float) -> Any:
    """The clipped loss per completion in generate mode: each token's ratio is clipped and the
    completion's loss is the mean over its tokens (all tokens share the answer's advantage)."""
    import torch

    return torch.stack(
        [clipped_surrogate(lr, a, clip).mean() for lr, a in zip(token_logratios, advantages)]
    )


def k3_kl(ref_logp: Any, logp: Any) -> Any:
    """The k3 estimator of KL(pi || ref) from samples of pi, averaged: ``E[e^d - d - 1]`` with
    ``d = log ref - log pi`` (unbiased, never negative)."""
    d = ref_logp - logp
    return (d.exp() - d - 1).mean()


__all__ = ["clipped_surrogate", "k3_kl", "token_clipped_surrogate"]
