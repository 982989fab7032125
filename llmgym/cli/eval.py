"""The ``llmgym eval`` command; ``register(app)`` adds it to the main typer app.

Example:
    >>> import typer
    >>> from typer.testing import CliRunner
    >>> app = typer.Typer()
    >>> register(app)
    >>> result = CliRunner().invoke(app, ["Text-Blackjack-v1", "--agent", "random",
    ...     "--episodes", "5", "--no-progress"])
    >>> result.exit_code, "mean return" in result.output
    (0, True)
"""

from __future__ import annotations

import typer
from rich.console import Console

from llmgym.cli.checks import (
    check_device,
    check_env_kwargs,
    check_output_file,
    fail,
    key_values,
    missing_extra,
)
from llmgym.errors import AgentError, OutputError


def eval_command(
    env_id: str = typer.Argument(..., help="A text env id, e.g. Text-Blackjack-v1."),
    agent: str = typer.Option(
        "llm:smollm2-135m",
        help="random, optimal, sb3-ppo, sb3-dqn, sb3-a2c, llm:MODEL (a short name, Hub id or "
        "directory), or llm:MODEL@RUN_DIR (a trained run or policy directory).",
    ),
    mode: str | None = typer.Option(
        None, help="LLM acting mode: score or generate (default: a trained policy's, else score)."
    ),
    episodes: int = typer.Option(20, min=1, help="Episodes to run (episode j has seed S+j)."),
    num_envs: int = typer.Option(8, min=1, help="Envs acted for in one batched call."),
    seed: int = typer.Option(
        0, min=0, help="Seed of the first episode and of the agent's sampling."
    ),
    output: str | None = typer.Option(None, help="Write the result as JSON to this file."),
    temperature: float | None = typer.Option(None, help="LLM sampling temperature."),
    greedy: bool = typer.Option(False, help="LLM takes the most likely action."),
    history: int | None = typer.Option(None, help="LLM: past turns kept in the prompt."),
    device: str = typer.Option("auto", help="auto, cpu, cuda or mps."),
    backend: str = typer.Option(
        "hf",
        help="LLM: hf (transformers), vllm (a vLLM server) or vllm-inprocess (vllm.LLM here).",
    ),
    vllm_url: str = typer.Option("", help="LLM with --backend vllm: the server, http://HOST:PORT."),
    progress: bool = typer.Option(True, help="Show a progress bar."),
    exact: bool = typer.Option(
        False,
        help="Exact expected return of the greedy policy (Blackjack, FrozenLake, Taxi, "
        "CliffWalking) from the transition model, instead of sampled episodes.",
    ),
    env_kwarg: list[str] | None = typer.Option(  # noqa: B008 (a list option)
        None, help="KEY=VALUE passed to gym.make and baseline agents (repeatable)."
    ),
) -> None:
    """Evaluate an agent: mean return with a 95% CI, parse rate, env-steps/s."""
    from llmgym.agents.evaluate import evaluate, format_result

    env_kwargs = key_values(env_kwarg, "--env-kwarg")
    if env_kwargs:
        check_env_kwargs(env_id, env_kwargs)
    check_device(device)
    if output is not None:
        check_output_file(output)
    try:
        result = evaluate(
            env_id,
            agent,
            mode,
            episodes,
            num_envs,
            seed,
            output,
            progress=progress,
            temperature=temperature,
            greedy=greedy or exact or None,
            history=history,
            device=device,
            backend=backend if backend != "hf" else None,
            vllm_url=vllm_url or None,
            exact=exact,
            env_kwargs=env_kwargs,
            keep_returns=output is not None,  # only --output lists them
        )
    except (AgentError, OutputError) as error:  # OutputError: --output cannot be written
        raise fail(str(error)) from None
    except ImportError as error:  # the agent needs an extra that is not installed
        raise missing_extra(error, f"Agent {agent!r}") from None
    except ValueError as error:  # unknown env, mode, model (ModelNotFoundError), option values
        raise fail(str(error).splitlines()[0]) from None
    Console(highlight=False).print(format_result(result))
    if output is not None:
        Console(highlight=False).print(f"wrote {output}")


def register(app: typer.Typer) -> None:
    """Add ``eval`` to ``app``."""
    app.command("eval")(eval_command)


__all__ = ["eval_command", "register"]
