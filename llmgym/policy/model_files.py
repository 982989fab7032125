"""A model directory's files, read with care: ``config.json`` as settings (never executed),
and which weights file is damaged when loading fails, each refused in a sentence naming the
file (``llmgym.policy.models`` loads the model).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from llmgym.errors import ModelNotFoundError

#: A ``config.json`` larger than this is not a model's config (they are a few KB).
MAX_CONFIG_BYTES = 1 << 24


def damaged(name_or_path: str, source: str | Path, error: Exception) -> ModelNotFoundError:
    """The error of a model that failed to load from a damaged file (a truncated safetensors
    file, a config.json that transformers refuses), in a sentence naming the file."""
    why = " ".join(str(error).split())[:200]
    if type(error).__name__ == "SafetensorError":
        path = unreadable_weights(source)
        return ModelNotFoundError(
            f"The weights file {path or 'of model ' + repr(name_or_path)} cannot be read ({why}); "
            "it is truncated or damaged: save or download the model again."
        )
    where = Path(source) / "config.json" if Path(source).is_dir() else "its config.json"
    return ModelNotFoundError(
        f"The config of model {name_or_path!r} ({where}) is refused: {why}; fix the file or "
        "save the model again."
    )


def unreadable_weights(source: str | Path) -> Path | None:
    """The first ``*.safetensors`` file of a local model directory that does not open."""
    from safetensors import SafetensorError, safe_open

    if not Path(source).is_dir():
        return None
    for path in sorted(Path(source).glob("*.safetensors")):
        try:
            with safe_open(str(path), "pt"):
                pass
        except (SafetensorError, OSError):
            return path
    return None


def read_model_config(path: Path) -> dict[str, Any]:
    """A model's ``config.json`` as a dict; a file that is not one (binary, not JSON, too
    large) is refused in a sentence naming it.

    Example:
        >>> import tempfile
        >>> bad = Path(tempfile.mkdtemp()) / "config.json"
        >>> _ = bad.write_bytes(b"\\x80\\x04 pickled")
        >>> read_model_config(bad)  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        llmgym.errors.ModelNotFoundError: .../config.json is not JSON text (it holds binary ...
    """
    fix = "write it with save_pretrained, or pass another model"
    try:
        with open(path, "rb") as file:
            data = file.read(MAX_CONFIG_BYTES + 1)
    except OSError as error:
        raise ModelNotFoundError(
            f"Cannot read {path} ({error.strerror or error}); {fix}."
        ) from None
    if len(data) > MAX_CONFIG_BYTES:
        raise ModelNotFoundError(f"{path} is over 16 MB, so not a model's config; {fix}.")
    try:
        config = json.loads(data.decode("utf-8"))
    except UnicodeDecodeError:
        raise ModelNotFoundError(
            f"{path} is not JSON text (it holds binary data, e.g. a pickle); {fix}."
        ) from None
    except ValueError as error:
        raise ModelNotFoundError(f"{path} is not valid JSON ({error}); {fix}.") from None
    if not isinstance(config, dict):
        raise ModelNotFoundError(f"{path} holds no JSON object of settings; {fix}.")
    return config


__all__ = ["damaged", "read_model_config", "unreadable_weights"]
