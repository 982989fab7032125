"""Which weights train and what the reference policy is, as one component a trainer owns
(:class:`Weights`): the LoRA adapter put on the model (or the whole model, or nothing), the
reference (the adapter switched off, or a frozen copy after a full fine-tune, with the action
head frozen at the last refresh), its memoised log-probs, and refreshing it (REINFORCE's
``ref_refresh_every``: merge the adapter into the base weights and start a fresh one).

Example:
    >>> default_lora_targets("tiny")
    ['q_proj', 'v_proj']
    >>> from types import SimpleNamespace
    >>> sample_key(SimpleNamespace(prompt_ids=[1, 2], completion_ids=[3], action_index=0))
    ((1, 2), (3,), 0)
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from llmgym.errors import ConfigError


class Weights:
    """What trains (a LoRA adapter, the whole model, or nothing: a frozen backbone) and the
    reference policy, owned by a trainer. It holds the reference's own state: the action head
    frozen at the last refresh, the frozen copy of a fully fine-tuned model (built on first
    use), the adapters merged by refreshes (kept so that a resume replays them) and the
    memoised reference log-probs."""

    def __init__(self, config: Any) -> None:
        self.config = config
        self.merged_adapters: list[dict[str, Any]] = []
        self.ref_head: Any = None
        self.ref_model: Any = None
        self.cache: dict[tuple, float] = {}

    def lora_config(self, model: Any) -> Any:
        """The peft ``LoraConfig`` of ``config.lora`` for ``model``, its target modules
        resolved for the model's architecture (:func:`lora_targets`)."""
        from peft import LoraConfig

        lora = self.config.lora
        targets = lora.target_modules
        if targets is None:
            targets = default_lora_targets(self.config.policy.model)
        from transformers.pytorch_utils import Conv1D

        return LoraConfig(
            r=lora.r,
            lora_alpha=lora.alpha,
            lora_dropout=lora.dropout,
            target_modules=lora_targets(model, targets, lora.layers),
            # GPT-2's Conv1D stores its weight transposed
            fan_in_fan_out=any(isinstance(m, Conv1D) for m in model.modules()),
            task_type="CAUSAL_LM",
        )

    def prepare(self, model: Any) -> Any:
        """The model as it trains: frozen, whole, or with a fresh LoRA adapter."""
        if not self.config.optim.train_backbone:
            return model.requires_grad_(False).eval()
        if not self.config.lora.enabled:
            return model.train()
        from peft import get_peft_model

        return get_peft_model(model, self.lora_config(model)).train()

    @contextmanager
    def reference(self, policy: Any) -> Iterator[None]:
        """Run ``policy`` as the reference: the adapter switched off (LoRA) or the frozen copy
        (full fine-tune), and no action head (or the one frozen by :meth:`refresh`)."""
        live_head, live_model = policy.head, policy.model
        policy.head = self.ref_head
        try:
            if not self.config.optim.train_backbone:
                yield
            elif self.config.lora.enabled:
                with policy.model.disable_adapter():
                    yield
            else:
                if self.ref_model is None:
                    import copy

                    self.ref_model = copy.deepcopy(live_model).eval().requires_grad_(False)
                policy.model = self.ref_model
                yield
        finally:
            policy.head, policy.model = live_head, live_model

    def reference_logprobs(
        self, policy: Any, samples: Sequence[Any], recompute: Callable[[list[Any]], list[Any]]
    ) -> Any:
        """log pi_ref(taken | prompt) per sample [N] (``recompute``: the trainer's no-grad
        re-scoring, one output per chunk); memoised per (prompt, completion) in score mode with
        a Markov prompt (the reference only changes on a refresh)."""
        import torch

        keys = [sample_key(s) for s in samples]
        missing = [i for i, k in enumerate(keys) if k not in self.cache]
        with self.reference(policy):
            outs = recompute([samples[i] for i in missing])
        logprobs = [lp for out in outs for lp in out.logprob.tolist()]
        for i, lp in zip(missing, logprobs, strict=True):
            self.cache[keys[i]] = lp
        values = torch.tensor([self.cache[k] for k in keys], dtype=torch.float32)
        if self.config.policy.mode != "score" or self.config.policy.history:
            self.cache.clear()  # prompts rarely repeat: keep memory flat
        return values

    def refresh(self, model: Any, policy: Any) -> Any:
        """Make the current policy the new reference: merge the adapter into the base weights
        and start a fresh adapter. Returns the model to train on (the caller builds a new
        optimizer for it)."""
        self.cache.clear()
        if policy.head is not None:
            import copy

            self.ref_head = copy.deepcopy(policy.head).requires_grad_(False)
        if not self.config.optim.train_backbone:
            return model
        if not self.config.lora.enabled:
            self.ref_model = None
            return model
        state = {k: v.detach().cpu().clone() for k, v in lora_state(model).items()}
        return self.merge(model, state)

    def merge(self, model: Any, state: dict[str, Any]) -> Any:
        """Merge the adapter ``state`` into ``model``'s base weights, remember it, and return
        the base with a fresh adapter (a refresh, or a resume replaying one)."""
        from peft import get_peft_model, set_peft_model_state_dict

        set_peft_model_state_dict(model, state)
        self.merged_adapters.append(state)
        base = model.merge_and_unload()
        return get_peft_model(base, self.lora_config(base)).train()


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


