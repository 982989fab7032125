"""Checks of command-line input that run before any expensive work, and the one ``fail`` that
turns a user error into one sentence on stderr and exit code 2.

Example:
    >>> import tempfile
    >>> check_output_dir(tempfile.mkdtemp(), "--output") is None
    True
    >>> try:
    ...     check_device("tpu")
    ... except typer.Exit as exit:
    ...     exit.exit_code
    2
"""

from __future__ import annotations

import io
import os
import sys
from pathlib import Path
from typing import Any

import typer
from rich.console import Console
from typer.core import TyperGroup

try:  # typer 0.2x carries its own copy of click, whose errors are not click's
    from typer._click import exceptions as click_errors
except ImportError:  # pragma: no cover - typer with click as a dependency
    from click import exceptions as click_errors
ABORTS = (typer.Abort, getattr(click_errors, "Abort", typer.Abort))


def fail(message: str, code: int = 2) -> typer.Exit:
    """Print ``Error: <message>`` as one line on stderr and return the Exit to raise."""
    text = " ".join(str(message).split()) or "unknown error"
    text = text.encode("utf-8", "backslashreplace").decode("utf-8")  # undecodable input bytes
    while text.lower().startswith("error:"):
        text = text[6:].lstrip()
    Console(stderr=True, highlight=False, soft_wrap=True).print(f"Error: {text}", markup=False)
    return typer.Exit(code)


#: The extra (``pip install 'llmgym[EXTRA]'``) that installs each optional top-level module.
EXTRAS = {
    **dict.fromkeys(
        ("torch", "transformers", "peft", "accelerate", "gguf", "safetensors", "tensorboard"),
        "train",
    ),
    **dict.fromkeys(("stable_baselines3", "matplotlib", "tqdm"), "baselines"),
    **dict.fromkeys(("trl", "datasets"), "trl"),
    **dict.fromkeys(("reasoning_gym", "minigrid"), "lang"),
    **dict.fromkeys(("openenv", "uvicorn"), "openenv"),
    "textworld": "textworld",
    "ray": "ray",
}


def missing_extra(error: ImportError, what: str) -> typer.Exit:
    """``fail`` with the extra that installs the module ``error`` found missing.

    Example:
        >>> missing_extra(ModuleNotFoundError("x", name="torch"), "This agent").exit_code
        2

    (``Error: This agent needs torch, which is not installed: pip install 'llmgym[train]'.``
    on stderr.)
    """
    module = (error.name or "").split(".")[0] or "an optional package"
    extra = EXTRAS.get(module, "all")
    return fail(f"{what} needs {module}, which is not installed: pip install 'llmgym[{extra}]'.")


class OneLineErrors(TyperGroup):
    """The ``llmgym`` app's group: a usage error (an unknown option, a value of the wrong type
    or out of its range, a missing argument) is one line on stderr, ``Error: ...``, with exit
    code 2, as every other error is (click draws a usage block and a box around it)."""

    def main(self, *args: Any, standalone_mode: bool = True, **kwargs: Any) -> Any:
        if not standalone_mode:
            return super().main(*args, standalone_mode=False, **kwargs)
        for stream in (sys.stdout, sys.stderr):  # a path of undecodable bytes prints escaped
            if isinstance(stream, io.TextIOWrapper):
                stream.reconfigure(errors="backslashreplace")
        given = args[0] if args else kwargs.get("args")
        argv = list(sys.argv[1:] if given is None else given)
        try:
            code = super().main(*args, standalone_mode=False, **kwargs)
        except click_errors.ClickException as error:
            if type(error).__name__ != "NoArgsIsHelpError":  # else the help is already shown
                fail(usage_sentence(error, argv), error.exit_code)
            sys.exit(error.exit_code)
        except ABORTS:
            fail("Aborted.", 1)
            sys.exit(1)
        sys.exit(code if isinstance(code, int) else 0)


def usage_sentence(error: Any, argv: list[str] | tuple[str, ...] = ()) -> str:
    """A click usage error as one sentence that says where the options are listed; a NaN given
    to a number option in ``argv`` is named as such (click's range check reads it as too big).

    Example:
        >>> import click
        >>> option = click.Option(["--stop-after"], type=click.FloatRange(0, 10))
        >>> error = click.BadParameter("Input should be less than or equal to 10", param=option)
        >>> usage_sentence(error, ["serve", "--stop-after", "nan"])
        "Invalid value for '--stop-after': nan is not a number."
    """
    message = " ".join(error.format_message().split()) or type(error).__name__
    nan = _nan_value(getattr(error, "param", None), argv)
    if nan is not None:
        message = f"Invalid value for '{error.param.opts[0]}': {nan} is not a number"
    if not message.endswith((".", "!", "?")):
        message += "."
    context = getattr(error, "ctx", None)
    if context is not None:
        message += f" See '{context.command_path} --help'."
    return message


