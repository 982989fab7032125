"""``llmgym envs`` and ``llmgym play``: list the registered text envs, play one by hand.

Example:
    >>> import typer
    >>> from typer.testing import CliRunner
    >>> app = typer.Typer()
    >>> register(app)
    >>> result = CliRunner().invoke(app, ["envs"])
    >>> result.exit_code, "Text-CartPole-v1" in result.output
    (0, True)
"""

from __future__ import annotations

import sys
from typing import Any

import gymnasium as gym
import typer
from rich.console import Console
from rich.table import Table

import llmgym
from llmgym import rollout
from llmgym.cli.checks import fail
from llmgym.envs.registration import check_env_id
from llmgym.errors import ConfigError

console = Console(highlight=False)
#: The longest answer line ``llmgym play`` reads (64 KiB): longer input ends the game.
MAX_LINE_BYTES = 1 << 16


def read_answer(prompt: str) -> str:
    """One answer line: typed at a terminal (with line editing), else read from stdin in at
    most ``MAX_LINE_BYTES`` (a longer line, e.g. from ``/dev/zero``, is refused in one sentence
    without being held in memory). ``EOFError`` at the end of the input.

    Example:
        >>> import io
        >>> sys.stdin = io.TextIOWrapper(io.BytesIO(b"hit\\n"))
        >>> read_answer("> ")
        > 'hit'
        >>> sys.stdin = sys.__stdin__
    """
    if sys.stdin.isatty():
        return console.input(prompt)
    console.print(prompt, end="")
    line = sys.stdin.buffer.readline(MAX_LINE_BYTES + 1)
    if not line:
        raise EOFError
    if len(line) > MAX_LINE_BYTES:
        raise fail(f"An answer line is above {MAX_LINE_BYTES:,} bytes; answer in fewer.")
    return line.decode("utf-8", "replace").rstrip("\r\n")


def make_env(env_id: str, **kwargs: Any) -> gym.Env:
    """``gym.make`` with a one-sentence error for unknown ids."""
    try:
        check_env_id(env_id)
    except ConfigError as error:
        raise fail(str(error)) from None
    return gym.make(env_id, **kwargs)


def _actions_summary(env: gym.Env, valid_actions: list[str]) -> str:
    if len(valid_actions) > 4:
        return ", ".join(valid_actions[:3]) + f", ... ({len(valid_actions)} at reset)"
    if valid_actions:
        return ", ".join(valid_actions)
    space = env.unwrapped.action_space
    shape = getattr(space, "shape", None)
    return f"continuous {shape}" if shape else "free text"


def envs() -> None:
    """List the registered Text-* environments."""
    table = Table(title="llmgym text environments")
    table.add_column("id", no_wrap=True)
    for column in ("base env", "actions", "threshold", "max steps"):
        table.add_column(column)
    for env_id in llmgym.text_env_ids():
        spec = gym.spec(env_id)
        try:
            env = gym.make(env_id)
            _, info = env.reset(seed=0)
        except ImportError as error:  # an optional extra (textworld, minigrid, ...) is missing
            table.add_row(env_id, "-", f"needs: {error.name}", "-", "-")
            continue
        base = spec.kwargs.get("base_id", "language-native")
        threshold = "-" if spec.reward_threshold is None else f"{spec.reward_threshold:g}"
        steps = "-" if spec.max_episode_steps is None else str(spec.max_episode_steps)
        table.add_row(env_id, base, _actions_summary(env, info["valid_actions"]), threshold, steps)
        env.close()
    console.print(table)


def _action_name(action: Any, info: dict[str, Any]) -> str:
    names = info["valid_actions"]
    if names and isinstance(action, int) and 0 <= action < len(names):
        return f"{names[action]} ({action})"
    return repr(action)


def play(
    env_id: str = typer.Argument(..., help="A text env id, e.g. Text-Blackjack-v1."),
    seed: int = typer.Option(0, min=0, help="Seed of the first episode (later ones add 1)."),
    episodes: int = typer.Option(1, min=1, help="Episodes to play."),
) -> None:
    """Play a text env yourself: read the prompt, type an answer (Ctrl-D or Ctrl-C to stop)."""
    try:
        rollout.check_count(episodes, "--episodes")
    except ConfigError as err:
        raise fail(str(err)) from None
    env = make_env(env_id)
    current: list[rollout.Episode] = []

    def show(step: rollout.Step) -> None:
        parse = step.info["parse"]
        style = "green" if parse["ok"] else "yellow"
        console.print(
            f"[{style}]parsed by {parse['method']}: {_action_name(parse['action'], step.info)}"
            + (f" ({parse['error']})" if parse["error"] else "")
            + f"[/]  reward {step.reward:+g}"
        )

    def track(live: list[rollout.Episode]) -> None:
        current[:] = live

    def ask(observations: list[str], infos: list[dict[str, Any]]) -> list[str]:
        episode = current[0]
        if episode.steps:
            show(episode.steps[-1])
        else:
            console.rule(f"{env_id}  episode {episode.index + 1}/{episodes}  seed {episode.seed}")
            console.print(infos[0]["system_prompt"], style="dim")
        console.print(f"\n{observations[0]}")
        return [read_answer("[bold cyan]your answer> [/]")]

    def episode_over(_slot: int, episode: rollout.Episode) -> None:
        show(episode.steps[-1])
        outcome = "truncated" if episode.truncated else "terminated"
        parsed = sum(s.parse_ok for s in episode.steps)
        console.print(
            f"\n[bold]Episode over ({outcome}):[/] return {episode.ret:+g} in "
            f"{episode.length} steps, {parsed}/{episode.length} answers parsed."
        )

    try:
        rollout.play(
            ask,
            [env],
            range(seed, seed + episodes),
            before_act=track,
            on_end=episode_over,
            keep=False,
        )
    except (EOFError, KeyboardInterrupt):
        console.print("\nBye.")
    finally:
        env.close()


def register(app: typer.Typer) -> None:
    """Add ``envs`` and ``play`` to ``app``."""
    app.command()(envs)
    app.command()(play)


__all__ = ["envs", "make_env", "play", "register"]
