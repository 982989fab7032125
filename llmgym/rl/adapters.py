"""A trainer's weights as the directories vLLM loads: its LoRA weights as a standard PEFT
adapter directory (what ``llmgym export`` writes and what a trainer acting through vLLM
hot-loads after each update), or a full fine-tune's whole model as a checkpoint directory
(what such a trainer has vLLM reload after each update).

Adapters that were merged into the weights during training (a KL reference refreshed after
the SFT warm start, or REINFORCE's refreshes) are folded in exactly: ``k`` adapters of rank
``r`` become one of rank ``k * r`` (their A matrices stacked, their B matrices side by side,
``lora_alpha`` scaled by ``k`` so the scale ``alpha / r`` is unchanged).

Example:
    >>> rng = np.random.default_rng(0)
    >>> a1, a2 = rng.normal(size=(2, 4, 3))  # two rank-2 adapters of a 3 -> 5 linear layer
    >>> b1, b2 = rng.normal(size=(2, 5, 2))
    >>> folded = fold_adapters([{"m.lora_A.weight": a1[:2], "m.lora_B.weight": b1},
    ...                         {"m.lora_A.weight": a2[:2], "m.lora_B.weight": b2}])
    >>> folded["m.lora_A.weight"].shape, folded["m.lora_B.weight"].shape
    ((4, 3), (5, 4))
    >>> delta = folded["m.lora_B.weight"] @ folded["m.lora_A.weight"]
    >>> bool(np.allclose(delta, b1 @ a1[:2] + b2 @ a2[:2]))
    True
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from llmgym.errors import ExportError
from llmgym.files import atomic_dir
from llmgym.rl.weights import lora_state


def fold_adapters(states: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """One LoRA state dict equal to the sum of ``states`` (same modules, same rank each):
    ``sum_i B_i A_i = [B_1 ... B_k] [A_1; ...; A_k]``. Works on torch tensors and numpy arrays."""
    cat = _concatenate(states[0])
    out = {}
    for key in states[0]:
        parts = [state[key] for state in states]
        if ".lora_A." in key:
            out[key] = cat(parts, 0)
        elif ".lora_B." in key:
            out[key] = cat(parts, 1)
        else:
            raise ExportError(f"The adapter holds {key!r}, which is not a LoRA matrix.")
    return out


def _concatenate(state: dict[str, Any]) -> Any:
    first = next(iter(state.values()))
    if isinstance(first, np.ndarray):
        return lambda parts, dim: np.concatenate(parts, axis=dim)
    import torch

    return lambda parts, dim: torch.cat(parts, dim=dim)


def write_adapter(trainer: Any, out: str | Path, base: str | None = None) -> None:
    """Write ``trainer``'s LoRA weights (merged adapters folded in) as a PEFT adapter directory
    ``out``, its base model named ``base`` (default: where it loads from on this machine,
    :func:`base_model_path`); also what a trainer acting through vLLM hot-loads after each
    update."""
    from safetensors.torch import save_file

    current = {k: v.detach().cpu() for k, v in lora_state(trainer.model).items()}
    states = [*trainer.learner.weights.merged_adapters, current]
    lora = copy.deepcopy(trainer.model.peft_config["default"])
    lora.r *= len(states)
    lora.lora_alpha *= len(states)
    lora.base_model_name_or_path = base or base_model_path(trainer.config.policy.model)
    weights = {k: v.contiguous() for k, v in fold_adapters(states).items()}
    with atomic_dir(out) as tmp:  # moved in once complete (OutputError on a full disk)
        lora.save_pretrained(str(tmp))
        save_file(weights, str(tmp / "adapter_model.safetensors"), metadata={"format": "pt"})


def write_weights(trainer: Any, out: str | Path) -> None:
    """Write ``trainer``'s whole language model (a full fine-tune) as a Hugging Face checkpoint
    directory ``out`` (config and safetensors weights), which vLLM reloads in place; the files
    move in once all are written (``OutputError`` on a full disk, nothing partial left)."""
    with atomic_dir(out) as tmp:
        trainer.model.save_pretrained(str(tmp), safe_serialization=True)


def base_model_hub_id(name: str) -> str:
    """How an exported adapter names its base model for other machines: the Hub id of a
    known model (the embedded one's is ``HuggingFaceTB/SmolLM2-135M-Instruct``), else the
    name as given (a local directory's path, ``tiny``).

    Example:
        >>> base_model_hub_id("smollm2-135m"), base_model_hub_id("tiny")
        ('HuggingFaceTB/SmolLM2-135M-Instruct', 'tiny')
    """
    from llmgym.policy.models import get_model_defaults

    if name == "tiny":
        return name
    path = Path(name).expanduser()
    return str(path.resolve()) if path.is_dir() else get_model_defaults(name).hub_id


def base_model_path(name: str) -> str:
    """Where an exported adapter's base model loads from without a network: a local
    directory's absolute path, the embedded model's converted copy in the llmgym cache, else
    the Hub id (``tiny`` stays ``tiny``: it has no files).

    Example:
        >>> base_model_path("tiny"), base_model_path("Qwen/Qwen2.5-0.5B-Instruct")
        ('tiny', 'Qwen/Qwen2.5-0.5B-Instruct')
    """
    from llmgym.policy.models import get_model_defaults, model_source

    if name == "tiny":
        return name
    if get_model_defaults(name).gguf is not None:
        return str(Path(model_source(name)[0]).resolve())
    path = Path(name).expanduser()
    return str(path.resolve()) if path.is_dir() else get_model_defaults(name).hub_id


__all__ = [
    "base_model_hub_id",
    "base_model_path",
    "fold_adapters",
    "write_adapter",
    "write_weights",
]
