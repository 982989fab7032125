"""The ``llmgym`` command line: the typer ``app``, one module per command (``envs``, ``play``,
``eval``, ``bench``, ``baselines``, ``train``, ``plot``, ``recipes``, ``serve``) and ``main``,
the console script.

Example:
    >>> from typer.testing import CliRunner
    >>> result = CliRunner().invoke(app, ["envs"])
    >>> result.exit_code, "Text-CartPole-v1" in result.output
    (0, True)
"""

from __future__ import annotations

import sys

import typer

from llmgym.cli import bench, envs, export, recipes, serve, train
from llmgym.cli import eval as evaluate
from llmgym.cli.checks import OneLineErrors

app = typer.Typer(
    cls=OneLineErrors,
    help="Turn Gymnasium envs into language envs; evaluate and train LLM agents in them.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
envs.register(app)  # envs, play
evaluate.register(app)
bench.register(app)  # bench, baselines train
train.register(app)  # train, plot
recipes.register(app)
serve.register(app)
export.register(app)


def main(argv: list[str] | None = None) -> None:
    """Console-script entry point. The libraries' notes to developers (deprecations) are not
    shown: stderr carries llmgym's own messages, an error being one line."""
    import warnings

    for category in (DeprecationWarning, FutureWarning):
        warnings.filterwarnings("ignore", category=category)
    app(args=argv if argv is not None else sys.argv[1:], prog_name="llmgym")


if __name__ == "__main__":
    main()
