"""The result record of a ``llmgym train`` run (``result.json``, ``--result-json``): what ran,
on which recipe, what it reached, the references on the same seeds, and the command.

Example:
    >>> json_safe({"value": float("nan"), "rows": [1.0, float("inf")]})
    {'value': None, 'rows': [1.0, None]}
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from llmgym.errors import TrainingError
from llmgym.files import write_text

#: The start value of a run that has none (not evaluated, or a resume of an older run).
UNKNOWN = {"mean_return": math.nan}


def result_record(
    trainer: Any,
    plan: Any,
    final: dict[str, Any],
    start: dict[str, Any],
    wall_s: float,
    command: str,
    resumed: bool,
) -> dict[str, Any]:
    """The record of a finished run (``plan``: :class:`llmgym.rl.plan.RunPlan`)."""
    from llmgym.rl.logger import library_versions, machine_description
    from llmgym.rl.trainer import EVAL_SEED_BASE

    config, episodes = trainer.config, plan.final_eval_episodes
    seeds = range(EVAL_SEED_BASE, EVAL_SEED_BASE + episodes)
    recipe = plan.recipe
    return {
        "env_id": config.run.env_id,
        "env_kwargs": config.run.env_kwargs,
        # the evaluations' own kwargs over env_kwargs (another map set, a rewording): every
        # value below was measured there
        "eval_env_kwargs": config.eval.env_kwargs,
        "model": config.policy.model,
        "algo": plan.algo,
        "mode": config.policy.mode,
        "policy": policy_family(config),
        "backbone": config.policy.backbone,
        "sft": config.sft.source,
        "recipe": recipe.name if recipe else None,
        "recipe_hash": recipe.fingerprint() if recipe else None,
        "recipe_overrides": plan.overrides,
        "resumed": resumed,
        "env_steps": trainer.state.env_steps,
        "episodes": trainer.state.episodes_done,
        "updates": trainer.state.iteration,
        "wall_s": round(wall_s, 1),  # this invocation only (a resumed run adds to earlier ones)
        "machine": machine_description(trainer.learner.device),
        # the float arithmetic of a rerun differs with these (a record is reproduced exactly
        # only with the same versions)
        "versions": library_versions(),
        "eval_method": final.get("method", "sampled"),
        "start_value": start["mean_return"],
        # The same evaluation right after the SFT warm start (the RL run's own starting point).
        "sft_value": trainer.state.first_eval["mean_return"]
        if config.sft.source != "none" and trainer.state.first_eval
        else None,
        "eval_value": final["mean_return"],
        "eval_ci95": final["ci95"],
        **constants(trainer, config),
        "weights": None,  # set once the policy is saved
        "eval_episodes": final["episodes"],
        "eval_mean_return": final["mean_return"],
        "eval_success_rate": final["success_rate"],
        "parse_rate": final["parse_rate"],
        "eval_seeds": f"{EVAL_SEED_BASE}..{EVAL_SEED_BASE + episodes - 1}",
        "baselines_same_seeds": baselines(
            config.run.env_id, {**config.run.env_kwargs, **config.eval.env_kwargs}, seeds
        ),
        "best_eval": trainer.state.best_eval,  # the best evaluation and its kept policy
        "stopped_at_goal": trainer.checkpointer.reached_stop_at(),  # --stop-at ended training early
        "command": command,
    }


def write_results(
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
    text = json.dumps(json_safe(result), indent=2)
    write_text(Path(output) / "result.json", text)
    if result_json:
        write_text(result_json, text)
    refs = result["baselines_same_seeds"]
    return plot_run(
        output,
        references={k: v["mean_return"] for k, v in refs.items()},
        title=f"{result['env_id']} {result['algo']} {result['mode']} ({config.policy.model})",
    )


def constants(trainer: Any, config: Any) -> dict[str, Any]:
    """The record's ``best_constant_value``: the exact value of the best policy that always
    answers one action; and ``constant_policy``: that action's name when the final greedy policy
    takes one action in every state (``llmgym.evaluation.constant``). Both null where the env
    has no exact evaluation, ``constant_policy`` also where the policy sees a chat history."""
    from llmgym.evaluation.constant import constant_values
    from llmgym.evaluation.exact import exact_value

    env_id, kwargs = config.run.env_id, trainer.evaluation.kwargs
    consts = constant_values(env_id, kwargs)
    if consts is None:
        return {"best_constant_value": None, "constant_policy": None}
    constant = None
    if config.policy.history == 0:  # a Markov policy: its greedy action in each state
        result = (
            trainer.evaluation.last_exact if trainer.uses_exact_eval() else None
        )  # the final one's
        if result is None:

            def act(observations: list[str], infos: list[dict[str, Any]]) -> list[str]:
                return [s.text for s in trainer.policy.act(observations, infos, greedy=True)]

            with trainer.torch.no_grad():
                result = exact_value(env_id, act, kwargs)
        constant = consts.constant_action(result)
    return {"best_constant_value": consts.best_value, "constant_policy": constant}


def policy_family(config: Any) -> str:
    """What the run trained: ``lm`` (the language model), ``head`` (an action head on the
    frozen model) or ``lm+head``."""
    head = config.policy.action_head and config.policy.mode == "score"
    if not config.optim.train_backbone:
        return "head"
    return "lm+head" if head else "lm"


def start_value(trainer: Any, run_dir: Path, episodes: int, resume: bool) -> dict[str, Any]:
    """The final evaluation's figure before any training (kept in the run for resumes)."""
    path = run_dir / "start_eval.json"
    if resume:  # unknown for runs started before start_eval.json was written (or damaged)
        try:
            value = json.loads(path.read_text())
            return value if isinstance(value.get("mean_return"), (int, float)) else UNKNOWN
        except (OSError, ValueError, AttributeError):
            return UNKNOWN
    if not trainer.config.eval.start:
        return UNKNOWN
    value = trainer.evaluate(episodes)
    value = {k: v for k, v in value.items() if k != "returns"}
    if trainer.processes.is_main:
        write_text(path, json.dumps(json_safe(value), indent=2))
    return value


def json_safe(value: Any) -> Any:
    """NaN and infinities become null: JSON has no such numbers."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: json_safe(v) for k, v in value.items()}
    if isinstance(value, list):
        return [json_safe(v) for v in value]
    return value


def baselines(env_id: str, env_kwargs: dict[str, Any], seeds: Any) -> dict[str, dict]:
    """Random and expert returns on the evaluation seeds, each where the env has one."""
    from llmgym.evaluation.references import reference_returns

    out = {}
    for agent in ("random", "expert"):
        try:
            out[agent] = reference_returns(env_id, env_kwargs, seeds, agent=agent)
        except TrainingError:  # free-text env, or no expert known for it
            pass
    return out


__all__ = [
    "UNKNOWN",
    "constants",
    "json_safe",
    "policy_family",
    "result_record",
    "start_value",
    "write_results",
]
