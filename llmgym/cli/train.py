"""``llmgym train`` and ``llmgym plot``: online RL for an LLM agent in a text env from one
command, and its learning curve.

Example:
    >>> import typer
    >>> app = typer.Typer()
    >>> register(app)
    >>> sorted(c.callback.__name__ for c in app.registered_commands)
    ['plot', 'train']
"""

from __future__ import annotations

import json
import math
import shlex
import sys
import time
from pathlib import Path
from typing import Any

import typer
from rich.console import Console
from rich.markup import escape

from llmgym.cli.checks import (
    check_output_dir,
    check_output_file,
    fail,
    key_values,
)
from llmgym.errors import ConfigError, LLMGymError, TrainingError
from llmgym.rl.algorithms import ALGORITHMS, summary_help
from llmgym.rl.config import TrainConfig, default_value, field_doc
from llmgym.rl.sections import count_or_auto
from llmgym.rollout import check_count

console = Console(highlight=False)

#: The options that set a config key (parameter -> dotted key). Their defaults and help come from
#: the config dataclasses; a value the command line does not give is left to the algorithm's
#: config, which checks every value (one sentence, exit code 2, before any model loads).
CONFIG_OPTIONS = {
    "model": "policy.model",
    "mode": "policy.mode",
    "num_envs": "run.num_envs",
    "steps": "run.total_env_steps",
    "episodes": "run.total_episodes",
    "episodes_per_update": "run.episodes_per_update",
    "sft": "sft.source",
    "lr": "optim.learning_rate",
    "seed": "run.seed",
    "eval_every": "eval.every",
    "eval_episodes": "eval.episodes",
    "stop_at": "eval.stop_at",
    "threads": "run.num_threads",
    "device": "run.device",
    "dtype": "policy.dtype",
    "backend": "policy.backend",
    "vllm_url": "policy.vllm_url",
    "vllm_model": "policy.vllm_model",
}


def option_help(key: str) -> str:
    """The help of the option that sets config ``key``: the field's docstring and the key."""
    return escape(f"{field_doc(TrainConfig, key).replace('``', '')} (config key {key})")


def _config_option(param: str, *flags: str) -> Any:
    """The typer option of ``CONFIG_OPTIONS[param]``: its default and help from the dataclass."""
    key = CONFIG_OPTIONS[param]
    return typer.Option(default_value(TrainConfig, key), *flags, help=option_help(key))


def train(
    ctx: typer.Context,
    env_id: str = typer.Argument(..., help="Text env id, e.g. Text-Blackjack-v1."),
    recipe: str = typer.Option(
        "",
        help="A recipe's name or .toml file (`llmgym recipes` lists them). Without it the env's "
        "default recipe applies where the model, algorithm and env kwargs match; `none`: "
        "generic settings (as commands written before recipes). Options and --set override it.",
    ),
    model: str = _config_option("model"),
    algo: str = typer.Option("ppo", help=f"The algorithm. {escape(summary_help())}"),
    mode: str = _config_option("mode"),
    num_envs: str = _config_option("num_envs", "--num-envs"),
    steps: int = _config_option("steps", "--steps"),
    episodes: int = _config_option("episodes", "--episodes"),
    episodes_per_update: int = _config_option("episodes_per_update"),
    sft: str = _config_option("sft", "--sft"),
    output: str = typer.Option("", help="Run directory (default runs/<env>-<algo>-<mode>)."),
    resume: bool = typer.Option(False, "--resume", help="Continue from the newest checkpoint."),
    lr: float = _config_option("lr", "--lr"),
    seed: int = _config_option("seed"),
    eval_every: int = _config_option("eval_every"),
    eval_episodes: int = _config_option("eval_episodes"),
    stop_at: float | None = _config_option("stop_at", "--stop-at"),
    final_eval_episodes: int = typer.Option(
        1000,
        min=1,
        help="Episodes of the start and final evaluations when they are sampled (the exact "
        "method needs none; the method in use is printed) and of the baselines beside them "
        "(default: the recipe's, else 1000).",
    ),
    no_start_eval: bool = typer.Option(
        False,
        "--no-start-eval",
        help="Skip the evaluation before training (config key eval.start=false).",
    ),
    env_kwarg: list[str] = typer.Option(  # noqa: B008
        None, "--env-kwarg", help="KEY=VALUE for gym.make (repeatable), e.g. is_slippery=false."
    ),
    eval_env_kwarg: list[str] = typer.Option(  # noqa: B008
        None,
        "--eval-env-kwarg",
        help="KEY=VALUE the evaluation envs take over --env-kwarg (repeatable), e.g. "
        "map_set=heldout to evaluate on held-out maps (config key eval.env_kwargs).",
    ),
    set_: list[str] = typer.Option(  # noqa: B008
        None,
        "--set",
        help="KEY=VALUE overriding any trainer config field (repeatable; after the options "
        "above), e.g. policy.temperature=0.7 or lora_r=8; null where the field may be None.",
    ),
    threads: int = _config_option("threads", "--threads"),
    device: str = _config_option("device"),
    dtype: str = _config_option("dtype"),
    backend: str = _config_option("backend"),
    vllm_url: str = _config_option("vllm_url"),
    vllm_model: str = _config_option("vllm_model"),
    result_json: str = typer.Option("", help="Also write the result JSON here."),
    policy_out: str = typer.Option(
        "", help="Write the trained policy (small, no optimizer) here (default OUTPUT/policy)."
    ),
    no_progress: bool = typer.Option(
        False, "--no-progress", help="No progress bar (config key run.progress=false)."
    ),
) -> None:
    """Train an LLM agent with online RL in a text env (a recipe, or the env's default one);
    log, checkpoint, evaluate, plot."""
    _check_train_extra()
    plan = _plan(train_request(ctx))
    if result_json:
        check_output_file(result_json, "--result-json")
    command = "llmgym " + " ".join(shlex.quote(a) for a in sys.argv[1:])
    _run(plan, resume, command, result_json, policy_out)


