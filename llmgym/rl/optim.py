"""Several torch optimizers stepped as one: AdamW for the language model and the critic, plain
SGD for the action head (``head_optimizer``).

Why SGD for the head: its step follows the size of the gradient. Adam's per-coordinate
normalisation gives every weight of the bilinear head a step of about ``lr`` whatever its
gradient, so the coordinates that only carry return noise move as much as those that carry
the signal. Measured on Blackjack (head-only PPO, 2,000 episodes, seeds 0-2;
``benchmarks/head_sweep.py``): mean exact greedy value -0.0927 with AdamW, -0.0824 with SGD.

Example:
    >>> import torch
    >>> a, b = torch.nn.Linear(2, 1), torch.nn.Linear(2, 1)
    >>> opt = Optimizers([torch.optim.AdamW(a.parameters(), lr=1e-3),
    ...                   torch.optim.SGD(b.parameters(), lr=0.1)])
    >>> [group["lr"] for group in opt.param_groups]
    [0.001, 0.1]
    >>> (a(torch.ones(2)) + b(torch.ones(2))).sum().backward()
    >>> opt.step(); opt.zero_grad()
    >>> sorted(opt.state_dict())
    ['optimizers']
"""

from __future__ import annotations

from typing import Any

from llmgym.errors import ConfigError


class Optimizers:
    """The optimizers of one trainer, used as a single ``torch.optim.Optimizer``:
    ``param_groups`` lists every optimizer's groups in order."""

    def __init__(self, optimizers: list[Any]) -> None:
        self.optimizers = optimizers

    @property
    def param_groups(self) -> list[dict[str, Any]]:
        return [group for opt in self.optimizers for group in opt.param_groups]

    def zero_grad(self, set_to_none: bool = True) -> None:
        for opt in self.optimizers:
            opt.zero_grad(set_to_none=set_to_none)

    def step(self) -> None:
        for opt in self.optimizers:
            opt.step()

    def state_dict(self) -> dict[str, Any]:
        return {"optimizers": [opt.state_dict() for opt in self.optimizers]}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore ``state_dict()``; a single optimizer's state (checkpoints written before
        the head had its own optimizer) restores a single optimizer."""
        states = state["optimizers"] if "optimizers" in state else [state]
        if len(states) != len(self.optimizers):
            raise ConfigError(
                f"The checkpoint has {len(states)} optimizer states for {len(self.optimizers)} "
                "optimizers; resume with the run's own head_optimizer."
            )
        for opt, one in zip(self.optimizers, states):
            opt.load_state_dict(one)


__all__ = ["Optimizers"]
