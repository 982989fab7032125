"""``llmgym recipes``: the training recipes, each with what its committed runs reached.

Example:
    >>> from typer.testing import CliRunner
    >>> app = typer.Typer()
    >>> register(app)
    >>> result = CliRunner().invoke(app, ["Text-FrozenLake-v1"], terminal_width=200)
    >>> result.exit_code, "frozenlake-lm-ppo-g08" in result.output
    (0, True)
"""

from __future__ import annotations

import typer
from rich.console import Console
from rich.table import Table

from llmgym.cli.checks import fail
from llmgym.errors import ConfigError
from llmgym.rl import recipes as library


def recipes(
    env_id: str = typer.Argument("", help="Only this env's recipes, e.g. Text-Blackjack-v1."),
    experiments: bool = typer.Option(
        False, "--experiments", help="Also list the research variants (experiments/recipes)."
    ),
) -> None:
    """List the training recipes: env, algorithm, policy family, mode, what each seed's run
    reached, how often it met its goal, and its cost. `llmgym train ENV --recipe NAME` runs one."""
    try:
        found = library.all_recipes(package_only=not experiments)
    except ConfigError as error:
        raise fail(str(error)) from None
    if env_id:
        found = [r for r in found if r.env == env_id]
        if not found:
            raise fail(f"No recipe for {env_id!r}; `llmgym recipes` lists every env's.")
    table = Table(title="Recipes (* the env's default; `llmgym train ENV --recipe NAME`)")
    table.add_column("recipe", no_wrap=True)
    for column in ("env", "algo", "policy", "mode", "reached, per seed", "goal", "met",
                   "episodes", "CPU min"):  # fmt: skip
        table.add_column(column)
    for recipe in found:
        table.add_row(*_row(recipe))
    Console(highlight=False).print(table)  # made here: the terminal's width now


def _row(recipe: library.Recipe) -> list[str]:
    """One table row: the recipe and its committed records."""
    records = library.committed_records(recipe)
    runs = list(records.values())
    values = ", ".join(_value(r.get("eval_value")) for r in runs) or "-"
    episodes = ", ".join(str(r.get("episodes", "-")) for r in runs) or "-"
    minutes = ", ".join(_minutes(r) for r in runs if "wall_s" in r) or "-"
    kwargs = ", ".join(f"{k}={v}" for k, v in recipe.env_kwargs.items() if k != "config")
    env = recipe.env.removeprefix("Text-") + (f" ({kwargs})" if kwargs else "")
    name = recipe.name + (" *" if recipe.default else "")
    met = library.describe_goal(recipe, records) if runs else "-"
    goal = recipe.goal.get("text", "-")
    return [name, env, recipe.algo, recipe.policy, recipe.mode, values, goal, met, episodes,
            minutes]  # fmt: skip


def _minutes(record: dict) -> str:
    """The run's minutes; ``+`` where it was resumed (the record holds its last part only)."""
    return f"{record['wall_s'] / 60:.0f}" + ("+" if record.get("resumed") else "")


def _value(value: object) -> str:
    return f"{value:.4g}" if isinstance(value, (int, float)) else "-"


def register(app: typer.Typer) -> None:
    """Add ``recipes`` to the ``llmgym`` app."""
    app.command()(recipes)


__all__ = ["register"]
