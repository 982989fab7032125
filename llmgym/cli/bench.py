"""``llmgym baselines train`` and ``llmgym bench``: register them on the main typer app.

Example:
    >>> import typer
    >>> app = typer.Typer()
    >>> register(app)
    >>> sorted(c.name for c in app.registered_commands), [g.name for g in app.registered_groups]
    (['bench'], ['baselines'])
"""

from __future__ import annotations

import importlib.util
import time
from typing import TYPE_CHECKING

import typer
from typer.core import TyperCommand

from llmgym.bench.request import DEFAULT_OUTPUT, RAY_LOCAL
from llmgym.cli.checks import check_cache, check_output_dir, fail, key_values, missing_extra
from llmgym.envs.registration import base_env_id
from llmgym.errors import AgentError, ConfigError, OutputError, RayBenchError
from llmgym.rl.sections import MAX_THREADS
from llmgym.rollout import MAX_TIMESTEPS, check_count

if TYPE_CHECKING:
    from llmgym.bench.request import BenchRequest


def optional_value(args: list[str], option: str, value: str) -> list[str]:
    """``args`` with ``value`` after each bare ``option`` (last, or followed by another option):
    click's optional-value option (``is_flag=False, flag_value=...``), which typer lacks.

    Example:
        >>> optional_value(["--ray", "--seed", "3"], "--ray", "local")
        ['--ray', 'local', '--seed', '3']
        >>> optional_value(["--ray"], "--ray", "local")
        ['--ray', 'local']
        >>> optional_value(["--ray", "HEAD:6379"], "--ray", "local")
        ['--ray', 'HEAD:6379']
    """
    out = []
    for i, arg in enumerate(args):
        out.append(arg)
        if arg == option and (i + 1 == len(args) or args[i + 1].startswith("-")):
            out.append(value)
    return out


class _BenchCommand(TyperCommand):
    """``bench``, whose ``--ray`` takes an optional address (``--ray`` = ``--ray local``)."""

    def parse_args(self, ctx: typer.Context, args: list[str]) -> list[str]:
        return super().parse_args(ctx, optional_value(args, "--ray", RAY_LOCAL))


def baselines_train(
    env_id: str = typer.Argument(..., help="Env id, e.g. CartPole-v1 or Text-CartPole-v1."),
    algo: str = typer.Option("ppo", help="ppo, dqn or a2c."),
    timesteps: int | None = typer.Option(None, min=1, help="Override the recorded budget."),
    seed: int = typer.Option(0, min=0, help="Training seed."),
    force: bool = typer.Option(False, help="Retrain even if a cached model exists."),
    threads: int = typer.Option(
        1, min=1, max=MAX_THREADS, help="Torch threads (small MLPs run best on 1)."
    ),
) -> None:
    """Train SB3 on the base numeric env with the recorded hyperparameters; cache it."""
    try:
        if timesteps is not None:
            check_count(timesteps, "--timesteps", MAX_TIMESTEPS)
    except ConfigError as err:
        raise fail(str(err)) from None
    check_cache()
    try:
        import torch

        from llmgym.baselines import sb3
    except ModuleNotFoundError as err:
        raise missing_extra(err, "Training SB3") from None
    torch.set_num_threads(threads)
    import gymnasium as gym

    base_id = base_env_id(env_id)
    if base_id not in gym.registry and env_id in gym.registry:
        base_id = env_id  # language-native: the text env is its own base env
    try:
        path = sb3.model_path(base_id, algo, seed, timesteps)
        cached = path.exists() and not force
        start = time.perf_counter()
        sb3.train(base_id, algo, seed=seed, timesteps=timesteps, force=force)
    except (AgentError, OutputError) as err:
        raise fail(str(err)) from None
    except ModuleNotFoundError as err:
        raise missing_extra(err, "Training SB3") from None
    config = sb3.config_for(base_id, algo)
    verb = "Reused cached" if cached else f"Trained in {time.perf_counter() - start:.0f} s:"
    typer.echo(f"{verb} {path}")
    typer.echo(f"Hyperparameters ({config.source}): {config.hyperparams}")


AGENTS_HELP = (
    "Comma-separated: random, optimal, sb3-ppo, sb3-dqn, sb3-a2c, llm:MODEL "
    "(options after commas: llm:MODEL,mode=generate) and a trained policy "
    "llm:MODEL@RUN_DIR (a llmgym train run directory)."
)
RAY_HELP = (
    "Run the cells' chunks of seeds as Ray tasks. Bare --ray (or 'local'): "
    "ray.init() here (the cluster RAY_ADDRESS names or this machine runs, else a new "
    "one with this machine's cores); 'auto' (the cluster this machine joined) or "
    "HEAD:6379 (a cluster's head). Needs the ray extra."
)