def train_request(ctx: typer.Context) -> Any:
    """The :class:`~llmgym.rl.plan.TrainRequest` of ``llmgym train``'s parsed options: only
    what was given (the others are the recipe's or the config's)."""
    from llmgym.rl.plan import TrainRequest

    p = ctx.params
    if p["sft"] not in ("none", "auto") and not Path(p["sft"]).is_file():
        raise fail(
            f"No SFT demo file at {p['sft']!r}; pass --sft auto, --sft none or a JSONL path."
        )
    given = {key: p[name] for name, key in CONFIG_OPTIONS.items() if _given(ctx, name)}
    if "run.num_envs" in given:  # a number or auto, as the config holds it ("4" -> 4)
        given["run.num_envs"] = count_or_auto(given["run.num_envs"])
    given["run.progress"] = not p["no_progress"]
    if p["no_start_eval"]:
        given["eval.start"] = False
    if p["eval_env_kwarg"]:
        given["eval.env_kwargs"] = key_values(p["eval_env_kwarg"], "--eval-env-kwarg")
    if _given(ctx, "output") and not p["output"].strip():
        raise fail("--output '' names no directory; pass one, or leave --output out.")
    algo = p["algo"] if _given(ctx, "algo") else None
    env = p["env_id"].removeprefix("Text-")
    output = p["output"] or f"runs/{env}-{algo or 'ppo'}-{p['mode']}"
    final = p["final_eval_episodes"] if _given(ctx, "final_eval_episodes") else None
    if final is not None:
        try:
            check_count(final, "--final-eval-episodes")
        except ConfigError as error:
            raise fail(str(error)) from None
    return TrainRequest(
        env_id=p["env_id"],
        algo=algo,
        given=given | key_values(p["set_"], "--set"),
        env_kwargs=key_values(p["env_kwarg"], "--env-kwarg") if p["env_kwarg"] else None,
        recipe=p["recipe"] or None,
        resume=p["resume"],
        output=output,
        final_eval_episodes=final,
    )


def request_from_args(args: list[str]) -> Any:
    """The ``TrainRequest`` of ``llmgym train`` arguments (a record's ``command`` without its
    first two words), parsed as the command line is, without running anything."""
    import typer.main

    app = typer.Typer()
    register(app)
    command = typer.main.get_command(app).commands["train"]
    return train_request(command.make_context("train", list(args)))


def _check_train_extra() -> None:
    try:
        import llmgym.rl.trainer  # noqa: F401
    except ImportError as error:
        raise fail(
            f"Training needs the train extra ({error.name} is missing): "
            "pip install 'llmgym[train]'."
        ) from None


