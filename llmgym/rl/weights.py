"""LoRA and the reference policy of a trainer: the adapter put on the model, the reference
(the adapter switched off, or a frozen copy after a full fine-tune, with the action head frozen
at the last refresh), its memoised log-probs, and refreshing it (REINFORCE's
``ref_refresh_every``: merge the adapter into the base weights and start a fresh one).

Example:
    >>> default_lora_targets("tiny")
    ['q_proj', 'v_proj']
    >>> from types import SimpleNamespace
    >>> sample_key(SimpleNamespace(prompt_ids=[1, 2], completion_ids=[3], action_index=0))
    ((1, 2), (3,), 0)
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any


class LoraAndReference:
    """Mixed into ``Trainer`` (it reads ``config``, ``model``, ``policy``, ``recompute``)."""

    def _lora_config(self, model: Any) -> Any:
        from peft import LoraConfig

        targets = self.config.lora.target_modules
        if targets is None:
            targets = default_lora_targets(self.config.policy.model)
        layers: dict[str, Any] = {}
        n_layers = getattr(getattr(model, "config", None), "num_hidden_layers", None)
        if self.config.lora.layers and n_layers and self.config.lora.layers < n_layers:
            first = n_layers - self.config.lora.layers
            layers = {
                "layers_to_transform": list(range(first, n_layers)),
                "layers_pattern": "layers",
            }
        return LoraConfig(
            r=self.config.lora.r,
            lora_alpha=self.config.lora.alpha,
            lora_dropout=self.config.lora.dropout,
            target_modules=list(targets) if not isinstance(targets, str) else targets,
            task_type="CAUSAL_LM",
            **layers,
        )

    def _prepare_model(self, model: Any) -> Any:
        if not self.config.optim.train_backbone:
            self._ref_model = None
            return model.requires_grad_(False).eval()
        if not self.config.lora.enabled:
            self._ref_model = None
            model.train()
            return model
        from peft import get_peft_model

        model = get_peft_model(model, self._lora_config(model))
        model.train()
        return model

    @contextmanager
    def reference(self) -> Iterator[None]:
        """Run the policy as the reference: the adapter switched off (LoRA) or the frozen copy
        (full fine-tune), and no action head (or the one frozen by :meth:`refresh_reference`)."""
        live_head = self.policy.head
        self.policy.head = self._ref_head
        try:
            with self._reference_backbone():
                yield
        finally:
            self.policy.head = live_head

    @contextmanager
    def _reference_backbone(self) -> Iterator[None]:
        if not self.config.optim.train_backbone:
            yield
            return
        if self.config.lora.enabled:
            with self.model.disable_adapter():
                yield
            return
        if getattr(self, "_ref_model", None) is None:
            import copy

            self._ref_model = copy.deepcopy(self.model).eval().requires_grad_(False)
        live = self.policy.model
        self.policy.model = self._ref_model
        try:
            yield
        finally:
            self.policy.model = live

    def reference_logprobs(self, samples: Sequence[Any]) -> Any:
        """log pi_ref(taken | prompt) per sample; memoised per (prompt, completion) in score mode
        with a Markov prompt (the reference only changes on a refresh)."""
        torch = self.torch
        keys = [sample_key(s) for s in samples]
        missing = [i for i, k in enumerate(keys) if k not in self._ref_cache]
        with self.reference():
            outs = self.recompute([samples[i] for i in missing])
        logprobs = [lp for out in outs for lp in out.logprob.tolist()]
        for i, lp in zip(missing, logprobs, strict=True):
            self._ref_cache[keys[i]] = lp
        values = torch.tensor([self._ref_cache[k] for k in keys], dtype=torch.float32)
        if self.config.policy.mode != "score" or self.config.policy.history:
            self._ref_cache.clear()  # prompts rarely repeat: keep memory flat
        return values.to(self.device)

    def refresh_reference(self) -> None:
        """Make the current policy the new reference: merge the adapter into the base weights
        and start a fresh adapter (the merged deltas are kept so a resume can replay them)."""
        self._ref_cache.clear()
        if self.policy.head is not None:
            import copy

            self._ref_head = copy.deepcopy(self.policy.head).requires_grad_(False)
        if not self.config.optim.train_backbone:
            return
        if not self.config.lora.enabled:
            self._ref_model = None
            return
        from peft import get_peft_model, get_peft_model_state_dict

        state = {
            k: v.detach().cpu().clone() for k, v in get_peft_model_state_dict(self.model).items()
        }
        self.merged_adapters.append(state)
        base = self.model.merge_and_unload()
        self.model = get_peft_model(base, self._lora_config(base))
        self.model.train()
        self.policy.model = self.model
        if hasattr(self.policy, "clear_cache"):
            self.policy.clear_cache()
        self.optimizer = self._make_optimizer()


def default_lora_targets(name: str) -> Any:
    if name == "tiny":
        return ["q_proj", "v_proj"]
    from llmgym.policy.models import get_model_defaults

    return get_model_defaults(name).lora_target_modules


def sample_key(sample: Any) -> tuple:
    """Hashable identity of (prompt, taken action) of a sample."""
    completion = getattr(sample, "completion_ids", None)
    index = getattr(sample, "action_index", None)
    return (
        tuple(as_list(sample.prompt_ids)),
        tuple(as_list(completion)) if completion is not None else (),
        index,
    )


def as_list(x: Any) -> list:
    """A list of a tensor, array, sequence or scalar (None: empty)."""
    if x is None:
        return []
    if hasattr(x, "tolist"):
        x = x.tolist()
    return list(x) if isinstance(x, (list, tuple)) else [x]


__all__ = ["LoraAndReference", "as_list", "default_lora_targets", "sample_key"]
