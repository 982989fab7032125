"""The default backend: a transformers causal LM (plain, or a peft ``PeftModel``) in this
process.

Every batch is left-padded into one forward pass. The prompt prefix that a batch shares (the
system prompt) is encoded once, without gradient, and its KV cache kept across calls until the
weights change (a parameter modified in place, adapters switched, train/eval mode); candidates
are scored in one more pass that reuses the prompts' KV cache. ``hidden_states`` skips the
candidates and stops the forward after the deepest layer asked for. Where LoRA trains only the
top layers, scoring and completion log-probs run those layers alone over the kept output of the
frozen ones (``trunk.py``, ``frozen.py``, ``fast.py``).

Example:
    >>> import torch
    >>> from llmgym.policy.testing import tiny_model
    >>> model, tokenizer = tiny_model()
    >>> backend = TransformersBackend(model, tokenizer.pad_token_id, "cpu")
    >>> hidden, logprobs = backend.score([[5, 6, 7]], [[[8], [9, 10]]], hidden=True, shared=False)
    >>> tuple(hidden.shape), [len(t) for t in logprobs[0]]
    ((1, 64), [1, 2])
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch
from transformers import DynamicCache

from llmgym.policy.backends import Sampling, fast
from llmgym.policy.backends.frozen import FrozenTrunk
from llmgym.policy.backends.trunk import (
    MIN_SHARED_PREFIX,
    cache_kwargs,
    common_prefix,
    decoder_layers,
    left_pad,
)
from llmgym.policy.backends.weights_key import WeightsWalk, weights_key_walked

STATS = (
    "prompt_tokens",
    "cached_tokens",
    "generated_tokens",
    "decode_tokens",
    "trunk_cached_tokens",
)


class TransformersBackend:
    """Runs ``model`` on ``device``; ``prefix_cache`` keeps the shared prompt prefix's KV.
    ``on_new_weights`` (if set) is called when the weights are seen to have changed."""

    def __init__(self, model: Any, pad_token_id: int, device: Any, prefix_cache: bool = True):
        self.model = model
        self.pad_token_id = pad_token_id
        self.device = torch.device(device)
        self.prefix_cache = prefix_cache
        self.on_new_weights: Callable[[], None] | None = None
        self._prefix_ids: list[int] = []
        self._prefix_kv: list[tuple[torch.Tensor, torch.Tensor]] = []
        self._prefix_key: tuple[Any, ...] | None = None
        self._seen_key: tuple[Any, ...] | None = None
        #: The model's parameters and adapter layers, listed once (``weights_key``).
        self._walk = WeightsWalk()
        #: The frozen-trunk fast path (used where it applies, see ``trunk.py``).
        self.trunk = FrozenTrunk(self)
        #: Prompt tokens run through the model, prompt tokens served from the prefix cache,
        #: generated tokens kept, decode positions computed (batch x steps), tokens run
        #: through the top layers alone over kept trunk states.
        self.stats = dict.fromkeys(STATS, 0)

    # ---- the interface -------------------------------------------------------------------

    def score(
        self,
        prompts: Sequence[list[int]],
        candidates: Sequence[list[list[int]]],
        *,
        hidden: bool,
        shared: bool,
        layers: Sequence[int] = (-1,),
    ) -> tuple[torch.Tensor | None, list[list[torch.Tensor]]]:
        prompts = list(prompts)
        if self._fast(prompts):
            wanted = tuple(layers) if hidden else None
            return fast.score(self, prompts, list(candidates), layers=wanted, shared=shared)
        if shared:
            with torch.no_grad():  # the prefix's KV as constants under the current weights
                self._shared_prefix(prompts)
        last_logits, cache, mask, last_hidden = self._encode_prompts(
            prompts, shared=shared, layers=tuple(layers) if hidden else ()
        )
        return last_hidden, self._candidate_logprobs(last_logits, cache, mask, list(candidates))

    def hidden_states(
        self, prompts: Sequence[list[int]], *, shared: bool, layers: Sequence[int] = (-1,)
    ) -> torch.Tensor:
        """``score``'s hidden states without the candidates: the model runs only as deep as
        ``layers`` need (``layers=(4,)``: the first 4 decoder layers), where its decoder layers
        can be found (else the whole model)."""
        prompts = list(prompts)
        if self._fast(prompts):
            return fast.score(self, prompts, None, layers=tuple(layers), shared=shared)[0]
        if shared:
            with torch.no_grad():  # the prefix's KV as in score, by the whole model
                self._shared_prefix(prompts)
        blocks = decoder_layers(self.model)
        deepest = stop_before(len(blocks), layers) if blocks is not None else None
        if deepest is None:
            return self._encode_prompts(prompts, shared=shared, layers=tuple(layers))[3]
        depth = len(blocks)
        wanted = {i % (depth + 1) for i in layers}
        captured: dict[int, torch.Tensor] = {}

        def capture(index: int) -> Callable[..., None]:
            def hook(module: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
                state = args[0] if args else kwargs["hidden_states"]  # the input of layer index
                captured[index] = state[:, -1]
                if index == deepest:
                    raise _DeepEnough

            return hook

        hooks = [blocks[i].register_forward_pre_hook(capture(i), with_kwargs=True) for i in wanted]
        try:
            self._encode_prompts(prompts, shared=shared)
        except _DeepEnough:
            pass
        finally:
            for hook in hooks:
                hook.remove()
        return torch.cat([captured[i % (depth + 1)] for i in layers], -1)

    def generate(
        self, prompts: Sequence[list[int]], max_new: int, stop_ids: list[int], sampling: Sampling
    ) -> tuple[list[list[int]], list[list[float]]]:
        """Sample with the KV cache until every row has produced a stop token (rows padded
        after their stop)."""
        prompts = list(prompts)
        keep = self._fast(prompts)  # the trunk's states of what it runs are kept for updates
        with self.trunk.capturing(keep) as captured:
            logits, cache, mask, _ = self._encode_prompts(prompts, shared=True)
            suffix = captured.pop() if keep else None
            captured.clear()
            tokens = self._sample(prompts, logits, cache, mask, max_new, stop_ids, sampling)
        if keep:
            prefix = mask.shape[1] - suffix.shape[1]
            self.trunk.keep_generated(prompts, prefix, suffix, captured, tokens[0], stop_ids)
        return tokens

    def _sample(self, prompts, logits, cache, mask, max_new, stop_ids, sampling):
        """The decode loop of ``generate`` from the prompts' last logits and KV cache."""
        positions = mask.sum(-1)
        stop = torch.tensor(stop_ids, device=self.device)
        done = torch.zeros(len(prompts), dtype=torch.bool, device=self.device)
        tokens, logps = [], []
        for step in range(max_new):
            tok, logp = sampling.next_tokens(logits)
            tok = tok.masked_fill(done, self.pad_token_id)
            tokens.append(tok)
            logps.append(logp)
            done |= torch.isin(tok, stop)
            self.stats["decode_tokens"] += len(prompts)
            if bool(done.all()) or step == max_new - 1:
                break
            mask = torch.cat([mask, torch.ones_like(mask[:, :1])], dim=1)
            logits = (
                self.model(
                    input_ids=tok[:, None],
                    attention_mask=mask,
                    position_ids=positions[:, None] + step,
                    **cache_kwargs(self.model, cache),
                    use_cache=True,
                )
                .logits[:, -1]
                .float()
            )
        return torch.stack(tokens, 1).tolist(), torch.stack(logps, 1).tolist()

    def completion_logprobs(
        self,
        prompts: Sequence[list[int]],
        completions: Sequence[list[int]],
        temperature: float,
        *,
        shared: bool = False,
    ) -> tuple[list[torch.Tensor], torch.Tensor, torch.Tensor]:
        if all(completions) and self._fast(prompts):
            return fast.completion_logprobs(self, prompts, completions, temperature)
        prefix = 0
        if shared:  # the prefix's KV as constants under the current weights
            with torch.no_grad():
                prefix = self._shared_prefix(list(prompts))
        rows = [list(p[prefix:]) + list(c) for p, c in zip(prompts, completions)]
        ids, mask = left_pad(rows, self.pad_token_id, self.device)
        if prefix:
            ones = torch.ones((len(rows), prefix), dtype=torch.long, device=self.device)
            mask = torch.cat([ones, mask], dim=1)
        positions = (mask.cumsum(-1) - 1).clamp(min=0)[:, prefix:]
        keep = max(len(c) for c in completions) + 1
        cache = {}
        if prefix:
            cache = cache_kwargs(self.model, self._cache(self._prefix_kv, len(rows)))
        out = self.model(
            input_ids=ids,
            attention_mask=mask,
            position_ids=positions,
            logits_to_keep=keep,
            output_hidden_states=True,
            **cache,
        )
        logp = torch.log_softmax(out.logits.float() / temperature, dim=-1)
        width = ids.shape[1]
        token_logprobs, entropy, hidden = [], [], []
        for b, completion in enumerate(completions):
            n = len(completion)
            # kept logits cover positions width-keep .. width-1; position width-n-1 predicts the
            # first completion token.
            start = keep - n - 1
            step_logp = logp[b, start : start + n]
            target = torch.tensor(completion, device=self.device)
            token_logprobs.append(step_logp.gather(-1, target[:, None]).squeeze(-1))
            entropy.append(-(step_logp.exp() * step_logp).sum(-1).mean())
            hidden.append(out.hidden_states[-1][b, width - n - 1])
        return token_logprobs, torch.stack(entropy), torch.stack(hidden)

    def sync_weights(self) -> None:
        """The model is the policy's own: only the cached prefix (computed under the old
        weights) is dropped."""
        self._drop_prefix()
        self._walk.forget()  # the model's parameters and adapter layers are listed anew

    def forget_prefix(self) -> None:
        """Drop the cached prefix (its floats depend on the batch it was computed in) but not
        the weights seen: ``on_new_weights`` is not called again for the same weights."""
        self._prefix_ids, self._prefix_kv, self._prefix_key = [], [], None

    def note_weights(self) -> None:
        """Take the current weights as seen now (``on_new_weights`` runs if they are new), so
        that the next call does not take them for new ones."""
        self._note_weights()

    def kept_state(self) -> dict[str, Any]:
        """The states kept across calls, for a checkpoint (:meth:`load_kept_state`): the
        weights last seen, the cached prefix and the frozen trunk's states. A weights key is
        saved without its version count, and only where it names the current weights: any
        other would make its cache be dropped at the next call."""
        now = self.weights_key()

        def portable(key: tuple[Any, ...] | None) -> tuple[Any, ...] | None:
            return key[1:] if key is not None and key[0] == now[0] else None

        prefix_key = portable(self._prefix_key)
        return {
            "seen": portable(self._seen_key),
            "prefix": None
            if prefix_key is None
            else (self._prefix_ids, self._prefix_kv, prefix_key),
            "trunk": self.trunk.kept_state(portable),
        }

    def load_kept_state(self, state: dict[str, Any]) -> None:
        """Restore :meth:`kept_state`'s ``state`` for the weights as they are now, so that
        what follows computes the same floats as the process that saved it."""
        count = self.weights_key()[0]

        def local(rest: tuple[Any, ...] | None) -> tuple[Any, ...] | None:
            return (count, *rest) if rest is not None else None

        self._seen_key = local(state["seen"])
        if state["prefix"] is None:
            self.forget_prefix()
        else:
            ids, kv, key = state["prefix"]
            self._prefix_ids, self._prefix_kv, self._prefix_key = ids, kv, local(key)
        self.trunk.load_kept_state(state["trunk"], local)

    def _drop_prefix(self) -> None:
        self.forget_prefix()
        self._seen_key = None

    def _fast(self, prompts: Sequence[list[int]]) -> bool:
        """Whether the frozen-trunk fast path runs (noting new weights, as the plain path's
        prefix cache does)."""
        if not prompts or not self.trunk.active(prompts[0]):
            return False
        self._note_weights()
        return True

    @property
    def weights_seen(self) -> tuple[Any, ...] | None:
        """The weights key as last noted (by the call under way)."""
        return self._seen_key

    def _note_weights(self) -> tuple[Any, ...]:
        """The weights key; when it changed since last seen, the cached prefix is dropped and
        ``on_new_weights`` called."""
        key = self.weights_key()
        if key != self._seen_key:
            self._drop_prefix()
            self._seen_key = key
            if self.on_new_weights is not None:
                self.on_new_weights()
        return key

    # ---- the prefix cache and the forward passes -------------------------------------------

    def weights_key(self) -> tuple[Any, ...]:
        """Changes whenever a parameter is modified in place (an optimizer step, a checkpoint
        loaded, an average swapped in), adapters are toggled or switched, or the train/eval
        mode changes. The model's parameters and adapter layers are listed by one walk over
        its modules, kept until a module or parameter is registered anywhere (an adapter added,
        a weight replaced), ``sync_weights`` or another model: the key then costs a sum over
        the parameters' version counters, not a walk (``weights_key.py``, issue 51)."""
        return self._walk.key(self.model)

    def _shared_prefix(self, prompts: list[list[int]]) -> int:
        """Encode (or reuse) the KV cache of the prefix all ``prompts`` share; its length."""
        if not self.prefix_cache:
            return 0
        length = min(len(p) for p in prompts) - 1
        for p in prompts[1:]:
            length = common_prefix(prompts[0][:length], p)
        key = self._note_weights()
        kept = common_prefix(self._prefix_ids, prompts[0][:length])
        if length < MIN_SHARED_PREFIX:
            return 0
        kv = [(k[:, :, :kept], v[:, :, :kept]) for k, v in self._prefix_kv] if kept else []
        if length > kept:
            ids = torch.tensor([prompts[0][kept:length]], device=self.device)
            mask = torch.ones((1, length), dtype=torch.long, device=self.device)
            positions = torch.arange(kept, length, device=self.device)[None]
            cache = self._cache(kv, 1)
            self.model(
                input_ids=ids,
                attention_mask=mask,
                position_ids=positions,
                **cache_kwargs(self.model, cache),
                use_cache=True,
                logits_to_keep=1,
            )
            kv = [(layer.keys, layer.values) for layer in cache.layers]
            self.stats["prompt_tokens"] += length - kept
        self._prefix_ids, self._prefix_kv, self._prefix_key = prompts[0][:length], kv, key
        return length

    def _cache(self, kv: list[tuple[torch.Tensor, torch.Tensor]], batch: int) -> DynamicCache:
        data = [(k.expand(batch, -1, -1, -1), v.expand(batch, -1, -1, -1)) for k, v in kv]
        return DynamicCache(ddp_cache_data=data or None, config=self.model.config)

    def _encode_prompts(
        self, prompts: list[list[int]], *, shared: bool, layers: tuple[int, ...] = ()
    ) -> tuple[torch.Tensor, DynamicCache, torch.Tensor, torch.Tensor | None]:
        """One left-padded forward over ``prompts``: (last-position logits [B, V], the KV cache,
        the attention mask [B, S], the hidden states of ``layers`` at the last prompt token,
        concatenated [B, H x layers], or None without ``layers``)."""
        prefix = self._shared_prefix(prompts) if shared else 0
        ids, mask = left_pad([p[prefix:] for p in prompts], self.pad_token_id, self.device)
        if prefix:
            ones = torch.ones((len(prompts), prefix), dtype=torch.long, device=self.device)
            mask = torch.cat([ones, mask], dim=1)
        positions = (mask.cumsum(-1) - 1).clamp(min=0)[:, prefix:]
        cache = self._cache(self._prefix_kv if prefix else [], len(prompts))
        self.stats["prompt_tokens"] += int(mask[:, prefix:].sum())
        self.stats["cached_tokens"] += prefix * len(prompts)
        out = self.model(
            input_ids=ids,
            attention_mask=mask,
            position_ids=positions,
            **cache_kwargs(self.model, cache),
            use_cache=True,
            logits_to_keep=1,
            output_hidden_states=bool(layers),
        )
        last_hidden = None
        if layers:
            last_hidden = torch.cat([out.hidden_states[i][:, -1] for i in layers], -1)
        return out.logits[:, -1].float(), cache, mask, last_hidden

    def _candidate_logprobs(
        self,
        last_logits: torch.Tensor,
        cache: DynamicCache,
        mask: torch.Tensor,
        candidates: list[list[list[int]]],
        forward: Callable[..., Any] | None = None,
        stat: str = "prompt_tokens",
    ) -> list[list[torch.Tensor]]:
        """Per env, per candidate: the log-probs of its tokens after the prompt, reusing the
        prompt's KV cache (one extra pass over all candidates' tokens but the last, by
        ``forward``, the model's by default; its tokens counted in ``stats[stat]``)."""
        first = torch.log_softmax(last_logits, dim=-1)
        rows = [(b, c) for b, cands in enumerate(candidates) for c in cands]
        width = max(len(c) for _, c in rows) - 1
        out: list[list[torch.Tensor]] = [[] for _ in candidates]
        if width == 0:
            for b, c in rows:
                out[b].append(first[b, c[:1]])
            return out
        index = torch.tensor([b for b, _ in rows], device=self.device)
        cache.batch_select_indices(index)
        ids = torch.full((len(rows), width), self.pad_token_id, dtype=torch.long)
        cand_mask = torch.zeros((len(rows), width), dtype=torch.long)
        for r, (_, c) in enumerate(rows):
            ids[r, : len(c) - 1] = torch.tensor(c[:-1])
            cand_mask[r, : len(c) - 1] = 1
        full_mask = torch.cat([mask[index], cand_mask.to(self.device)], dim=1)
        positions = mask[index].sum(-1, keepdim=True) + torch.arange(width, device=self.device)
        logits = (forward or self.model)(
            input_ids=ids.to(self.device),
            attention_mask=full_mask,
            position_ids=positions,
            **cache_kwargs(self.model, cache),
            use_cache=True,
        ).logits.float()
        logp = torch.log_softmax(logits, dim=-1)
        self.stats[stat] += int(cand_mask.sum())
        for r, (b, c) in enumerate(rows):
            rest = logp[r, torch.arange(len(c) - 1), torch.tensor(c[1:], dtype=torch.long)]
            out[b].append(torch.cat([first[b, c[:1]], rest]))
        return out


class _DeepEnough(Exception):
    """Stops a forward pass once ``hidden_states`` has what it asked for."""


def stop_before(depth: int, layers: Sequence[int]) -> int | None:
    """The decoder layer a forward that needs only the hidden states ``layers`` (indices into
    transformers' ``hidden_states`` of a ``depth``-layer model) can stop before, or None where
    it must run whole (the last, normed, state is asked for).

    Example:
        >>> stop_before(30, [4, 8]), stop_before(30, [8, -1]), stop_before(30, [-31])
        (8, None, 0)
    """
    wanted = {i % (depth + 1) for i in layers}
    return None if depth in wanted else max(wanted)


__all__ = [
    "TransformersBackend",
    "decoder_layers",
    "left_pad",
    "stop_before",
    "weights_key_walked",
]
