"""The frozen trunk: where LoRA trains only the last decoder layers (``lora.layers``), the
layers below the lowest trained one never change, so their output for a token sequence is a
constant of the run. :class:`TrunkStates` keeps that output (the hidden state entering the
first trained layer, per token) for each sequence the policy has run, in a bounded LRU;
``frozen.FrozenTrunk`` runs the model's own forward with the trunk's layers stubbed (the layer
below the first trained one hands back the kept states; those under it return their input
untouched) and a KV cache whose trunk layers are transformers' ``DummyLayer``, so that only
the top layers compute, forward and backward. Each sequence goes through the trunk once (when
it is first acted on or scored) and every later pass -- the update's old log-probs, each
epoch, the next updates when prompts repeat -- runs the top layers alone.

On top of that, the fast path:

- encodes the prompt prefix a batch shares once: without gradient and kept while the weights
  stay the same (``shared=True``, as the plain path), or once per call *with* gradient, so the
  gradient is the one per-sample encoding gives (Prefix Grouper, arXiv 2506.05433);
- computes identical rows of a call once (a repeated prompt and its candidates, a repeated
  prompt and completion) and gathers them, and without gradient reuses a row scored under the
  same weights (the update's old log-probs are the acting pass's);
- takes the log-probs of a completion from the final hidden states at its positions only.

It applies to models whose decoder layers ``decoder_layers`` finds, with a trunk (the
embeddings and the layers below the lowest layer that trains or carries an adapter) that
trains nothing and has no active dropout, once a probe on the first call has shown the fast
forward gives the plain forward's logits; elsewhere the plain path runs. ``FROZEN_TRUNK =
False`` switches it off.

Example:
    >>> from llmgym.policy.testing import tiny_model
    >>> model, _ = tiny_model()
    >>> first_trained_layer(model.requires_grad_(False), decoder_layers(model))
    2
"""

from __future__ import annotations

import functools
import inspect
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

import torch

#: Use the frozen-trunk fast path where it applies (False: always the plain path).
FROZEN_TRUNK = True
#: Memory the kept trunk states may take (least recently used sequences are dropped first).
TRUNK_STATES_MB = 512
#: Shorter shared prefixes are not worth a separate forward pass.
MIN_SHARED_PREFIX = 8
#: Trunk KV caches of shared prefixes kept to compute new sequences after them.
STEMS_KEPT = 8
#: A kept prefix this many tokens shorter than a batch's own shared prefix is used instead.
STEM_SLACK = 16
#: Rows scored without gradient kept while the weights stay the same (acting, then the
#: update's old log-probs under the weights that acted).
MEMO_ROWS = 65536


class _Entry:
    """One sequence's trunk states from position ``start`` (``stem``: the key of the sequence
    holding the positions before ``start``), and its hidden states at its last token of trunk
    layers the action head reads (``extras``, by hidden-state index)."""

    __slots__ = ("extras", "start", "stem", "states")

    def __init__(self, stem: tuple | None, start: int, states: torch.Tensor, extras: dict):
        self.stem, self.start, self.states, self.extras = stem, start, states, extras

    @property
    def nbytes(self) -> int:
        tensors = [self.states, *self.extras.values()]
        return sum(t.numel() * t.element_size() for t in tensors)


class TrunkStates:
    """The trunk's output per token sequence (keyed by the tuple of its ids), least recently
    used dropped first beyond ``limit_mb``; a sequence keeps only the positions past the
    shared prefix it was computed after, and reads the earlier ones from that prefix's entry.

    Example:
        >>> store = TrunkStates()
        >>> store.put((1, 2), None, 0, torch.zeros(2, 4))
        >>> store.put((1, 2, 3), (1, 2), 2, torch.ones(1, 4))
        >>> store.states((1, 2, 3), 1, 3)[:, 0].tolist()
        [0.0, 1.0]
    """

    def __init__(self, limit_mb: float = TRUNK_STATES_MB) -> None:
        self.limit = int(limit_mb * 2**20)
        self.entries: OrderedDict[tuple, _Entry] = OrderedDict()
        self.nbytes = 0
        self.pinned: set[tuple] = set()  # put or read by the call under way: never dropped

    def entry(self, key: tuple) -> _Entry | None:
        """The entry of ``key`` (marked as used), None where it or an entry it reads from is
        gone."""
        found = self.entries.get(key)
        if found is None or (found.stem is not None and self.entry(found.stem) is None):
            return None
        self.entries.move_to_end(key)
        self.pinned.add(key)
        return found

    def put(self, key: tuple, stem: tuple | None, start: int, states, extras=None) -> None:
        old = self.entries.pop(key, None)
        if old is not None:
            self.nbytes -= old.nbytes
        self.entries[key] = entry = _Entry(stem, start, states, extras or {})
        self.nbytes += entry.nbytes
        self.pinned.add(key)
        for old_key in list(self.entries):
            if self.nbytes <= self.limit:
                break
            if old_key not in self.pinned:
                self.nbytes -= self.entries.pop(old_key).nbytes

    def states(self, key: tuple, a: int, b: int) -> torch.Tensor:
        """States of positions ``a`` to ``b`` of sequence ``key`` [b - a, H]."""
        entry = self.entries[key]
        if a >= entry.start:
            return entry.states[a - entry.start : b - entry.start]
        head = self.states(entry.stem, a, min(b, entry.start))
        if b <= entry.start:
            return head
        return torch.cat([head, entry.states[: b - entry.start]])

    def clear(self) -> None:
        self.entries.clear()
        self.nbytes = 0

    def state(self) -> dict[str, list]:
        """The entries, least recently used first, and the pinned keys, as plain types and
        tensors (``torch.save``; :meth:`load_state` restores them)."""
        rows = [(k, e.stem, e.start, e.states, e.extras) for k, e in self.entries.items()]
        return {"entries": rows, "pinned": list(self.pinned)}

    def load_state(self, state: dict[str, list]) -> None:
        """Replace the entries with ``state``'s (:meth:`state`), in their order."""
        self.clear()
        for key, stem, start, states, extras in state["entries"]:
            self.entries[key] = entry = _Entry(stem, start, states, extras)
            self.nbytes += entry.nbytes
        self.pinned = set(state["pinned"])