def _nan_value(param: Any, argv: list[str] | tuple[str, ...]) -> str | None:
    """The value of option ``param`` in ``argv`` when it is NaN (``nan``, ``-NaN``), else None."""
    for i, arg in enumerate(argv):
        for opt in getattr(param, "opts", ()):
            value = arg[len(opt) + 1 :] if arg.startswith(opt + "=") else None
            if arg == opt and i + 1 < len(argv):
                value = argv[i + 1]
            if value is not None and value.strip().lower().lstrip("+-") == "nan":
                return value
    return None


def check_device(device: str) -> None:
    """``auto``, ``cpu``, ``cuda``, ``cuda:N`` or ``mps`` (as ``run.device`` of the trainers),
    and one this machine has."""
    from llmgym.errors import ConfigError
    from llmgym.policy.config import DEVICES, is_device

    if not is_device(device):
        raise fail(f"Unknown --device {device!r}; use one of {', '.join(DEVICES)} or cuda:N.")
    if device not in ("auto", "cpu"):
        from llmgym.policy.models import check_device_available

        try:
            check_device_available(device)
        except ConfigError as error:
            raise fail(str(error)) from None


def _writable_dir(path: Path, option: str) -> None:
    """Raise unless ``path`` is (or can become) a writable directory."""
    for parent in [path, *path.parents]:
        if parent.exists():
            if not parent.is_dir():
                raise fail(f"{option} {str(path)!r} needs a directory but {parent} is a file.")
            if not os.access(parent, os.W_OK | os.X_OK):
                raise fail(f"{option} {str(path)!r} is not writable ({parent} is read-only).")
            return


def check_output_dir(path: str | Path, option: str = "--output") -> None:
    """A directory that a command will write into."""
    _writable_dir(Path(path), option)


def check_output_file(path: str | Path, option: str = "--output") -> None:
    """A file that a command will write."""
    path = Path(path)
    if path.is_dir():
        raise fail(f"{option} {str(path)!r} is a directory; pass a file path.")
    if path.exists() and not os.access(path, os.W_OK):
        raise fail(f"{option} {str(path)!r} is read-only.")
    _writable_dir(path.parent, option)


def check_cache() -> None:
    """``$LLMGYM_CACHE``, when set, must be a directory (or not exist yet)."""
    root = os.environ.get("LLMGYM_CACHE")
    if root:
        _writable_dir(Path(root), "LLMGYM_CACHE")


def check_env_kwargs(env_id: str, env_kwargs: dict[str, Any]) -> None:
    """Make the env once with ``env_kwargs`` so a bad keyword fails before any model loads
    (``llmgym.envs.registration.check_env_kwargs``)."""
    from llmgym.envs.registration import check_env_kwargs as check
    from llmgym.errors import ConfigError
    from llmgym.resources import check_display

    try:
        check_display(env_kwargs)
        check(env_id, env_kwargs)
    except ConfigError as error:
        raise fail(str(error)) from None


def key_values(items: list[str] | None, option: str) -> dict[str, Any]:
    """``KEY=VALUE`` options as a dict; values are JSON where they parse (``false``, ``30``,
    ``["a"]``), else text. Never evaluated. ``nan`` and ``inf`` are the floats, as a float
    option reads them (so ``--set learning_rate=nan`` and ``--lr nan`` fail alike).

    Example:
        >>> key_values(["is_slippery=false", "map-name=8x8", "lr=-inf"], "--env-kwarg")
        {'is_slippery': False, 'map_name': '8x8', 'lr': -inf}
    """
    import json

    out: dict[str, Any] = {}
    for item in items or []:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise fail(f"{option} {item!r} is not KEY=VALUE, as in {option} is_slippery=false.")
        literal = {"True": "true", "False": "false", "None": "null"}.get(value.strip(), value)
        if value.strip().lower().lstrip("+-") in ("nan", "inf", "infinity"):
            out[key.strip().replace("-", "_")] = float(value)
            continue
        try:
            out[key.strip().replace("-", "_")] = json.loads(literal)
        except ValueError:
            out[key.strip().replace("-", "_")] = value
    return out
