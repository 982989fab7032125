"""The memoised features of a frozen backbone as a checkpoint holds them: each distinct prompt's
row (hidden state, candidate LM scores; or a greedy generation) is a function of the frozen
weights alone, so a run keeps them across checkpoints, and a resumed run reads the same floats
back instead of computing them again in other batches (``LLMPolicy.memo_state``).

Example:
    >>> import torch
    >>> memo = {((1, 2), ("LEFT",)): (torch.ones(3)[:2], torch.zeros(1))}
    >>> state = memo_state(memo)
    >>> restored = {}
    >>> restore_memo(restored, state, "cpu")
    >>> restored[((1, 2), ("LEFT",))][0].tolist()
    [1.0, 1.0]
"""

from __future__ import annotations

from typing import Any

import torch


def memo_state(memo: dict[tuple[Any, ...], Any]) -> dict[str, list[Any]]:
    """``memo`` as plain types and tensors on the CPU (``torch.save``;
    ``torch.load(weights_only=True)`` reads it back); a row of a batch tensor is saved
    without the batch."""

    def own(value: Any) -> Any:
        return value.detach().cpu().clone() if isinstance(value, torch.Tensor) else value

    keys = list(memo)
    return {"keys": keys, "values": [tuple(own(v) for v in memo[k]) for k in keys]}


def restore_memo(
    memo: dict[tuple[Any, ...], Any], state: dict[str, list[Any]], device: Any
) -> None:
    """Replace ``memo``'s rows with ``state``'s (:func:`memo_state`), tensors on ``device``."""

    def here(value: Any) -> Any:
        return value.to(device) if isinstance(value, torch.Tensor) else value

    memo.clear()
    for key, value in zip(state["keys"], state["values"], strict=True):
        memo[key] = tuple(here(v) for v in value)


__all__ = ["memo_state", "restore_memo"]