def _plan(request: Any) -> Any:
    """The run's plan, every refusal one sentence (exit code 2) before any model loads."""

    from llmgym.rl import checkpoints
    from llmgym.rl.plan import plan_run

    if request.algo is not None and request.algo not in ALGORITHMS:
        raise fail(f"Unknown --algo {request.algo!r}; choose one of {', '.join(ALGORITHMS)}.")
    check_output_dir(request.output)
    if request.resume and checkpoints.latest(Path(request.output) / "checkpoints") is None:
        raise fail(
            f"No checkpoint to resume in {request.output}; drop --resume or pass a run's --output."
        )
    try:
        return plan_run(request)
    except (LLMGymError, ValueError) as error:
        raise fail(str(error)) from None


def _run(plan: Any, resume: bool, command: str, result_json: str, policy_out: str) -> None:
    """Train the plan's run, then write and print its record."""
    from llmgym.rl import records
    from llmgym.rl.trainer import Trainer

    config, output = plan.config, plan.config.run.output_dir
    start = time.perf_counter()
    try:
        trainer = Trainer(config)
        main = trainer.processes.is_main  # with several processes, the one that writes
        if main:
            _print_start(plan, trainer, resume)
        start_value = records.start_value(trainer, Path(output), plan.final_eval_episodes, resume)
        final = trainer.train(resume, plan.final_eval_episodes, start_eval=start_value)
        weights = trainer.save_policy(policy_out or Path(output) / "policy")
        # every process: the constant-policy check may act collectively
        result = records.result_record(
            trainer, plan, final, start_value, time.perf_counter() - start, command, resume
        )
    except (LLMGymError, ValueError, OSError) as error:  # bad model name, config or files
        raise fail(str(error).splitlines()[0] if str(error) else type(error).__name__) from None
    if not main:
        return
    result["weights"] = str(weights)
    try:  # a full disk or a read-only folder after training: one sentence, exit 2
        png = records.write_results(
            output, result, final, trainer.state.env_steps, result_json, config
        )
    except (LLMGymError, OSError) as error:
        raise fail(str(error).splitlines()[0] if str(error) else type(error).__name__) from None
    _print_end(result, final, trainer, png)


def _print_start(plan: Any, trainer: Any, resume: bool) -> None:
    """The lines before training: the recipe, the run, what --resume did not apply."""
    config = plan.config
    for note in plan.notes:
        console.print(escape(note))
    processes = f", {trainer.processes.num} processes" if trainer.processes.num > 1 else ""
    console.print(
        f"[bold]{plan.algo.upper()}[/] on {config.run.env_id} with {config.policy.model}"
        f"{' (random-init)' if config.policy.backbone == 'random-init' else ''} "
        f"({config.policy.mode} mode, {_trained(config)}), {config.run.num_envs} envs"
        f"{processes}, budget {_budget(config)} -> {config.run.output_dir}"
    )
    if plan.ignored:
        console.print(escape(_not_applied(plan.ignored)))
    if config.optim.average_decay:
        console.print(
            "Evaluations and the saved policies use the weights' average (optim.average_decay="
            f"{config.optim.average_decay}); acting uses the weights themselves."
        )
    if config.eval.start and not resume:
        console.print(
            f"Start evaluation: {trainer.evaluation.plan(plan.final_eval_episodes)}; "
            "--no-start-eval skips it."
        )


def _print_end(result: dict[str, Any], final: dict[str, Any], trainer: Any, png: Any) -> None:
    """The final line: the result beside the start value and the references, and the best."""
    how = "exact value" if final.get("method") == "exact" else f"{final['episodes']} episodes"
    before = result["start_value"]
    before = "not evaluated" if before is None or math.isnan(before) else f"{before:.4f}"
    refs = result["baselines_same_seeds"]
    others = ", ".join(f"{k} {v['mean_return']:.3f}" for k, v in refs.items())
    console.print(
        f"Final eval ({how}): mean return {final['mean_return']:.4f} ± {final['ci95']:.4f} "
        f"(before training {before}; parse rate {final['parse_rate']:.2f})."
        + (f" {others} on the same seeds." if others else "")
        + f" {trainer.state.env_steps} env steps, {trainer.state.episodes_done} episodes, "
        f"{result['wall_s'] / 60:.1f} min. Plot: {png}"
    )
    best = trainer.state.best_eval
    if best is not None and best["value"] > final["mean_return"]:
        console.print(
            f"Best evaluation: {best['value']:.4f} ({best['method']}) at iteration "
            f"{best['iteration']} ({best['episodes']} episodes); that policy is kept in "
            f"{best['weights']}."
        )


