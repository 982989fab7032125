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
import shlex
import time
from pathlib import Path
from typing import TYPE_CHECKING

import typer
from typer.core import TyperCommand

from llmgym.agents.registry import check_agent_name, split_agent_names
from llmgym.cli.checks import check_cache, check_output_dir, fail, missing_extra
from llmgym.envs.registration import base_env_id
from llmgym.errors import AgentError, ConfigError, OutputError, RayBenchError
from llmgym.rl.config import MAX_THREADS
from llmgym.rollout import MAX_ENVS, MAX_TIMESTEPS, check_count

if TYPE_CHECKING:
    from rich.progress import Progress

#: What a bare ``--ray`` means: the Ray session ``ray.init()`` finds or starts on this machine.
RAY_LOCAL = "local"


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


#: Where ``llmgym bench`` writes without ``--output``: outside the repository's committed
#: results (``runs/`` is git-ignored); the committed leaderboard's scripts name theirs.
DEFAULT_OUTPUT = "runs/bench"


class LogLines:
    """Progress as lines where the output is not a terminal (a log file, CI), since the bar
    is drawn only on a terminal: one line as each cell starts, and one at most every
    ``every`` seconds as its episodes finish.

    >>> import io
    >>> from rich.console import Console
    >>> from rich.progress import Progress
    >>> log = LogLines(Progress(console=Console(file=io.StringIO())), every=0)
    >>> log.cell("Text-CliffWalking-v1 random", 2)
    >>> log.episode({"return": -13.0})
    >>> print(log.progress.console.file.getvalue(), end="")
    Text-CliffWalking-v1 random: 2 episodes to play
    Text-CliffWalking-v1 random: 1/2 episodes, last return -13.0
    """

    def __init__(self, progress: Progress, every: float = 60.0) -> None:
        self.progress, self.every = progress, every
        self.on = not progress.console.is_terminal
        self.name, self.total, self.done, self.last = "", 0, 0, 0.0

    def cell(self, name: str, n: int) -> None:
        self.name, self.total, self.done, self.last = name, n, 0, time.monotonic()
        if self.on:
            self.progress.console.print(f"{self.name}: {n} episodes to play", highlight=False)

    def episode(self, row: dict[str, object]) -> None:
        self.done += 1
        now = time.monotonic()
        if self.on and (now - self.last >= self.every or self.done == self.total):
            self.last = now
            self.progress.console.print(
                f"{self.name}: {self.done}/{self.total} episodes, last return {row['return']}",
                highlight=False,
            )


def bench_command(
    envs: str | None,
    suite: str,
    agents: list[str],
    seed: int,
    episodes: int | None,
    output: Path,
    batch_size: int = 32,
    ray: str | None = None,
) -> str:
    """The ``llmgym bench`` command line as run (the leaderboard's "Made by" line): ``--envs``
    where it replaced the suite, options at their defaults left out.

    Example:
        >>> bench_command("Text-Taxi-v4", "classic", ["random", "llm:m"], 0, 30, Path("o"))
        'llmgym bench --envs Text-Taxi-v4 --agents random,llm:m --seed 0 --episodes 30 --output o'
        >>> bench_command(None, "classic", ["optimal"], 1, None, Path("o"), 10, "local")
        'llmgym bench --suite classic --agents optimal --seed 1 --output o --batch-size 10 --ray'
    """
    parts = ["llmgym bench", f"--envs {shlex.quote(envs)}" if envs else f"--suite {suite}"]
    parts += [f"--agents {shlex.quote(','.join(agents))}", f"--seed {seed}"]
    if episodes is not None:
        parts.append(f"--episodes {episodes}")
    parts.append(f"--output {shlex.quote(str(output))}")
    if batch_size != 32:
        parts.append(f"--batch-size {batch_size}")
    if ray is not None:
        parts.append("--ray" if ray == RAY_LOCAL else f"--ray {shlex.quote(ray)}")
    return " ".join(parts)