def decoder_layers(model: Any) -> torch.nn.ModuleList | None:
    """The decoder layers of a Llama-style model (``model.model.layers``; also under peft),
    or None where they are not found there."""
    base = base_model(model)
    blocks = getattr(getattr(base, "model", None), "layers", None)
    count = getattr(base.config, "num_hidden_layers", None)
    return blocks if isinstance(blocks, torch.nn.ModuleList) and len(blocks) == count else None


def first_trained_layer(model: Any, blocks: Sequence[Any]) -> int:
    """The lowest decoder layer holding a parameter that trains or an adapter (so the layers
    below it compute the same with the adapter on or off), ``len(blocks)`` where none does;
    0 where the input embeddings train or carry one."""
    embeddings = base_model(model).get_input_embeddings()
    if _trains(embeddings):
        return 0
    return next((i for i, block in enumerate(blocks) if _trains(block)), len(blocks))


def _trains(module: Any) -> bool:
    if any(p.requires_grad for p in module.parameters()):
        return True
    return any(hasattr(m, "disable_adapters") for m in module.modules())


def deterministic(model: Any, blocks: Sequence[Any]) -> bool:
    """Whether the trunk computes the same each time (no dropout active in it)."""
    if not model.training:
        return True
    if float(getattr(base_model(model).config, "attention_dropout", 0.0) or 0.0) > 0:
        return False
    modules = [m for b in blocks for m in b.modules()]
    modules += list(base_model(model).get_input_embeddings().modules())
    return not any(isinstance(m, torch.nn.Dropout) and m.p > 0 for m in modules)


def base_model(model: Any) -> Any:
    return model.get_base_model() if hasattr(model, "get_base_model") else model


def cache_kwargs(model: Any, cache: Any) -> dict[str, Any]:
    """``cache`` as the keyword argument ``model``'s forward takes a KV cache under.

    Example:
        >>> from llmgym.policy.testing import tiny_model
        >>> list(cache_kwargs(tiny_model()[0], None)) in (["cache"], ["past_key_values"])
        True
    """
    return {_cache_keyword(type(base_model(model))): cache}


@functools.cache
def _cache_keyword(cls: type) -> str:
    # transformers 5.x renamed ``past_key_values`` to ``cache`` (the old name still works there
    # with a FutureWarning, until 5.40); older versions, down to the 4.56 we support, know only
    # the old one. The forward's signature, read once per model class, says which it takes.
    parameters = inspect.signature(cls.forward).parameters
    return "cache" if "cache" in parameters else "past_key_values"


def common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    n = min(len(a), len(b))
    for i in range(n):
        if a[i] != b[i]:
            return i
    return n


def left_pad(rows: Sequence[Sequence[int]], pad: int, device: Any) -> tuple[torch.Tensor, ...]:
    """(ids [B, S], mask [B, S]) with rows right-aligned.

    Example:
        >>> [t.tolist() for t in left_pad([[1, 2], [3]], 0, "cpu")]
        [[[1, 2], [0, 3]], [[1, 1], [0, 1]]]
    """
    width = max(len(r) for r in rows)
    ids = torch.full((len(rows), width), pad, dtype=torch.long)
    mask = torch.zeros((len(rows), width), dtype=torch.long)
    for i, row in enumerate(rows):
        if row:
            ids[i, width - len(row) :] = torch.tensor(row)
            mask[i, width - len(row) :] = 1
    return ids.to(device), mask.to(device)


__all__ = [
    "FROZEN_TRUNK",
    "TrunkStates",
    "base_model",
    "cache_kwargs",
    "common_prefix",
    "decoder_layers",
    "deterministic",
    "first_trained_layer",
    "left_pad",
]
