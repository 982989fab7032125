"""``llmgym export RUN DIR [--merge] [--local-base]``; ``register(app)`` adds it to the typer app.

Example:
    >>> import typer
    >>> from typer.testing import CliRunner
    >>> app = typer.Typer()
    >>> register(app)
    >>> result = CliRunner().invoke(app, ["no/such/run", "out"])
    >>> result.exit_code
    2
"""

from __future__ import annotations

import json

import typer

from llmgym.cli.checks import check_output_dir, fail


def export(
    run: str = typer.Argument(..., help="A `llmgym train` run directory, checkpoint or policy."),
    out: str = typer.Argument(..., help="New directory to write."),
    merge: bool = typer.Option(
        False, "--merge", help="Write a merged Hugging Face model instead of a PEFT adapter."
    ),
    local_base: bool = typer.Option(
        False,
        "--local-base",
        help="Name the adapter's base model by its path on this machine (the embedded model's "
        "converted copy) instead of its Hub id.",
    ),
) -> None:
    """Export a trained run: a PEFT adapter (peft, vLLM load_lora_adapter) or a merged model."""
    check_output_dir(out, "DIR")
    try:
        from llmgym.rl.export import export_run
    except ImportError as error:
        raise fail(
            f"Exporting needs the train extra ({error.name} is missing): "
            "pip install 'llmgym[train]'."
        ) from None
    from llmgym.errors import LLMGymError

    try:
        path = export_run(run, out, merge=merge, local_base=local_base)
    except (LLMGymError, ValueError, KeyError, OSError, ImportError) as error:
        why = (str(error).splitlines() or [""])[0]
        if not isinstance(error, LLMGymError):
            why = f"Could not export {run} ({type(error).__name__}: {why[:200]})."
        raise fail(why) from None
    kind = "merged model" if merge else "PEFT adapter"
    typer.echo(f"Wrote the {kind} of {run} to {path}.")
    if not merge:
        rank = json.loads((path / "adapter_config.json").read_text())["r"]
        typer.echo(
            f"Its LoRA rank is {rank}: serve it with vLLM's --max-lora-rank {rank} or more "
            "(or export with --merge)."
        )


def register(app: typer.Typer) -> None:
    """Add ``export`` to ``app``."""
    app.command()(export)


__all__ = ["register"]
