"""The hand-off from rollouts to an algorithm's loss: a :class:`RolloutBatch` holds, per
trained sample, what the loss reads (advantages, the log-probs it acted with, the critic's
values and targets, the reference's log-probs, a per-sample weight), computed once before the
first optimizer step. The episodes stay as they were played; nothing is written back into them.

Example:
    >>> import torch
    >>> batch = RolloutBatch(samples=["a", "b"], advantages=torch.tensor([1.0, -1.0]))
    >>> len(batch), batch.old_logprobs is None
    (2, True)
    >>> batch.select([1]).advantages
    tensor([-1.])
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass
class RolloutBatch:
    """One update's data; tensors are [N] over ``samples`` (the acted samples, plus PPO's
    mirror images after them)."""

    samples: list[Any]
    """The policy's samples (``ActionSample``): what the loss re-scores with gradients."""
    advantages: Any
    """[N] the advantage of each sample's action (normalised as the algorithm asks)."""
    old_logprobs: Any = None
    """[N] log pi_old(action) under the weights that acted; None when the ratio is 1 (one
    epoch: the loss uses the current log-probs, detached)."""
    old_token_logprobs: list[Any] | None = None
    """Generate mode: [T_i] per completion token, under the weights that acted."""
    values: Any = None
    """[N] the critic's estimates when the samples were acted (PPO)."""
    returns: Any = None
    """[N] the critic's targets (PPO: GAE advantages plus values)."""
    ref_logprobs: Any = None
    """[N] log pi_ref(action), when a KL term to the reference is on."""
    weights: Any = None
    """[N] a per-sample weight of the policy-gradient term (GRPO: informative samples)."""
    action_coefficients: list[Any] | None = None
    """[K_i] per sample: the weight of each valid action's log-prob in the actor loss
    (``--algo qac``)."""

    def __len__(self) -> int:
        return len(self.samples)

    def select(self, idx: list[int]) -> RolloutBatch:
        """The rows ``idx`` of every field (a minibatch)."""

        def rows(x: Any) -> Any:
            if x is None:
                return None
            if isinstance(x, list):
                return [x[i] for i in idx]
            return x[idx]

        return RolloutBatch(
            samples=rows(self.samples),
            advantages=rows(self.advantages),
            old_logprobs=rows(self.old_logprobs),
            old_token_logprobs=rows(self.old_token_logprobs),
            values=rows(self.values),
            returns=rows(self.returns),
            ref_logprobs=rows(self.ref_logprobs),
            weights=rows(self.weights),
            action_coefficients=rows(self.action_coefficients),
        )


__all__ = ["RolloutBatch"]