def _given(ctx: typer.Context, name: str) -> bool:
    """Whether option ``name`` was given on the command line (not its default)."""
    return getattr(ctx.get_parameter_source(name), "name", "DEFAULT") != "DEFAULT"


def _trained(config: Any) -> str:
    head = " + action head" if config.policy.action_head and config.policy.mode == "score" else ""
    if not config.optim.train_backbone:
        return f"frozen LM{head}"
    return ("LoRA" if config.lora.enabled else "full fine-tune") + head


def _budget(config: Any) -> str:
    """The budget that applies, as the run spends it: an env-step budget stops the last
    collection when it is spent (GRPO plays its groups whole and checks it between updates);
    an episode budget runs whole updates (``--episodes 6`` with 4 per update trains 8); with
    both, whichever comes first.

    Example:
        >>> from types import SimpleNamespace as NS
        >>> _budget(NS(algo="ppo", run=NS(total_env_steps=32, total_episodes=0)))
        '32 env steps (the last collection stops when they are spent)'
        >>> _budget(NS(algo="grpo", run=NS(total_env_steps=500, total_episodes=6,
        ...                                episodes_per_update=4)))
        '8 episodes (2 updates of 4) or 500 env steps (checked after each update), whichever first'
    """
    run = config.run
    steps = f"{run.total_env_steps} env steps"
    if getattr(config, "algo", "") == "grpo":  # groups are played whole
        steps += " (checked after each update)"
    else:
        steps += " (the last collection stops when they are spent)"
    if not run.total_episodes:
        return steps
    updates = math.ceil(run.total_episodes / run.episodes_per_update)
    episodes = f"{updates * run.episodes_per_update} episodes ({updates} updates of "
    return f"{episodes}{run.episodes_per_update}) or {steps}, whichever first"


def _not_applied(ignored: dict[str, tuple[Any, Any]]) -> str:
    """A sentence naming the options given to ``--resume`` that the run's own config overrides
    (``RunPlan.ignored``)."""
    labels = {key: f"--{name.replace('_', '-')}" for name, key in CONFIG_OPTIONS.items()}
    parts = []
    for key, (new, old) in ignored.items():
        option = f"{labels[key]} {new}" if key in labels else f"--set {key}={new}"
        parts.append(f"{option} (the run's: {old})")
    return (
        "--resume continues the run with its own settings, so these were not applied: "
        + ", ".join(parts)
        + "; pass another --output to start a new run with them."
    )


def plot(
    run_dir: str = typer.Argument(..., help="A run directory written by `llmgym train`."),
    out: str = typer.Option("", help="PNG path (default RUN_DIR/learning_curve.png)."),
) -> None:
    """Write a learning-curve PNG (return, parse rate, KL, entropy) for a training run."""
    try:
        from llmgym.rl.plotting import plot_run
    except ImportError as error:
        raise fail(f"Plotting needs matplotlib ({error.name} is missing).") from None
    refs: dict[str, float] = {}
    result = Path(run_dir) / "result.json"
    if result.exists():
        try:
            data = json.loads(result.read_text())
            refs = {k: v["mean_return"] for k, v in data.get("baselines_same_seeds", {}).items()}
        except (ValueError, KeyError, TypeError, AttributeError):
            refs = {}  # a damaged result.json only loses the reference lines
    try:
        png = plot_run(run_dir, out or None, references=refs)
    except TrainingError as error:
        raise fail(str(error)) from None
    except (ValueError, KeyError, TypeError, OSError) as error:
        why = (str(error).splitlines() or [""])[0]
        raise fail(
            f"Cannot plot {run_dir}: its metrics.csv is not one llmgym wrote ({why})."
        ) from None
    console.print(f"Wrote {png}")


def register(app: typer.Typer) -> None:
    """Add ``train`` and ``plot`` to the ``llmgym`` app."""
    app.command()(train)
    app.command()(plot)


__all__ = ["register"]
