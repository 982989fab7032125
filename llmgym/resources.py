"""What a run asks of the model and of this machine, estimated before anything is built: the
model's size from its ``config.json``, the rollout's episodes x steps x tokens, LoRA's r x
target dims, against the memory available (:func:`available_memory`; tests patch it).

Every refusal is a ``ConfigError`` in one sentence (the CLI prints it, exit code 2). The
estimates are lower bounds (one step an episode, a short prompt): a run they refuse cannot fit.

Example:
    >>> shape = ModelShape.from_config({"vocab_size": 259, "hidden_size": 64,
    ...     "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4,
    ...     "num_key_value_heads": 2, "max_position_embeddings": 4096})
    >>> shape.parameters(), shape.smallest_dim(["q_proj", "v_proj"])
    (107200, 32)
    >>> check_fits({"the model's weights": 4 * shape.parameters()}, available=10**6)
    >>> check_fits({"the model's weights": 4 * 10**9}, available=10**9)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    llmgym.errors.ConfigError: This needs about 4.0 GB of memory (the model's weights 4.0 GB) ...
"""

from __future__ import annotations

import math
import os
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from llmgym.errors import ConfigError

#: Caps beyond which a run is refused whatever the memory (sft.episodes and the other episode
#: counts: ``llmgym.rollout.MAX_EPISODES``, 10**9).
MAX_EPISODES_PER_UPDATE = 10**6
MAX_GROUP_SIZE = 4096

#: The floor of an acting step's prompt, in tokens (Blackjack's is ~150 with SmolLM2).
PROMPT_TOKENS = 128
#: What one step of one episode keeps until the update: its token ids and log-probs per token,
#: and its records (text, info, Python objects) per step.
TOKEN_BYTES, STEP_BYTES = 16, 1024
#: Activations a trained decoder layer keeps per token for the backward pass, in hidden sizes.
ACTIVATION_WIDTH = 8

#: Linear modules of a decoder layer -> (in, out) features, in terms of the config's sizes.
_ALL_LINEAR = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")
#: config.json's names of each size, for the architectures that name them otherwise (GPT-2).
_NAMES = {
    "hidden_size": ("hidden_size", "n_embd", "d_model"),
    "num_hidden_layers": ("num_hidden_layers", "n_layer", "num_layers"),
    "vocab_size": ("vocab_size",),
    "num_attention_heads": ("num_attention_heads", "n_head"),
    "num_key_value_heads": ("num_key_value_heads",),
    "intermediate_size": ("intermediate_size", "n_inner", "ffn_dim"),
    "head_dim": ("head_dim",),
    "max_position_embeddings": ("max_position_embeddings", "n_positions"),
}


