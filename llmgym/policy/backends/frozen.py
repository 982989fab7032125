"""The frozen trunk at work (see ``trunk.py``): :class:`FrozenTrunk` decides whether the
fast path applies to a backend's model, computes and keeps the trunk's states of new
sequences (one forward through the trunk only, after a shared prefix whose trunk KV cache it
keeps), and runs the model's own forward with the trunk stubbed out.

Example:
    >>> from llmgym.policy.backends.hf import TransformersBackend
    >>> from llmgym.policy.testing import tiny_model
    >>> model, tokenizer = tiny_model()
    >>> backend = TransformersBackend(model, tokenizer.pad_token_id, "cpu")
    >>> backend.trunk.active([5, 6, 7])  # every layer trains: no trunk
    False
"""

from __future__ import annotations

import warnings
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import torch
from transformers import DynamicCache

from llmgym.policy.backends import trunk
from llmgym.policy.backends.trunk import (
    MEMO_ROWS,
    MIN_SHARED_PREFIX,
    STEM_SLACK,
    STEMS_KEPT,
    TrunkStates,
    base_model,
    cache_kwargs,
    common_prefix,
    decoder_layers,
    deterministic,
    first_trained_layer,
    left_pad,
)

try:  # transformers >= 5: cache layers that hold nothing (here: the trunk's, or the top's)
    from transformers.cache_utils import DummyLayer
except ImportError:  # pragma: no cover - older transformers: the plain path only
    DummyLayer = None


class _Stop(Exception):
    """Ends a forward pass once the trunk's output is captured."""


