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
    check_env_kwargs,
    check_output_dir,
    check_output_file,
    fail,
    key_values,
)
from llmgym.errors import ConfigError, LLMGymError, TrainingError
from llmgym.files import write_text
from llmgym.rl.config import TrainConfig, canonical_key, default_value, field_doc
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
    model: str = _config_option("model"),
    algo: str = typer.Option("ppo", help="ppo | grpo | reinforce."),
    mode: str = _config_option("mode"),
    num_envs: int = _config_option("num_envs", "--num-envs"),
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
        "method needs none; the method in use is printed) and of the baselines beside them.",
    ),
    no_start_eval: bool = typer.Option(
        False,
        "--no-start-eval",
        help="Skip the evaluation before training (config key eval.start=false).",
    ),
    env_kwarg: list[str] = typer.Option(  # noqa: B008
        None, "--env-kwarg", help="KEY=VALUE for gym.make (repeatable), e.g. is_slippery=false."
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
    """Train an LLM agent with online RL (LoRA) in a text env; log, checkpoint, evaluate, plot."""
    try:
        from llmgym.rl import ALGOS, checkpoints, config_class, trainer_class
        from llmgym.rl.logger import machine_description
        from llmgym.rl.trainer import EVAL_SEED_BASE
    except ImportError as error:
        raise fail(
            f"Training needs the train extra ({error.name} is missing): "
            "pip install 'llmgym[train]'."
        ) from None
    import gymnasium as gym

    if algo not in ALGOS:
        raise fail(f"Unknown --algo {algo!r}; choose one of {', '.join(ALGOS)}.")
    if env_id not in gym.registry:
        raise fail(f"Unknown environment {env_id!r}; run `llmgym envs` to list the text envs.")
    if sft not in ("none", "auto") and not Path(sft).is_file():
        raise fail(f"No SFT demo file at {sft!r}; pass --sft auto, --sft none or a JSONL path.")
    output = output or f"runs/{env_id.removeprefix('Text-')}-{algo}-{mode}"
    check_output_dir(output)
    if resume and checkpoints.latest(Path(output) / "checkpoints") is None:
        raise fail(f"No checkpoint to resume in {output}; drop --resume or pass a run's --output.")
    if result_json:
        check_output_file(result_json, "--result-json")
    try:
        check_count(final_eval_episodes, "--final-eval-episodes")
    except ConfigError as error:
        raise fail(str(error)) from None
    params = ctx.params
    given = {
        key: params[name] for name, key in CONFIG_OPTIONS.items() if _given(ctx, name)
    }  # the others keep the algorithm config's defaults (the ones --help shows)
    env_kwargs = key_values(env_kwarg, "--env-kwarg")
    set_values = key_values(set_, "--set")
    saved, ignored = None, ""
    if resume:  # the run's own config (env, model, algorithm: refused if they differ)
        asked = {"env_id": env_id, "algo": algo} if _given(ctx, "algo") else {"env_id": env_id}
        if env_kwarg:
            asked["env_kwargs"] = env_kwargs
        models = [v for k, v in (given | set_values).items() if canonical_key(k) == "policy.model"]
        asked |= {"model": models[-1]} if models else {}
        try:
            saved = checkpoints.saved_config(output)
            if saved is not None:
                checkpoints.check_resume(output, saved, asked)
        except TrainingError as error:
            raise fail(str(error)) from None
        if saved is not None and saved.get("algo", algo) not in ALGOS:
            raise fail(f"The run in {output} names no known algorithm; resume another run.")
        algo = saved.get("algo", algo) if saved is not None else algo
    cls = config_class(algo)
    values: dict[str, Any] = {
        "env_id": env_id,
        "env_kwargs": env_kwargs,
        "output_dir": output,
        **given,
    }
    if no_progress:
        values["run.progress"] = False
    if no_start_eval:
        values["eval.start"] = False
    # given ones only, kept on --resume: the server may have moved, the machine may differ
    local_keys = ("policy.backend", "policy.vllm", "run.num_threads")
    local = {k: v for k, v in given.items() if k.startswith(local_keys)}
    values |= set_values
    build = cls.build
    if saved is not None:  # the run's own config, new budget
        budget = {
            "total_env_steps": steps,
            "total_episodes": episodes,
            "progress": not no_progress,
            "output_dir": output,  # the run may have been moved or copied
        } | local
        values, build = saved | budget, cls.from_dict
        ignored = _not_applied(saved, given | set_values, {canonical_key(k) for k in budget})
    try:
        config = build(values)
        config.validate()  # every value and combination, before any model loads
    except (LLMGymError, ValueError) as error:
        raise fail(str(error)) from None
    check_env_kwargs(config.run.env_id, config.run.env_kwargs)
    command = "llmgym " + " ".join(shlex.quote(a) for a in sys.argv[1:])
    start = time.perf_counter()
    try:
        trainer = trainer_class(algo)(config)
        main = trainer.processes.is_main  # with several processes, the one that writes
        processes = f", {trainer.processes.num} processes" if trainer.processes.num > 1 else ""
        if main:
            console.print(
                f"[bold]{algo.upper()}[/] on {env_id} with {config.policy.model}"
                f"{' (random-init)' if config.policy.backbone == 'random-init' else ''} "
                f"({config.policy.mode} mode, "
                f"{_trained(config)}), {config.run.num_envs} envs{processes}, "
                f"budget {_budget(config)} -> {output}"
            )
        if main and ignored:
            console.print(escape(ignored))
        if main and config.optim.average_decay:
            console.print(
                "Evaluations and the saved policies use the weights' average (optim.average_decay="
                f"{config.optim.average_decay}); acting uses the weights themselves."
            )
        if main and config.eval.start and not resume:
            console.print(
                f"Start evaluation: {trainer.evaluation_plan(final_eval_episodes)}; "
                "--no-start-eval skips it."
            )
        start_value = _start_value(trainer, Path(output), final_eval_episodes, resume)
        final = trainer.train(resume=resume, final_episodes=final_eval_episodes)
        weights = trainer.save_policy(policy_out or Path(output) / "policy")
        constants = _constants(trainer, config)  # every process: the policy may act collectively
    except (LLMGymError, ValueError, OSError) as error:  # bad model name, config or files
        raise fail(str(error).splitlines()[0] if str(error) else type(error).__name__) from None
    if not main:
        return
    wall = time.perf_counter() - start
    seeds = range(EVAL_SEED_BASE, EVAL_SEED_BASE + final_eval_episodes)
    refs = _baselines(env_id, config.run.env_kwargs, seeds)
    result = {
        "env_id": env_id,
        "env_kwargs": config.run.env_kwargs,
        "model": config.policy.model,
        "algo": algo,
        "mode": config.policy.mode,
        "policy": _policy_family(config),
        "backbone": config.policy.backbone,
        "sft": config.sft.source,
        "resumed": resume,
        "env_steps": trainer.env_steps,
        "episodes": trainer.episodes_done,
        "updates": trainer.iteration,
        "wall_s": round(wall, 1),  # this invocation only (a resumed run adds to earlier ones)
        "machine": machine_description(trainer.device),
        "eval_method": final.get("method", "sampled"),
        "start_value": start_value["mean_return"],
        # The same evaluation right after the SFT warm start (the RL run's own starting point).
        "sft_value": trainer.first_eval["mean_return"]
        if config.sft.source != "none" and trainer.first_eval
        else None,
        "eval_value": final["mean_return"],
        "eval_ci95": final["ci95"],
        **constants,
        "weights": str(weights),
        "eval_episodes": final["episodes"],
        "eval_mean_return": final["mean_return"],
        "eval_success_rate": final["success_rate"],
        "parse_rate": final["parse_rate"],
        "eval_seeds": f"{EVAL_SEED_BASE}..{EVAL_SEED_BASE + final_eval_episodes - 1}",
        "baselines_same_seeds": refs,
        "best_eval": trainer.best_eval,  # the best evaluation and its kept policy
        "stopped_at_goal": trainer.reached_stop_at(),  # --stop-at ended training early
        "command": command,
    }
    try:  # a full disk or a read-only folder after training: one sentence, exit 2
        png = _write_results(output, result, final, trainer.env_steps, result_json, config)
    except (LLMGymError, OSError) as error:
        raise fail(str(error).splitlines()[0] if str(error) else type(error).__name__) from None
    how = "exact value" if final.get("method") == "exact" else f"{final['episodes']} episodes"
    before = start_value["mean_return"]
    before = "not evaluated" if before is None or math.isnan(before) else f"{before:.4f}"
    others = ", ".join(f"{k} {v['mean_return']:.3f}" for k, v in refs.items())
    console.print(
        f"Final eval ({how}): mean return {final['mean_return']:.4f} ± {final['ci95']:.4f} (before "
        f"training {before}; parse rate {final['parse_rate']:.2f})."
        + (f" {others} on the same seeds." if others else "")
        + f" {trainer.env_steps} env steps, {trainer.episodes_done} episodes, "
        f"{wall / 60:.1f} min. Plot: {png}"
    )
    best = trainer.best_eval
    if best is not None and best["value"] > final["mean_return"]:
        console.print(
            f"Best evaluation: {best['value']:.4f} ({best['method']}) at iteration "
            f"{best['iteration']} ({best['episodes']} episodes); that policy is kept in "
            f"{best['weights']}."
        )


def _write_results(
    output: str,
    result: dict[str, Any],
    final: dict[str, Any],
    env_steps: int,
    result_json: str,
    config: Any,
) -> Path:
    """The final evaluation's metrics row, ``result.json`` (and ``--result-json``), each
    written all-or-nothing, and the learning-curve plot; its path."""
    from llmgym.rl.checkpoints import log_once
    from llmgym.rl.logger import MetricsLogger
    from llmgym.rl.plotting import plot_run

    final_row = {
        f"final_eval/{k}": final[k] for k in ("mean_return", "ci95", "success_rate", "parse_rate")
    }
    logger = MetricsLogger(Path(output), {}, tensorboard=False)
    try:
        log_once(logger, final_row | {"final_eval/episodes": final["episodes"]}, env_steps)
    finally:
        logger.close()
    text = json.dumps(_json_safe(result), indent=2)
    write_text(Path(output) / "result.json", text)
    if result_json:
        write_text(result_json, text)
    refs = result["baselines_same_seeds"]
    return plot_run(
        output,
        references={k: v["mean_return"] for k, v in refs.items()},
        title=f"{result['env_id']} {result['algo']} {result['mode']} ({config.policy.model})",
    )


def _constants(trainer: Any, config: Any) -> dict[str, Any]:
    """The record's ``best_constant_value``: the exact value of the best policy that always
    answers one action; and ``constant_policy``: that action's name when the final greedy policy
    takes one action in every state (``llmgym.evaluation.constant``). Both null where the env
    has no exact evaluation, ``constant_policy`` also where the policy sees a chat history."""
    from llmgym.evaluation.constant import constant_values
    from llmgym.evaluation.exact import exact_value

    env_id, kwargs = config.run.env_id, trainer.eval_kwargs
    consts = constant_values(env_id, kwargs)
    if consts is None:
        return {"best_constant_value": None, "constant_policy": None}
    constant = None
    if config.policy.history == 0:  # a Markov policy: its greedy action in each state
        result = trainer.last_exact if trainer.uses_exact_eval() else None  # the final one's
        if result is None:

            def act(observations: list[str], infos: list[dict[str, Any]]) -> list[str]:
                return [s.text for s in trainer.policy.act(observations, infos, greedy=True)]

            with trainer.torch.no_grad():
                result = exact_value(env_id, act, kwargs)
        constant = consts.constant_action(result)
    return {"best_constant_value": consts.best_value, "constant_policy": constant}


def _policy_family(config: Any) -> str:
    """What the run trained: ``lm`` (the language model), ``head`` (an action head on the
    frozen model) or ``lm+head``."""
    head = config.policy.action_head and config.policy.mode == "score"
    if not config.optim.train_backbone:
        return "head"
    return "lm+head" if head else "lm"


def _given(ctx: typer.Context, name: str) -> bool:
    """Whether option ``name`` was given on the command line (not its default)."""
    return getattr(ctx.get_parameter_source(name), "name", "DEFAULT") != "DEFAULT"


def _trained(config: Any) -> str:
    head = " + action head" if config.policy.action_head and config.policy.mode == "score" else ""
    if not config.optim.train_backbone:
        return f"frozen LM{head}"
    return ("LoRA" if config.lora.enabled else "full fine-tune") + head


def _budget(config: Any) -> str:
    """The budget, and that it is checked between updates (a run ends after the update that
    reaches it, so a budget smaller than one update's episodes runs that update whole)."""
    run = config.run
    spent = (
        f"{run.total_episodes} episodes"
        if run.total_episodes
        else f"{run.total_env_steps} env steps"
    )
    return f"{spent} (checked after each update of {run.episodes_per_update} episodes)"


_UNKNOWN = {"mean_return": math.nan}


def _not_applied(saved: dict[str, Any], asked: dict[str, Any], taken: set[str]) -> str:
    """A sentence naming the options given to ``--resume`` that the run's own config overrides
    ("" when none)."""
    from llmgym.rl.checkpoints import not_applied

    labels = {key: f"--{name.replace('_', '-')}" for name, key in CONFIG_OPTIONS.items()}
    asked = {k: v for k, v in asked.items() if canonical_key(k) not in taken}
    parts = []
    for key, (new, old) in not_applied(saved, asked).items():
        option = f"{labels[key]} {new}" if key in labels else f"--set {key}={new}"
        parts.append(f"{option} (the run's: {old})")
    if not parts:
        return ""
    return (
        "--resume continues the run with its own settings, so these were not applied: "
        + ", ".join(parts)
        + "; pass another --output to start a new run with them."
    )


def _start_value(trainer: Any, run_dir: Path, episodes: int, resume: bool) -> dict[str, Any]:
    """The final evaluation's figure before any training (kept in the run for resumes)."""
    path = run_dir / "start_eval.json"
    if resume:  # unknown for runs started before start_eval.json was written (or damaged)
        try:
            value = json.loads(path.read_text())
            return value if isinstance(value.get("mean_return"), (int, float)) else _UNKNOWN
        except (OSError, ValueError, AttributeError):
            return _UNKNOWN
    if not trainer.config.eval.start:
        return _UNKNOWN
    value = trainer.evaluate(episodes)
    value = {k: v for k, v in value.items() if k != "returns"}
    if trainer.processes.is_main:
        write_text(path, json.dumps(_json_safe(value), indent=2))
    return value


def _json_safe(value: Any) -> Any:
    """NaN and infinities become null: JSON has no such numbers."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _json_safe(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_json_safe(v) for v in value]
    return value


def _baselines(env_id: str, env_kwargs: dict[str, Any], seeds: Any) -> dict[str, dict]:
    """Random and expert returns on the evaluation seeds, each where the env has one."""
    from llmgym.evaluation.references import reference_returns

    out = {}
    for agent in ("random", "expert"):
        try:
            out[agent] = reference_returns(env_id, env_kwargs, seeds, agent=agent)
        except TrainingError:  # free-text env, or no expert known for it
            pass
    return out


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
