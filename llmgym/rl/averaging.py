"""An exponential moving average of the trained weights (Polyak averaging, as
``torch.optim.swa_utils.get_ema_multi_avg_fn`` keeps for a whole module), which the trainer's
evaluations and saved policies use while acting and updates go on with the weights themselves
(``optim.average_decay``). Late in a run the updates keep moving a policy that has
converged; where they scatter it independently around a point, the average's variance there
is ``(1 - decay) / (1 + decay)`` of theirs (0.05 at decay 0.9).

Example:
    >>> import torch
    >>> w = torch.nn.Parameter(torch.zeros(2))
    >>> average = WeightAverage(lambda: {"w": w}, decay=0.5)
    >>> for value in (1.0, 3.0):
    ...     with torch.no_grad():
    ...         _ = w.fill_(value)
    ...     average.update()
    >>> with average.applied():
    ...     w.tolist()
    [2.0, 2.0]
    >>> w.tolist()
    [3.0, 3.0]
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any


class WeightAverage:
    """``average <- decay * average + (1 - decay) * weights`` after each update, starting
    from the weights after the first one; ``decay=0`` keeps nothing and applies nothing.

    ``params()`` names the trained weights (called anew each time: a reference refresh
    replaces the model); ``on_change`` runs after the weights are swapped (hot-loading them
    into a vLLM server that acts)."""

    def __init__(
        self,
        params: Callable[[], dict[str, Any]],
        decay: float,
        on_change: Callable[[], None] | None = None,
    ) -> None:
        self.params = params
        self.decay = decay
        self.on_change = on_change
        self.average: dict[str, Any] | None = None  # None: no update yet (or reset)

    def update(self) -> None:
        """Fold the current weights into the average (the first call copies them)."""
        if not self.decay:
            return
        import torch

        with torch.no_grad():
            params = self.params()
            if self.average is None:
                self.average = {k: p.detach().clone() for k, p in params.items()}
                return
            for key, p in params.items():
                self.average[key].lerp_(p.detach(), 1.0 - self.decay)

    def reset(self) -> None:
        """Forget the average (the weights it averaged were replaced): the next update
        starts it again."""
        self.average = None

    @contextmanager
    def applied(self) -> Iterator[None]:
        """The weights hold the average inside the block (where there is one), and their
        own values again after it."""
        if self.average is None:
            yield
            return
        own = {k: p.detach().clone() for k, p in self.params().items()}
        self._load(self.average)
        try:
            yield
        finally:
            self._load(own)

    def _load(self, values: dict[str, Any]) -> None:
        import torch

        with torch.no_grad():  # in place, so the policy's caches see new weights
            for key, p in self.params().items():
                p.copy_(values[key])
        if self.on_change is not None:
            self.on_change()

    def state_dict(self) -> dict[str, Any]:
        """The average, to checkpoint (empty when there is none)."""
        return dict(self.average or {})

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore what :meth:`state_dict` gave (an empty state: no average yet)."""
        own = self.params()
        if state and set(state) != set(own):
            raise KeyError(f"the average holds {len(state)} tensors, the weights {len(own)}")
        self.average = {k: v.to(own[k].device, own[k].dtype) for k, v in state.items()} or None


__all__ = ["WeightAverage"]
