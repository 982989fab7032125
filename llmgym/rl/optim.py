"""Several torch optimizers stepped as one: AdamW for the language model and the critic, plain
SGD for the action head (``head_optimizer``) and, with ``lm_optimizer=sgd``, the language model.

Why SGD for the head: its step follows the size of the gradient. Adam's per-coordinate
normalisation gives every weight of the bilinear head a step of about ``lr`` whatever its
gradient, so the coordinates that only carry return noise move as much as those that carry
the signal. Measured on Blackjack (head-only PPO, 2,000 episodes, seeds 0-2;
``experiments/head_sweep.py``): mean exact greedy value -0.0927 with AdamW, -0.0824 with SGD.

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
        #: Steps taken since this object was made (a resume makes a new one).
        self.steps = 0

    @property
    def param_groups(self) -> list[dict[str, Any]]:
        return [group for opt in self.optimizers for group in opt.param_groups]

    def zero_grad(self, set_to_none: bool = True) -> None:
        for opt in self.optimizers:
            opt.zero_grad(set_to_none=set_to_none)

    def step(self) -> None:
        for opt in self.optimizers:
            opt.step()
        self.steps += 1

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


def make_optimizer(
    model: Any, extra_modules: dict[str, Any], module_lr: dict[str, float], optim: Any, lr: float
) -> Optimizers:
    """AdamW with the language model's trainable weights as group 0 (``lr``) and one group per
    extra module at its own rate (``module_lr``, else ``lr``); the action head in its own SGD
    when ``optim.head_optimizer`` is ``sgd``, and the language model too when
    ``optim.lm_optimizer`` is ``sgd``. Every group remembers its ``initial_lr``.

    Example:
        >>> import torch
        >>> from types import SimpleNamespace as NS
        >>> head = torch.nn.Linear(2, 1)
        >>> optim = NS(weight_decay=0.0, head_optimizer="sgd", lm_optimizer="adamw")
        >>> opt = make_optimizer(torch.nn.Linear(2, 2), {"action_head": head},
        ...     {"action_head": 0.3}, optim, lr=1e-3)
        >>> [(type(o).__name__, o.param_groups[0]["lr"]) for o in opt.optimizers]
        [('AdamW', 0.001), ('SGD', 0.3)]
        >>> optim = NS(weight_decay=0.0, head_optimizer="adamw", lm_optimizer="sgd")
        >>> opt = make_optimizer(torch.nn.Linear(2, 2), {"action_head": head}, {}, optim, lr=0.5)
        >>> [(type(o).__name__, o.param_groups[0]["lr"]) for o in opt.optimizers]
        [('SGD', 0.5), ('AdamW', 0.5)]
    """
    import torch

    lm = {"params": [p for p in model.parameters() if p.requires_grad], "lr": lr}
    groups, sgd = ([lm], []) if optim.lm_optimizer == "adamw" else ([], [lm])
    for name, module in extra_modules.items():
        params = [p for p in module.parameters() if p.requires_grad]
        group = {"params": params, "lr": module_lr.get(name, lr)}
        own = name == "action_head" and optim.head_optimizer == "sgd"
        (sgd if own else groups).append(group)
    for group in groups + sgd:
        group["initial_lr"] = group["lr"]
    optimizers = [torch.optim.AdamW(groups, weight_decay=optim.weight_decay)] if groups else []
    if sgd:
        optimizers.append(torch.optim.SGD(sgd))
    if lm in sgd:  # the language model's group first: ``param_groups[0]`` is its rate
        optimizers.reverse()
    return Optimizers(optimizers)


__all__ = ["Optimizers", "make_optimizer"]