class FrozenTrunk:
    """The fast path of a :class:`~llmgym.policy.backends.hf.TransformersBackend` (see the
    module docstring): the trunk's states, the top layers' shared-prefix KV cache and the
    stubbed forwards."""

    def __init__(self, backend: Any) -> None:
        self.backend = backend
        self.store = TrunkStates(trunk.TRUNK_STATES_MB)
        self.first = 0  # the first layer that trains (the trunk is the layers below)
        self.blocks: Any = None
        self._identity: tuple | None = None  # what the kept states were computed under
        self._checked: dict[tuple, bool] = {}  # probe results by (model, first layer)
        self._stems: OrderedDict[tuple, list] = OrderedDict()
        self._top_prefix: tuple[list[int], list, Any] = ([], [], None)
        self._memo: dict[tuple, Any] = {}
        self._memo_key: Any = None

    def forget(self) -> None:
        """Drop every kept state (the trunk's, the stems, the top layers' prefix, the memo):
        what follows is computed as after a fresh start."""
        self._drop_trunk_states()
        self._memo.clear()
        self._memo_key = None

    def _drop_trunk_states(self) -> None:
        """Drop the states computed under the trunk: the trunk's, the stems, the top layers'
        prefix (the memo's rows stay, guarded by their weights key)."""
        self.store.clear()
        self._stems.clear()
        self._top_prefix = ([], [], None)

    # ---- whether it applies ------------------------------------------------------------------

    def active(self, probe_ids: Sequence[int]) -> bool:
        """Whether the fast path runs for the backend's model as it is now (first call per
        model and trunk: a probe on ``probe_ids`` against the plain forward)."""
        found = self._trunk_now()
        if found is None:
            return False
        identity, blocks = found
        first = identity[2]
        if not deterministic(self.backend.model, blocks[:first]):
            return False
        if identity != self._identity:  # another model or trunk: the kept states are void
            self._drop_trunk_states()
            self._identity, self.blocks, self.first = identity, blocks, first
        key = identity[:3]
        if key not in self._checked:
            self._checked[key] = self._probe(list(probe_ids)[:16])
        return self._checked[key]

    def _trunk_now(self) -> tuple[tuple, Any] | None:
        """(what kept states are computed under: the model, its layers, the first layer that
        trains, the trunk's parameters and their versions; the decoder layers), or None where
        the model has no trunk."""
        model = self.backend.model
        blocks = decoder_layers(model) if trunk.FROZEN_TRUNK and DummyLayer is not None else None
        if blocks is None:
            return None
        first = first_trained_layer(model, blocks)
        if not 0 < first < len(blocks):
            return None
        params = [p for b in blocks[:first] for p in b.parameters()]
        params += list(base_model(model).get_input_embeddings().parameters())
        versions = sum(p._version for p in params)
        return (id(model), id(blocks), first, tuple(map(id, params)), versions), blocks

    def kept_state(self, portable: Any) -> dict[str, Any] | None:
        """Every kept state, for a checkpoint (None where none is kept): the trunk's states,
        the stems, and the top layers' prefix and memoised rows where ``portable(key)`` says
        their weights are the current ones (else they would be dropped at their next use)."""
        if self._identity is None:
            return None
        ids, kv, key = self._top_prefix
        top_key, memo_key = portable(key), portable(self._memo_key)
        return {
            "first": self.first,
            "store": self.store.state(),
            "stems": list(self._stems.items()),
            "top_prefix": (ids, kv, top_key) if top_key is not None else None,
            "memo": (list(self._memo.items()), memo_key) if memo_key is not None else None,
        }

    def load_kept_state(self, state: dict[str, Any] | None, local: Any) -> None:
        """Restore :meth:`kept_state`'s ``state`` for the model as it is now (``local(key)``
        turns a saved weights key into this process's); nothing where the trunk differs."""
        self.forget()
        found = self._trunk_now()
        if state is None or found is None or found[0][2] != state["first"]:
            return
        (self._identity, self.blocks), self.first = found, state["first"]
        self.store.load_state(state["store"])
        self._stems.update(state["stems"])
        if state["top_prefix"] is not None:
            ids, kv, key = state["top_prefix"]
            self._top_prefix = (ids, kv, local(key))
        if state["memo"] is not None:
            rows, key = state["memo"]
            self._memo, self._memo_key = dict(rows), local(key)

    def _probe(self, ids: list[int]) -> bool:
        """Whether the stubbed forward gives the plain forward's logits on ``ids``."""
        model, base = self.backend.model, base_model(self.backend.model)
        training = model.training
        try:
            model.train(False)
            with torch.no_grad():
                row = torch.tensor([ids], device=self.backend.device)
                want = model(input_ids=row).logits.float()
                states = self._trunk(row, None, None, self._cache([], 1, True), ())[0]
                kwargs = dict(input_ids=row, position_ids=torch.arange(len(ids))[None])
                with self._stubbed(states):
                    empty = self._cache([], 1, False)
                    got = model(**kwargs, **cache_kwargs(model, empty)).logits
                    empty = self._cache([], 1, False)
                    top = base.model(**kwargs, **cache_kwargs(base.model, empty))
                got_final = base.get_output_embeddings()(top.last_hidden_state)
            tol = (1e-3 if want.dtype == torch.float32 else 5e-2) * max(1.0, want.abs().max())
            ok = all(float((g.float() - want).abs().max()) <= tol for g in (got, got_final))
        except Exception as error:  # noqa: BLE001 - any failure means: run the plain path
            ok, why = False, f"{type(error).__name__}: {error}"
        else:
            why = "its logits differ from the plain forward's"
        finally:
            model.train(training)
        if not ok:
            message = f"The frozen-trunk fast path is off for this model ({why})."
            warnings.warn(message, stacklevel=3)
        return ok

    def memo(self, weights_key: Any) -> dict[tuple, Any]:
        """Rows scored without gradient under the weights ``weights_key`` names (emptied when
        they change, and beyond ``MEMO_ROWS`` rows)."""
        if weights_key != self._memo_key or len(self._memo) > MEMO_ROWS:
            self._memo, self._memo_key = {}, weights_key
        return self._memo

    # ---- the trunk ---------------------------------------------------------------------------

    def ensure(self, rows: Sequence[list[int]], candidates=None, extras=()) -> None:
        """Compute and keep the trunk states of each row (and of each of its candidates after
        it, and ``extras``: hidden states at its last token) that are not kept yet."""
        self.store.pinned.clear()
        todo, seen = [], set()
        for i, row in enumerate(rows):
            key = tuple(row)
            if key in seen:
                continue
            seen.add(key)
            entry = self.store.entry(key)
            ok = entry is not None and all(j in entry.extras for j in extras)
            if ok and candidates is not None:
                tails = [key + tuple(c[:-1]) for c in candidates[i] if len(c) > 1]
                ok = all(self.store.entry(t) is not None for t in tails)
            if not ok:
                todo.append(i)
        if todo:
            with torch.no_grad():
                cands = [candidates[i] for i in todo] if candidates is not None else None
                self._compute([list(rows[i]) for i in todo], cands, tuple(extras))

    def _compute(self, rows: list[list[int]], candidates, extras: tuple[int, ...]) -> None:
        backend = self.backend
        stem, kv = self._stem(rows)
        ids, mask = left_pad([r[stem:] for r in rows], backend.pad_token_id, backend.device)
        if stem:
            ones = torch.ones((len(rows), stem), dtype=torch.long, device=backend.device)
            mask = torch.cat([ones, mask], dim=1)
        positions = (mask.cumsum(-1) - 1).clamp(min=0)[:, stem:]
        cache = self._cache(kv, len(rows), True)
        states, last = self._trunk(ids, mask, positions, cache, extras)
        backend.stats["prompt_tokens"] += int(mask[:, stem:].sum())
        stem_key = tuple(rows[0][:stem]) if stem else None
        width = ids.shape[1]
        for b, row in enumerate(rows):
            rest = states[b, width - (len(row) - stem) :].clone()
            self.store.put(tuple(row), stem_key, stem, rest, {j: last[j][b] for j in extras})
        if candidates is None:
            return
        pairs = list({(b, tuple(c[:-1])) for b, cs in enumerate(candidates) for c in cs if c[1:]})
        if not pairs:
            return
        index = torch.tensor([b for b, _ in pairs], device=backend.device)
        cache.batch_select_indices(index)
        size = max(len(t) for _, t in pairs)
        cand_ids = torch.full((len(pairs), size), backend.pad_token_id, dtype=torch.long)
        cand_mask = torch.zeros((len(pairs), size), dtype=torch.long)
        for r, (_, tail) in enumerate(pairs):
            cand_ids[r, : len(tail)] = torch.tensor(tail)
            cand_mask[r, : len(tail)] = 1
        full_mask = torch.cat([mask[index], cand_mask.to(backend.device)], dim=1)
        positions = mask[index].sum(-1, keepdim=True) + torch.arange(size, device=backend.device)
        tails, _ = self._trunk(cand_ids.to(backend.device), full_mask, positions, cache, ())
        backend.stats["prompt_tokens"] += int(cand_mask.sum())
        for r, (b, tail) in enumerate(pairs):
            key = tuple(rows[b])
            self.store.put(key + tail, key, len(rows[b]), tails[r, : len(tail)].clone())

    def _stem(self, rows: list[list[int]]) -> tuple[int, list]:
        """The shared prefix ``rows`` are computed after and its trunk KV cache: a kept one,
        or their own (computed, from the longest kept one it extends); (0, []) for none."""
        length = min(len(r) for r in rows) - 1
        for r in rows[1:]:
            length = common_prefix(rows[0][:length], r)
        kept = [s for s in self._stems if len(s) <= length and tuple(rows[0][: len(s)]) == s]
        best = max(kept, key=len, default=None)
        if best is not None and (len(rows) == 1 or len(best) >= length - STEM_SLACK):
            self._stems.move_to_end(best)
            if self.store.entry(best) is not None:
                return len(best), self._stems[best]
        if length < MIN_SHARED_PREFIX or len(rows) == 1:
            return 0, []
        start = len(best) if best is not None and self.store.entry(best) is not None else 0
        kv = self._stems[best] if start else []
        device = self.backend.device
        ids = torch.tensor([rows[0][start:length]], device=device)
        mask = torch.ones((1, length), dtype=torch.long, device=device)
        positions = torch.arange(start, length, device=device)[None]
        cache = self._cache(kv, 1, True)
        states, _ = self._trunk(ids, mask, positions, cache, ())
        self.backend.stats["prompt_tokens"] += length - start
        key = tuple(rows[0][:length])
        self.store.put(key, best if start else None, start, states[0].clone())
        self._stems[key] = [(layer.keys, layer.values) for layer in cache.layers[: self.first]]
        while len(self._stems) > STEMS_KEPT:
            self._stems.popitem(last=False)
        return length, self._stems[key]

    def _trunk(self, ids, mask, positions, cache, extras) -> tuple[torch.Tensor, dict]:
        """One forward through the trunk only: (the states entering the first trained layer
        [B, S, H], the hidden states ``extras`` at the last position, each [B, H])."""
        captured: dict[int, torch.Tensor] = {}

        def capture(index: int) -> Any:
            def hook(module: Any, args: tuple, kwargs: dict) -> None:
                state = args[0] if args else kwargs["hidden_states"]
                if index == self.first:
                    captured[-1] = state
                    raise _Stop
                captured[index] = state[:, -1].clone()

            return hook

        wanted = sorted({j for j in extras if j < self.first} | {self.first})
        hooks = [
            self.blocks[j].register_forward_pre_hook(capture(j), with_kwargs=True) for j in wanted
        ]
        try:
            self.backend.model(
                input_ids=ids,
                attention_mask=mask,
                position_ids=positions,
                **cache_kwargs(self.backend.model, cache),
                use_cache=True,
                logits_to_keep=1,
            )
        except _Stop:
            pass
        finally:
            for hook in hooks:
                hook.remove()
        states = captured.pop(-1)
        if self.first in extras:
            captured[self.first] = states[:, -1].clone()
        return states, captured

    @contextmanager
    def capturing(self, on: bool) -> Iterator[list[torch.Tensor]]:
        """The states entering the first trained layer in each forward while inside (a list
        filled in order; nothing captured when ``on`` is false)."""
        captured: list[torch.Tensor] = []
        if not on:
            yield captured
            return

        def hook(module: Any, args: tuple, kwargs: dict) -> None:
            captured.append(args[0] if args else kwargs["hidden_states"])

        handle = self.blocks[self.first].register_forward_pre_hook(hook, with_kwargs=True)
        try:
            yield captured
        finally:
            handle.remove()

    def keep_generated(self, prompts, prefix, suffix, steps, tokens, stop_ids) -> None:
        """Keep the trunk states generation computed: of each prompt after the ``prefix``
        tokens they share (``suffix`` [B, S, H], left-padded) and of each completion token fed
        back (``steps``: [B, 1, H] per decode step), under the key of prompt + completion but
        its last token (the rows an update scores)."""
        stem = None
        if prefix:
            stem = tuple(prompts[0][:prefix])
            self.ensure([list(stem)])
        decode = torch.cat(steps, 1) if steps else suffix[:, :0]
        stops, width = set(stop_ids), suffix.shape[1]
        for b, (prompt, row) in enumerate(zip(prompts, tokens)):
            end = next((j + 1 for j, t in enumerate(row) if t in stops), len(row))
            rest = suffix[b, width - (len(prompt) - prefix) :]
            states = torch.cat([rest, decode[b, : end - 1]]).clone()
            self.store.put(tuple(prompt) + tuple(row[: end - 1]), stem, prefix, states)

    # ---- the top layers ----------------------------------------------------------------------

    def _cache(self, kv: list, batch: int, trunk: bool) -> DynamicCache:
        """A KV cache for a trunk pass (``trunk``: ``kv`` are the trunk layers', the top layers
        hold nothing) or a top pass (``kv`` are the top layers', the trunk layers hold
        nothing), each given layer expanded to ``batch`` rows."""
        data = [(k.expand(batch, -1, -1, -1), v.expand(batch, -1, -1, -1)) for k, v in kv]
        if data and not trunk:
            data = [(None, None)] * self.first + data
        cache = DynamicCache(ddp_cache_data=data or None, config=self.backend.model.config)
        empty = range(self.first, len(cache.layers)) if trunk else range(self.first)
        for i in empty:
            cache.layers[i] = DummyLayer()
        return cache

    @contextmanager
    def _stubbed(self, states: torch.Tensor) -> Iterator[None]:
        """The model's forward with the trunk skipped: its last layer returns ``states``, the
        ones below it their input."""

        def passthrough(hidden_states: Any, *args: Any, **kwargs: Any) -> Any:
            return hidden_states

        def inject(hidden_states: Any, *args: Any, **kwargs: Any) -> Any:
            return states

        blocks = self.blocks[: self.first]
        try:
            for i, block in enumerate(blocks):
                block.forward = inject if i == self.first - 1 else passthrough
            yield
        finally:
            for block in blocks:
                block.__dict__.pop("forward", None)

    def top_kv(self, row: list[int], length: int, kept: int = 0, kv: list | None = None) -> list:
        """The top layers' KV cache of ``row[:length]`` (extending ``kv``, that of its first
        ``kept`` tokens), with gradients where enabled."""
        device = self.backend.device
        cache = self._cache(kv or [], 1, False)
        ids = torch.tensor([row[kept:length]], device=device)
        mask = torch.ones((1, length), dtype=torch.long, device=device)
        with self._stubbed(self.store.states(tuple(row), kept, length)[None]):
            decoder = base_model(self.backend.model).model
            decoder(
                input_ids=ids,
                attention_mask=mask,
                position_ids=torch.arange(kept, length, device=device)[None],
                **cache_kwargs(decoder, cache),
                use_cache=True,
            )
        return [(layer.keys, layer.values) for layer in cache.layers[self.first :]]

    def shared_top_kv(self, prompts: list[list[int]], length: int) -> list:
        """The top layers' KV cache of the prefix ``prompts`` share, without gradient, kept
        while the weights stay the same (the plain path's ``shared=True``)."""
        key = self.backend.weights_key()
        ids, kv, old_key = self._top_prefix
        if key != old_key:
            ids, kv = [], []
        kept = common_prefix(ids, prompts[0][:length])
        kv = [(k[:, :, :kept], v[:, :, :kept]) for k, v in kv] if kept else []
        if length > kept:
            with torch.no_grad():
                kv = self.top_kv(prompts[0], length, kept, kv)
            self.backend.stats["trunk_cached_tokens"] += length - kept
        self._top_prefix = (list(prompts[0][:length]), kv, key)
        return kv

    def run_top(
        self, states: torch.Tensor, lm: bool = True, kv_cache: Any = None, **kwargs: Any
    ) -> Any:
        """The model's forward (``lm``: the causal LM, else its decoder alone) over
        ``kwargs`` with the trunk's output given: ``states`` [B, S, H]; ``kv_cache`` (if any)
        under the keyword that forward takes it by."""
        model = self.backend.model if lm else base_model(self.backend.model).model
        if kv_cache is not None:
            kwargs.update(cache_kwargs(model, kv_cache))
        with self._stubbed(states):
            return model(**kwargs)

    def output_embeddings(self) -> Any:
        """The causal LM's output layer (hidden states -> logits)."""
        return base_model(self.backend.model).get_output_embeddings()

    def padded_states(self, keys: list[tuple], starts: list[int], left: bool) -> torch.Tensor:
        """The kept states of each ``keys[i]`` from ``starts[i]`` on, padded with zeros into
        one batch [B, S, H] (left or right)."""
        parts = [self.store.states(k, s, len(k)) for k, s in zip(keys, starts)]
        width = max(len(p) for p in parts)
        out = parts[0].new_zeros((len(parts), width, parts[0].shape[-1]))
        for b, part in enumerate(parts):
            if len(part):
                (out[b, width - len(part) :] if left else out[b, : len(part)]).copy_(part)
        return out


__all__ = ["FrozenTrunk"]
