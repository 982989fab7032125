"""Log-likelihoods of a policy's own samples, as training scores them (RL updates and SFT).

Example:
    >>> from types import SimpleNamespace
    >>> sequence_mean_logprob(SimpleNamespace(logprob=-1.5, token_logprobs=None), "score")
    -1.5
"""

from __future__ import annotations

from typing import Any


def evaluate_cached(policy: Any, samples: list[Any], generate: bool = False) -> Any:
    """``policy.forward_samples`` with the shared system-prompt prefix encoded once without
    gradient (score mode, or generate mode where ``generate``, with the prefix cache on and two
    samples or more); otherwise plain."""
    mode_shares = policy.config.mode == "score" or generate
    shared = mode_shares and policy.config.prefix_cache and len(samples) > 1
    return policy.forward_samples(samples, shared_prefix=shared)


def sequence_mean_logprob(out: Any, mode: str) -> Any:
    """Per-sample log-likelihood normalised for SFT: the candidate log-prob in score mode, the
    mean token log-prob of the completion in generate mode."""
    if mode == "generate" and getattr(out, "token_logprobs", None) is not None:
        import torch

        return torch.stack([t.mean() for t in out.token_logprobs])
    return out.logprob


__all__ = ["evaluate_cached", "sequence_mean_logprob"]