def register(app: typer.Typer) -> None:
    """Add the ``baselines`` group (``train``) and the ``bench`` command to ``app``."""
    baselines = typer.Typer(help="Classical RL baselines (Stable-Baselines3) on the base envs.")

    @baselines.command("train")
    def train(
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

    app.add_typer(baselines, name="baselines")

    @app.command("bench", cls=_BenchCommand)
    def bench(
        suite: str = typer.Option("classic", help="classic, language or all."),
        agents: str = typer.Option(
            "random,optimal",
            help="Comma-separated: random, optimal, sb3-ppo, sb3-dqn, sb3-a2c, llm:MODEL "
            "(options after commas: llm:MODEL,mode=generate) and a trained policy "
            "llm:MODEL@RUN_DIR (a llmgym train run directory).",
        ),
        episodes: int | None = typer.Option(
            None, min=1, help="Episodes per env (default: per env)."
        ),
        seed: int = typer.Option(
            0, min=0, help="Episode i of every cell uses reset(seed=SEED + i)."
        ),
        output: str | None = typer.Option(
            None, help=f"Folder of the rows and the leaderboard. Default: {DEFAULT_OUTPUT}."
        ),
        envs: str | None = typer.Option(None, help="Comma-separated env ids (replaces the suite)."),
        batch_size: int = typer.Option(
            32, min=1, help="Episodes played in lockstep per agent call."
        ),
        ray: str | None = typer.Option(
            None,
            metavar="[ADDRESS]",
            help="Run the cells' chunks of seeds as Ray tasks. Bare --ray (or 'local'): "
            "ray.init() here (the cluster RAY_ADDRESS names or this machine runs, else a new "
            "one with this machine's cores); 'auto' (the cluster this machine joined) or "
            "HEAD:6379 (a cluster's head). Needs the ray extra.",
        ),
    ) -> None:
        """Score agents on a suite over fixed seeds: JSONL rows, leaderboard.md and .png.
        Finished episodes are skipped on rerun, so an interrupted run resumes.

        Add a policy you trained (llmgym train) as llm:MODEL@RUN_DIR, e.g.
        llmgym bench --envs Text-Taxi-v4 --agents random,llm:smollm2-135m@RUN_DIR
        (MODEL: the base model the run trained). LLM agents act greedily.

        SB3 agents play the cached policy ($LLMGYM_CACHE, default
        ~/.cache/llmgym/baselines), else the one committed in a checkout
        (benchmarks/results/classic/sb3/); only when neither exists is one
        trained, and a line says so."""
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn

        from llmgym.bench.ray_runner import run_bench_ray
        from llmgym.bench.report import markdown_table, write_report
        from llmgym.bench.runner import load_rows, pending_seeds, run_bench
        from llmgym.bench.suites import suite_envs

        names = split_agent_names(agents)
        if not names:
            raise fail(f"--agents {agents!r} names no agent; pass e.g. --agents random,optimal.")
        try:
            for name in names:
                check_agent_name(name)  # an llm: agent's options and run too (loads nothing)
        except AgentError as err:
            raise fail(str(err)) from None
        if envs is not None and not [e for e in envs.split(",") if e.strip()]:
            raise fail(f"--envs {envs!r} names no env; pass e.g. --envs Text-Blackjack-v1.")
        try:
            env_ids = [e.strip() for e in envs.split(",") if e.strip()] if envs else None
            env_ids = env_ids or suite_envs(suite)
        except ValueError as err:
            raise fail(str(err)) from None
        if not env_ids:
            raise fail(f"Suite {suite!r} has no envs yet; pass --envs or another --suite.")
        import gymnasium as gym

        unknown = [e for e in env_ids if e not in gym.registry]
        if unknown:
            raise fail(f"Unknown environment {unknown[0]!r}: run `llmgym envs` to list them.")
        try:
            if episodes is not None:
                check_count(episodes, "--episodes")
            check_count(batch_size, "--batch-size", MAX_ENVS)
        except ConfigError as err:
            raise fail(str(err)) from None
        out = Path(output) if output else Path(DEFAULT_OUTPUT)
        check_output_dir(out)
        check_cache()
        command = bench_command(envs, suite, names, seed, episodes, out, batch_size, ray)
        try:
            done = {(r["env_id"], r["agent"], r["seed"]) for r in load_rows(out)}
        except (KeyError, TypeError):
            raise fail(
                f"{out / 'episodes.jsonl'} has rows llmgym did not write; move it."
            ) from None
        if ray is not None and importlib.util.find_spec("ray") is None:
            raise fail('ray is not installed: pip install "llmgym[ray]".')
        todo = pending_seeds(env_ids, names, episodes, seed, done)
        progress = Progress(
            "{task.description}", BarColumn(), MofNCompleteColumn(), TimeElapsedColumn()
        )
        skipped: list[str] = []  # cells no agent could play
        log = LogLines(progress)  # what a redirected log sees instead of the bar
        try:
            with progress:
                total = sum(len(s) for s in todo.values())
                task = progress.add_task("bench", total=total)

                def on_cell(env_id: str, agent: str, n: int) -> None:
                    progress.update(task, description=f"{env_id} {agent}")
                    log.cell(f"{env_id} {agent}", n)

                def on_skip(env_id: str, agent: str, reason: str) -> None:
                    skipped.append(reason)
                    progress.console.print(f"skip {agent} on {env_id}: {reason}")

                def advance(row: dict[str, object]) -> None:
                    progress.advance(task)
                    log.episode(row)

                common = dict(episodes=episodes, seed=seed, output=out, batch_size=batch_size)
                if ray is None:
                    run_bench(
                        env_ids,
                        names,
                        **common,
                        keep_rows=False,
                        on_episode=advance,
                        on_cell=on_cell,
                        on_skip=on_skip,
                    )
                else:
                    progress.update(task, description=f"bench on Ray ({ray})")
                    log.cell(f"bench on Ray ({ray})", total)
                    address = None if ray == RAY_LOCAL else ray
                    run_bench_ray(
                        env_ids,
                        names,
                        **common,
                        keep_rows=False,
                        address=address,
                        on_episode=advance,
                        on_skip=on_skip,
                    )
        except ModuleNotFoundError as err:
            raise missing_extra(err, "The bench") from None
        except (ValueError, OSError, RayBenchError) as err:  # AgentError, a missing model,
            # a damaged file, a Ray cluster that cannot be reached or lost a task for good
            raise fail(str(err).splitlines()[0] if str(err) else type(err).__name__) from None
        except KeyboardInterrupt:
            typer.echo(f"Interrupted: finished episodes are in {out}; rerun to resume.")
            raise typer.Exit(130) from None
        if skipped and len(skipped) == len(env_ids) * len(names):  # nothing could be played
            raise fail(f"No agent asked for can play these envs ({skipped[0].rstrip('.')}).")
        try:
            chart = importlib.util.find_spec("matplotlib") is not None
            stats = write_report(out, env_ids, names, command, chart=chart)
        except OSError as err:  # OutputError: a full disk or a read-only folder
            raise fail(str(err).splitlines()[0] if str(err) else type(err).__name__) from None
        typer.echo(markdown_table(stats))
        if chart:
            typer.echo(f"Wrote {out / 'leaderboard.md'} and {out / 'leaderboard.png'}")
        else:
            typer.echo(
                f"Wrote {out / 'leaderboard.md'}; no chart: matplotlib is not installed "
                "(pip install 'llmgym[baselines]')."
            )