def bench(
    suite: str = typer.Option("classic", help="classic, language or all."),
    agents: str = typer.Option("random,optimal", help=AGENTS_HELP),
    episodes: int | None = typer.Option(None, min=1, help="Episodes per env (default: per env)."),
    seed: int = typer.Option(0, min=0, help="Episode i of every cell uses reset(seed=SEED + i)."),
    output: str | None = typer.Option(
        None, help=f"Folder of the rows and the leaderboard. Default: {DEFAULT_OUTPUT}."
    ),
    envs: str | None = typer.Option(None, help="Comma-separated env ids (replaces the suite)."),
    batch_size: int = typer.Option(32, min=1, help="Episodes played in lockstep per agent call."),
    ray: str | None = typer.Option(None, metavar="[ADDRESS]", help=RAY_HELP),
    fresh: bool = typer.Option(
        False, help="Remove the bench files --output holds first (a folder holds one bench)."
    ),
    env_kwarg: list[str] | None = typer.Option(  # noqa: B008 (a list option)
        None,
        help="KEY=VALUE passed to gym.make of every env and to the baseline agents "
        "(repeatable), e.g. action_names=alt; the leaderboard labels the envs with them.",
    ),
) -> None:
    """Score agents on a suite over fixed seeds: JSONL rows, leaderboard.md and .png.
    Finished episodes are skipped on rerun, so an interrupted run resumes. A folder holds one
    bench: a rerun may add envs or agents on the same --seed, but one that would play a cell
    on other seeds (another --seed or --episodes) or with other --env-kwarg options is refused;
    pass another --output or --fresh.

    Variants: --env-kwarg KEY=VALUE makes every env with that option, e.g.
    llmgym bench --envs Text-Blackjack-v1 --env-kwarg action_names=alt
    (the leaderboard labels each env with its options, in brackets).

    Add a policy you trained (llmgym train) as llm:MODEL@RUN_DIR, e.g.
    llmgym bench --envs Text-Taxi-v4 --agents random,llm:smollm2-135m@RUN_DIR
    (MODEL: the base model the run trained). LLM agents act greedily.

    SB3 agents play the cached policy ($LLMGYM_CACHE, default
    ~/.cache/llmgym/baselines), else the one committed in a checkout
    (benchmarks/results/classic/sb3/); only when neither exists is one
    trained, and a line says so."""
    from llmgym.bench.request import bench_request
    from llmgym.resources import check_display

    env_kwargs = key_values(env_kwarg, "--env-kwarg")
    options = dict(envs=envs, suite=suite, agents=agents, seed=seed, episodes=episodes)
    try:
        check_display(env_kwargs)
        request = bench_request(
            **options, output=output, batch_size=batch_size, ray=ray, env_kwargs=env_kwargs
        )
    except ValueError as err:  # AgentError, ConfigError
        raise fail(str(err)) from None
    check_output_dir(request.output)
    check_cache()
    try:
        request.claim_folder(fresh)
    except (ConfigError, OutputError) as err:  # another bench; a disk error naming the path
        raise fail(str(err)) from None
    _play(request)
    _report(request)


def _first_line(err: Exception) -> str:
    """An error's first line (its class name when it has no text)."""
    return str(err).splitlines()[0] if str(err) else type(err).__name__


def _play(request: BenchRequest) -> None:
    """``llmgym.bench.play.play``, its errors as one sentence and Ctrl-C as exit 130."""
    from llmgym.bench.play import play

    try:
        play(request)
    except ModuleNotFoundError as err:
        raise missing_extra(err, "The bench") from None
    except (ValueError, OSError, RayBenchError) as err:  # AgentError, a missing model,
        # a damaged file, a Ray cluster that cannot be reached or lost a task for good
        raise fail(_first_line(err)) from None
    except KeyboardInterrupt:
        typer.echo(f"Interrupted: finished episodes are in {request.output}; rerun to resume.")
        raise typer.Exit(130) from None


def _report(request: BenchRequest) -> None:
    """Write the leaderboard of the seeds ``request`` names and print it."""
    from llmgym.bench.report import markdown_table, write_report

    out, chart = request.output, importlib.util.find_spec("matplotlib") is not None
    try:
        stats = write_report(
            out,
            request.env_ids,
            request.agents,
            request.command,
            chart,
            request.seeds,
            request.env_kwargs or None,
        )
    except OSError as err:  # OutputError: a full disk or a read-only folder
        raise fail(_first_line(err)) from None
    typer.echo(markdown_table(stats))
    if chart:
        typer.echo(f"Wrote {out / 'leaderboard.md'} and {out / 'leaderboard.png'}")
    else:
        typer.echo(
            f"Wrote {out / 'leaderboard.md'}; no chart: matplotlib is not installed "
            "(pip install 'llmgym[baselines]')."
        )


def register(app: typer.Typer) -> None:
    """Add the ``baselines`` group (``train``) and the ``bench`` command to ``app``."""
    baselines = typer.Typer(help="Classical RL baselines (Stable-Baselines3) on the base envs.")
    baselines.command("train")(baselines_train)
    app.add_typer(baselines, name="baselines")
    app.command("bench", cls=_BenchCommand)(bench)