def lora_targets(model: Any, targets: Any, layers: int = 0) -> Any:
    """The modules LoRA adapts in ``model``, for any architecture: ``targets`` (module names
    such as ``["q_proj", "v_proj"]``, or peft's ``"all-linear"``) as they are when every layer
    trains (``layers`` 0 or at least the model's depth); else the full names of the matching
    linear modules inside the last ``layers`` decoder blocks (the ``ModuleList`` as long as
    the model's ``num_hidden_layers``, wherever the architecture keeps it).

    Example:
        >>> from llmgym.policy.testing import tiny_model
        >>> model, _ = tiny_model()
        >>> lora_targets(model, ["q_proj"], layers=0)
        ['q_proj']
        >>> lora_targets(model, ["q_proj", "v_proj"], layers=1)
        ['model.layers.1.self_attn.q_proj', 'model.layers.1.self_attn.v_proj']
        >>> len(lora_targets(model, "all-linear", layers=1))
        7
    """
    import torch
    from transformers.pytorch_utils import Conv1D

    names = [targets] if isinstance(targets, str) else list(targets)
    depth = getattr(getattr(model, "config", None), "num_hidden_layers", None)
    if not layers or not depth or layers >= depth:
        return targets if isinstance(targets, str) else names
    blocks = [
        (name, module)
        for name, module in model.named_modules()
        if isinstance(module, torch.nn.ModuleList) and len(module) == depth
    ]
    if len(blocks) != 1:
        raise ConfigError(
            f"Cannot tell the decoder layers of {type(model).__name__} apart to train LoRA in "
            f"the last {layers} of them; set lora.layers=0 to adapt every layer."
        )
    prefix, stack = blocks[0]
    found = []
    for index in range(depth - layers, depth):
        for name, module in stack[index].named_modules():
            if not isinstance(module, (torch.nn.Linear, Conv1D)):
                continue
            if targets == "all-linear" or name.rsplit(".", 1)[-1] in names:
                found.append(f"{prefix}.{index}.{name}")
    if not found:
        raise ConfigError(
            f"No module named {', '.join(names)} in the last {layers} layers of "
            f"{type(model).__name__}; set lora.target_modules to names it has (or all-linear)."
        )
    return found


def init_lora_from_states(
    model: Any, prompts: Sequence[Sequence[int]], pad_id: int, positions: int = 8
) -> int:
    """Set each LoRA A matrix's rows to the principal directions of its input's variation
    across ``prompts`` (one per state): the inputs at each prompt's last ``positions`` tokens,
    centred over the prompts position by position (so what every prompt shares drops out),
    pooled. Rows keep the norm peft gave them; B is untouched (zero at the start, so the model's
    output does not change). Returns how many modules were set.

    Example:
        >>> from llmgym.policy.testing import tiny_model
        >>> from peft import LoraConfig, get_peft_model
        >>> model = get_peft_model(tiny_model()[0], LoraConfig(r=2, target_modules=["q_proj"]))
        >>> init_lora_from_states(model, [[5, 6, 7], [5, 8, 7], [9, 6, 7]], pad_id=0)
        2
    """
    import torch
    from peft.tuners.lora import LoraLayer

    modules = {n: m for n, m in model.named_modules() if isinstance(m, LoraLayer)}
    inputs: dict[str, Any] = {}

    def keep(name: str) -> Callable[..., None]:
        def hook(module: Any, args: tuple) -> None:
            inputs[name] = args[0].detach()[:, -positions:, :].float()

        return hook

    width = max(len(p) for p in prompts)
    ids = torch.tensor([[pad_id] * (width - len(p)) + list(p) for p in prompts])
    mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in prompts])
    device = next(model.parameters()).device
    handles = [m.register_forward_pre_hook(keep(n)) for n, m in modules.items()]
    try:
        with torch.no_grad():
            model(input_ids=ids.to(device), attention_mask=mask.to(device))
    finally:
        for handle in handles:
            handle.remove()
    for name, module in modules.items():
        x = inputs[name]
        x = (x - x.mean(0, keepdim=True)).reshape(-1, x.shape[-1]).double()
        _, vectors = torch.linalg.eigh(x.T @ x)  # ascending eigenvalues
        for adapter in module.lora_A:
            weight = module.lora_A[adapter].weight
            top = vectors[:, -weight.shape[0] :].flip(-1).T
            norms = weight.norm(dim=1, keepdim=True)
            with torch.no_grad():
                weight.copy_((top * norms.double()).to(weight))
    return len(modules)


def lora_state(model: Any) -> dict[str, Any]:
    """The LoRA weights of a peft ``model`` (``get_peft_model_state_dict``). llmgym never
    resizes the vocabulary, so the embedding layers are left out without peft's check, which
    looks the base model up on the Hub (a warning on every save when offline)."""
    from peft import get_peft_model_state_dict

    return get_peft_model_state_dict(model, save_embedding_layers=False)


__all__ = [
    "Weights",
    "as_list",
    "default_lora_targets",
    "init_lora_from_states",
    "lora_state",
    "lora_targets",
    "sample_key",
]
