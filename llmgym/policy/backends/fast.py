"""The transformers backend's passes over the top layers alone (the frozen-trunk fast path,
``trunk.py``): score mode (candidates after their prompts, the action head's hidden states)
and generate mode's completion log-probs. Each returns what the plain pass in ``hf.py``
returns, within float noise, gradients included.

Example:
    >>> first_rows([(1, 2), (3,), (1, 2)])
    ([0, 1], [0, 1, 0])
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import Any

import torch

from llmgym.policy.backends.trunk import MIN_SHARED_PREFIX, common_prefix, left_pad


def first_rows(keys: Sequence[Hashable]) -> tuple[list[int], list[int]]:
    """(index of each distinct key's first row, each row's position among the distinct)."""
    seen: dict[Hashable, int] = {}
    inverse = [seen.setdefault(k, len(seen)) for k in keys]
    first = {}
    for i, j in enumerate(inverse):
        first.setdefault(j, i)
    return list(first.values()), inverse


def shared_length(rows: Sequence[Sequence[int]], cap: int) -> int:
    """The prefix all ``rows`` share, at most ``cap`` tokens; 0 when shorter than
    ``MIN_SHARED_PREFIX``."""
    length = cap
    for row in rows[1:]:
        length = common_prefix(rows[0][:length], row)
    return length if length >= MIN_SHARED_PREFIX else 0


def score(backend: Any, prompts, candidates, *, layers, shared: bool):
    """``TransformersBackend.score`` by the top layers (``candidates`` None: the hidden
    states alone, ``layers`` None: no hidden states). Without gradient, what a row gave under
    the current weights is reused (acting, then the update's old log-probs)."""
    trunk = backend.trunk
    keys = [
        (tuple(p), tuple(map(tuple, c)) if candidates is not None else ())
        for p, c in zip(prompts, candidates or prompts)
    ]
    order, inverse = first_rows(keys)
    memo = None
    if candidates is not None and not torch.is_grad_enabled():
        memo = trunk.memo(backend.weights_seen)
    tag = tuple(layers) if layers else None
    todo = [i for i in order if memo is None or (keys[i], tag) not in memo]
    hidden, logprobs = None, []
    if todo:
        rows = [list(prompts[i]) for i in todo]
        cands = [candidates[i] for i in todo] if candidates is not None else None
        hidden, logprobs = _score_rows(backend, rows, cands, layers, shared)
    if memo is None:  # todo is every distinct row
        hidden = hidden[inverse] if hidden is not None else None
        return hidden, [logprobs[j] for j in inverse] if logprobs else []
    for u, i in enumerate(todo):
        memo[keys[i], tag] = (hidden[u] if hidden is not None else None, logprobs[u])
    found = [memo[k, tag] for k in keys]
    hidden = torch.stack([h for h, _ in found]) if layers else None
    return hidden, [lp for _, lp in found]


def _score_rows(backend: Any, rows, cands, layers, shared: bool):
    """(hidden states [B, F] or None, each row's candidate log-probs) of distinct rows."""
    trunk = backend.trunk
    depth = len(trunk.blocks)
    wanted = [i % (depth + 1) for i in layers] if layers else []
    trunk.ensure(rows, cands, tuple(j for j in wanted if j < trunk.first))
    if layers and all(j <= trunk.first for j in wanted) and cands is None:
        return torch.cat([_trunk_hidden(trunk, rows, j) for j in wanted], -1), []

    # the prefix the rows share: kept without gradient (shared), or encoded here with it
    cap = min(len(r) for r in rows) - 1
    if shared:
        length = shared_length(rows, cap)
        kv = trunk.shared_top_kv(rows, length) if length else []
    else:
        length = shared_length(rows, cap) if len(rows) > 1 else 0
        kv = trunk.top_kv(rows[0], length) if length else []
    backend.stats["cached_tokens"] += length * len(rows)
    ids, mask = left_pad([r[length:] for r in rows], backend.pad_token_id, backend.device)
    if length:
        ones = torch.ones((len(rows), length), dtype=torch.long, device=backend.device)
        mask = torch.cat([ones, mask], dim=1)
    positions = (mask.cumsum(-1) - 1).clamp(min=0)[:, length:]
    states = trunk.padded_states([tuple(r) for r in rows], [length] * len(rows), left=True)
    cache = trunk._cache(kv, len(rows), False)
    out = trunk.run_top(
        states,
        lm=False,  # the last position's logits below: one [B, H] x [H, V] product
        input_ids=ids,
        attention_mask=mask,
        position_ids=positions,
        kv_cache=cache,
        use_cache=True,
        output_hidden_states=any(j > trunk.first for j in wanted),
    )
    backend.stats["trunk_cached_tokens"] += int(mask[:, length:].sum())
    hidden = None
    if layers:
        parts = []
        for j in wanted:
            if j < trunk.first:
                parts.append(_trunk_hidden(trunk, rows, j))
            else:
                parts.append(states[:, -1] if j == trunk.first else out.hidden_states[j][:, -1])
        hidden = torch.cat(parts, -1)
    if cands is None:
        return hidden, []

    def forward(**kwargs: Any) -> Any:
        tails = [tuple(r) + tuple(c[:-1]) for r, cs in zip(rows, cands) for c in cs]
        starts = [len(r) for r, cs in zip(rows, cands) for _ in cs]
        return trunk.run_top(trunk.padded_states(tails, starts, left=False), **kwargs)

    logprobs = backend._candidate_logprobs(
        trunk.output_embeddings()(out.last_hidden_state[:, -1]).float(),
        cache,
        mask,
        cands,
        forward=forward,
        stat="trunk_cached_tokens",
    )
    return hidden, logprobs


def _trunk_hidden(trunk: Any, rows: list[list[int]], j: int) -> torch.Tensor:
    """Hidden state ``j`` (at most the first trained layer's input) at each row's last token."""
    if j == trunk.first:
        return torch.stack([trunk.store.states(tuple(r), len(r) - 1, len(r))[0] for r in rows])
    return torch.stack([trunk.store.entry(tuple(r)).extras[j] for r in rows])


def completion_logprobs(backend: Any, prompts, completions, temperature: float):
    """``TransformersBackend.completion_logprobs`` by the top layers, the prompts' shared
    prefix encoded once with gradients, the logits taken at the completions' positions only."""
    trunk = backend.trunk
    order, inverse = first_rows([(tuple(p), tuple(c)) for p, c in zip(prompts, completions)])
    rows = [list(prompts[i]) + list(completions[i][:-1]) for i in order]
    sizes = [len(completions[i]) for i in order]
    trunk.ensure(rows)
    cap = min(len(prompts[i]) for i in order) - 1  # each prompt's last token after the prefix
    length = shared_length(rows, cap) if len(rows) > 1 else 0
    kv = trunk.top_kv(rows[0], length) if length else []
    ids, mask = left_pad([r[length:] for r in rows], backend.pad_token_id, backend.device)
    if length:
        ones = torch.ones((len(rows), length), dtype=torch.long, device=backend.device)
        mask = torch.cat([ones, mask], dim=1)
    positions = (mask.cumsum(-1) - 1).clamp(min=0)[:, length:]
    states = trunk.padded_states([tuple(r) for r in rows], [length] * len(rows), left=True)
    final = trunk.run_top(
        states,
        lm=False,
        input_ids=ids,
        attention_mask=mask,
        position_ids=positions,
        kv_cache=trunk._cache(kv, len(rows), False),
        use_cache=True,
    ).last_hidden_state
    # One gather for every completion position (per-row slices of the [T, V] log-probs would
    # each fill a [T, V] zero gradient in the backward pass).
    width = final.shape[1]
    rows_at = torch.tensor(
        [b * width + width - n + k for b, n in enumerate(sizes) for k in range(n)]
    )
    picked = final.reshape(-1, final.shape[-1])[rows_at.to(backend.device)]
    logp = torch.log_softmax(trunk.output_embeddings()(picked).float() / temperature, dim=-1)
    targets = torch.tensor([t for i in order for t in completions[i]], device=backend.device)
    token_logprobs = list(logp.gather(-1, targets[:, None]).squeeze(-1).split(sizes))
    entropies = (-(logp.exp() * logp).sum(-1)).split(sizes)
    entropy = torch.stack([e.mean() for e in entropies])
    starts = torch.tensor([b * width + width - n for b, n in enumerate(sizes)])
    hidden = final.reshape(-1, final.shape[-1])[starts.to(backend.device)]
    return [token_logprobs[j] for j in inverse], entropy[inverse], hidden[inverse]


__all__ = ["completion_logprobs", "first_rows", "score", "shared_length"]