@dataclass(frozen=True)
class ModelShape:
    """The sizes of a decoder-only transformer, as its ``config.json`` gives them."""

    vocab_size: int
    hidden_size: int
    num_hidden_layers: int
    intermediate_size: int
    num_attention_heads: int
    num_key_value_heads: int
    head_dim: int
    context: int | None
    """``max_position_embeddings``: the longest sequence (None where the config names none)."""
    tied: bool = False

    @classmethod
    def from_config(cls, config: Mapping[str, Any], source: str = "config.json") -> ModelShape:
        """The shape of a config dict; a size that is not a positive whole number is refused in
        a sentence naming ``source`` (a damaged file), and a config without the sizes too.

        Example:
            >>> ModelShape.from_config({"hidden_size": -5}, "m/config.json")  # doctest: +ELLIPSIS
            Traceback (most recent call last):
            ...
            llmgym.errors.ConfigError: m/config.json sets hidden_size to -5, not a positive ...
        """
        if "hidden_size" not in config and isinstance(config.get("text_config"), Mapping):
            config = config["text_config"]  # a multimodal model's language part
        size = {key: _size(config, names, source) for key, names in _NAMES.items()}
        for key in ("hidden_size", "num_hidden_layers", "vocab_size"):
            if size[key] is None:
                raise ConfigError(
                    f"{source} names no {key}, so it is not the config of a language model "
                    "llmgym can load; pass a directory written by save_pretrained."
                )
        hidden, heads = size["hidden_size"], size["num_attention_heads"] or 1
        return cls(
            vocab_size=size["vocab_size"],
            hidden_size=hidden,
            num_hidden_layers=size["num_hidden_layers"],
            intermediate_size=size["intermediate_size"] or 4 * hidden,
            num_attention_heads=heads,
            num_key_value_heads=size["num_key_value_heads"] or heads,
            head_dim=size["head_dim"] or max(1, hidden // heads),
            context=size["max_position_embeddings"],
            tied=bool(config.get("tie_word_embeddings", False)),
        )

    def module_dims(self) -> dict[str, tuple[int, int]]:
        """Each linear module of a decoder layer -> its (in, out) features."""
        h, i = self.hidden_size, self.intermediate_size
        q, kv = self.num_attention_heads * self.head_dim, self.num_key_value_heads * self.head_dim
        return {
            "q_proj": (h, q),
            "k_proj": (h, kv),
            "v_proj": (h, kv),
            "o_proj": (q, h),
            "gate_proj": (h, i),
            "up_proj": (h, i),
            "down_proj": (i, h),
            "qkv_proj": (h, q + 2 * kv),
            "gate_up_proj": (h, 2 * i),
        }

    def parameters(self) -> int:
        """Weights in the model: embeddings (twice when untied), decoder layers, norms."""
        dims = self.module_dims()
        layer = sum(a * b for name, (a, b) in dims.items() if name in _ALL_LINEAR)
        embeddings = self.vocab_size * self.hidden_size * (1 if self.tied else 2)
        norms = (2 * self.num_hidden_layers + 1) * self.hidden_size
        return embeddings + self.num_hidden_layers * layer + norms

    def smallest_dim(self, targets: str | Sequence[str]) -> int:
        """The smallest in or out features of LoRA's target modules (``"all-linear"``: every
        linear module); names this shape does not know count as the hidden size."""
        names = _ALL_LINEAR if targets == "all-linear" else list(targets)
        dims = self.module_dims()
        return min(min(dims.get(name, (self.hidden_size,))) for name in names)

    def lora_parameters(self, r: int, targets: str | Sequence[str], layers: int = 0) -> int:
        """LoRA's weights: ``r x (in + out)`` per target module, in the last ``layers`` layers
        (0: all)."""
        names = _ALL_LINEAR if targets == "all-linear" else list(targets)
        dims = self.module_dims()
        per_layer = sum(r * sum(dims.get(n, (self.hidden_size,) * 2)) for n in names)
        return per_layer * min(layers or self.num_hidden_layers, self.num_hidden_layers)

    def cache_bytes_per_token(self, dtype_bytes: int) -> int:
        """The attention keys and values one token keeps in every layer while acting."""
        kv = self.num_key_value_heads * self.head_dim
        return 2 * kv * self.num_hidden_layers * dtype_bytes


def _size(config: Mapping[str, Any], names: Sequence[str], source: str) -> int | None:
    for name in names:
        if config.get(name) is None:
            continue
        value = config[name]
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ConfigError(
                f"{source} sets {name} to {value!r}, not a positive whole number; the file is "
                "damaged or not a model config: save the model again (save_pretrained)."
            )
        return value
    return None


def available_memory() -> int | None:
    """Bytes this process can still take: the system's available memory (psutil, else
    ``/proc/meminfo``), less within a cgroup's limit; None where neither can be read."""
    found: list[int] = []
    try:
        import psutil

        found.append(int(psutil.virtual_memory().available))
    except (ImportError, OSError):
        found += _meminfo()
    cgroup = Path("/sys/fs/cgroup")
    try:
        limit = (cgroup / "memory.max").read_text().strip()
        if limit.isdigit():
            found.append(int(limit) - int((cgroup / "memory.current").read_text()))
    except (OSError, ValueError):
        pass
    return max(0, min(found)) if found else None


def device_memory(device: str) -> int | None:
    """Bytes free where the model's tensors go: a CUDA device's free memory (``cuda``,
    ``cuda:N``), else :func:`available_memory` (tests patch it); None where unknown.

    Example:
        >>> device_memory("cpu") is None or device_memory("cpu") > 0
        True
    """
    if device.startswith("cuda"):
        try:
            import torch

            return int(torch.cuda.mem_get_info(torch.device(device))[0])
        except (ImportError, RuntimeError, AssertionError):
            return None
    return available_memory()


def _meminfo() -> list[int]:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return [int(line.split()[1]) * 1024]
    except (OSError, ValueError, IndexError):
        pass
    return []


def gigabytes(n: float) -> str:
    """Bytes in words: ``1.5 GB``, ``12 MB``.

    Example:
        >>> gigabytes(1.5e9), gigabytes(12e6)
        ('1.5 GB', '12 MB')
    """
    return f"{n / 1e9:.1f} GB" if n >= 1e9 else f"{max(n, 0) / 1e6:.0f} MB"


def check_fits(parts: Mapping[str, float], available: int | None = None, hint: str = "") -> None:
    """Refuse, in one sentence naming the largest parts, a sum of ``parts`` (what -> bytes)
    above ``available`` (default :func:`available_memory`; None: unknown, nothing refused)."""
    if available is None:
        available = available_memory()
    total = sum(parts.values())
    if available is None or total <= available:
        return
    largest = sorted(parts.items(), key=lambda item: -item[1])[:3]
    named = ", ".join(f"{what} {gigabytes(size)}" for what, size in largest if size >= 1e6)
    raise ConfigError(
        f"This needs about {gigabytes(total)} of memory ({named}) but {gigabytes(available)} "
        f"is available{'; ' + hint if hint else ''}."
    )


@dataclass(frozen=True)
class RunSize:
    """What a training run holds at once, in numbers (the config's, resolved for the model)."""

    dtype_bytes: int = 4
    trains: str = "lora"
    """``lora``, ``full`` (the whole model, AdamW) or ``frozen`` (only heads)."""
    lora_r: int = 16
    lora_targets: str | Sequence[str] = "all-linear"
    lora_layers: int = 0
    episodes: int = 32
    """Episodes kept until an update (GRPO: groups x group size)."""
    prompt_tokens: int = PROMPT_TOKENS
    new_tokens: int = 8
    num_envs: int = 8
    micro_batch: int = 16

    def tokens(self, shape: ModelShape) -> int:
        """A step's tokens, prompt and answer, at most the model's context."""
        return min(self.prompt_tokens + self.new_tokens, shape.context or math.inf)  # type: ignore[return-value]


def training_memory(shape: ModelShape, size: RunSize) -> dict[str, int]:
    """What -> bytes a training run holds at once (a lower bound).

    Example:
        >>> shape = ModelShape(49152, 576, 30, 1536, 9, 3, 64, 8192, True)  # SmolLM2-135M
        >>> parts = training_memory(shape, RunSize(lora_layers=8))
        >>> gigabytes(parts["the model's weights"]), gigabytes(sum(parts.values()))
        ('538 MB', '933 MB')
    """
    params, tokens = shape.parameters(), size.tokens(shape)
    weights = params * size.dtype_bytes
    if size.trains == "full":
        state = params * (4 + 8) + weights  # fp32 gradients, AdamW's two moments, a reference
    elif size.trains == "lora":
        state = 16 * shape.lora_parameters(size.lora_r, size.lora_targets, size.lora_layers)
    else:
        state = 0
    trained = 0 if size.trains == "frozen" else size.lora_layers or shape.num_hidden_layers
    per_row = tokens * ACTIVATION_WIDTH * shape.hidden_size * min(trained, shape.num_hidden_layers)
    return {
        "the model's weights": weights,
        "training state": state,
        "the rollout": size.episodes * (tokens * TOKEN_BYTES + STEP_BYTES),
        "acting": acting_row_bytes(shape, size) * size.num_envs,
        "the update": (size.micro_batch * per_row + shape.vocab_size * size.new_tokens) * 4,
    }


def acting_row_bytes(shape: ModelShape, size: RunSize) -> int:
    """Memory one env adds to a batched acting call: its keys and values over the whole
    sequence, and one step's logits."""
    tokens = size.tokens(shape)
    return tokens * shape.cache_bytes_per_token(size.dtype_bytes) + 4 * shape.vocab_size


def largest_batch(
    shape: ModelShape, size: RunSize, available: int | None = None, limit: int = 4096
) -> int:
    """The most envs that act in one batch next to everything else the run holds (for
    ``--num-envs auto``); 0 when even one does not fit, ``limit`` when memory is unknown.

    Example:
        >>> shape = ModelShape(49152, 576, 30, 1536, 9, 3, 64, 8192, True)
        >>> largest_batch(shape, RunSize(lora_layers=8), available=4 * 10**9)
        482
        >>> largest_batch(shape, RunSize(lora_layers=8), available=None) > 0  # unknown: the limit
        True
    """
    if available is None:
        available = available_memory()
    if available is None:
        return limit
    row = acting_row_bytes(shape, size)
    rest = sum(training_memory(shape, size).values()) - size.num_envs * row
    return max(0, min(limit, (available - rest) // max(1, row)))


def check_training(shape: ModelShape, size: RunSize, available: int | None = None) -> None:
    """Refuse a run that cannot fit: a LoRA rank above its targets' smallest dim, and memory
    (:func:`training_memory`) above ``available``."""
    if size.trains == "lora":
        smallest = shape.smallest_dim(size.lora_targets)
        if size.lora_r > smallest:
            raise ConfigError(
                f"lora.r is {size.lora_r} but LoRA's target modules have {smallest} features "
                f"on their smallest side; use lora.r of at most {smallest}."
            )
    check_fits(
        training_memory(shape, size),
        available,
        "use a smaller model, fewer episodes_per_update or num_envs, or a lower lora.r",
    )


def check_display(env_kwargs: Mapping[str, Any]) -> None:
    """Refuse ``render_mode="human"`` (a window) on a Linux machine without a display.

    Example:
        >>> check_display({"render_mode": "rgb_array"})
    """
    if env_kwargs.get("render_mode") != "human" or not sys.platform.startswith("linux"):
        return
    if not (os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")):
        raise ConfigError(
            "render_mode=human opens a window, but this machine has no display (DISPLAY and "
            "WAYLAND_DISPLAY are unset); use render_mode=rgb_array, or run where a display is."
        )


__all__ = [
    "MAX_EPISODES_PER_UPDATE",
    "MAX_GROUP_SIZE",
    "ModelShape",
    "RunSize",
    "available_memory",
    "check_display",
    "check_fits",
    "check_training",
    "device_memory",
    "gigabytes",
    "largest_batch",
    "training_memory",
]
