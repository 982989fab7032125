"""What ``llmgym train`` will run, from what the user asked: the recipe, the algorithm and the
config, before any model loads (``llmgym.cli.train`` parses; this decides).

Precedence, lowest first: the config's defaults, the recipe (``--recipe NAME``, or the env's
default recipe where the model, algorithm and env kwargs match), the options given, ``--set``.
A resumed run keeps its own config; only the budget and the machine's settings are taken anew.

Example:
    >>> plan = plan_run(TrainRequest("Text-Blackjack-v1", given={"run.seed": 1}))
    >>> plan.algo, plan.recipe.name, plan.config.run.seed, plan.config.q_window
    ('qac', 'blackjack-lm-ppo-ema', 1, 40)
    >>> plan.notes[0].startswith("Recipe blackjack-lm-ppo-ema: the default for")
    True
    >>> plan = plan_run(TrainRequest("Text-Blackjack-v1", given={"policy.model": "tiny"}))
    >>> plan.algo, plan.recipe, plan.notes[0]  # doctest: +NORMALIZE_WHITESPACE
    ('ppo', None, 'No recipe for tiny / ppo / no env kwargs: generic settings, not known to
    learn.')
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from llmgym.envs.registration import check_env_id
from llmgym.errors import ConfigError
from llmgym.policy.models import same_model
from llmgym.rl import checkpoints, recipes
from llmgym.rl.algorithms import ALGORITHMS, algorithm, legacy_algo
from llmgym.rl.config import TrainConfig, canonical_key
from llmgym.rl.machine import check_machine, size_auto

#: Taken from the new command on ``--resume`` (the machine may differ, the server may have
#: moved), where given; everything else is the run's own.
LOCAL_KEYS = ("policy.backend", "policy.vllm", "run.num_threads")


@dataclass
class TrainRequest:
    """What the user asked for: the env, and only what was given (None / empty: not given)."""

    env_id: str
    algo: str | None = None
    given: dict[str, Any] = field(default_factory=dict)
    """Config keys of the options given (``--lr`` -> ``optim.learning_rate``), then ``--set``."""
    env_kwargs: dict[str, Any] | None = None
    recipe: str | None = None
    resume: bool = False
    output: str = ""
    final_eval_episodes: int | None = None


@dataclass
class RunPlan:
    """The run to make: its algorithm, validated config, recipe (None: generic settings), the
    evaluation size, and the lines to print before it starts."""

    algo: str
    config: TrainConfig
    recipe: recipes.Recipe | None
    final_eval_episodes: int
    notes: list[str]
    overrides: dict[str, Any] = field(default_factory=dict)
    """The recipe's settings that the command changed (key -> the value used)."""
    ignored: dict[str, tuple[Any, Any]] = field(default_factory=dict)
    """``--resume``: the options given that the run's own config overrides (key -> (given,
    the run's)), for the CLI to name."""


def plan_run(request: TrainRequest) -> RunPlan:
    """The plan of a request; a ``ConfigError``/``TrainingError`` says in one sentence what
    cannot run."""
    check_env_id(request.env_id)
    if request.algo is not None:
        algorithm(request.algo)  # an unknown name: the names in one sentence
    if request.resume:
        return _resumed(request)
    # the algorithm asked for: --algo, or qac through the old --set q_critic=true
    algo, given = legacy_algo(request.algo or "ppo", dict(request.given))
    chosen = algo if request.algo or algo != "ppo" else None
    notes = []
    if algo != (request.algo or "ppo"):
        notes.append("q_critic=true is now its own algorithm: training with --algo qac.")
    model = _model(given) or TrainConfig().policy.model
    recipe = _recipe(request, given, chosen, model)
    values: dict[str, Any] = {"env_id": request.env_id, "output_dir": request.output}
    overrides = {}
    if recipe is not None:
        algo = chosen or recipe.algo
        values |= recipe.values() | {"run.recipe": recipe.name}
        own = {canonical_key(k): v for k, v in recipe.values().items()}
        overrides = {k: v for k, v in given.items() if own.get(canonical_key(k), v) != v}
        notes.append(_recipe_line(request, recipe))
        if recipe.bound_to_model and not same_model(model, recipe.model):
            notes.append(
                f"Recipe {recipe.name} was measured on {recipe.model}: {recipe.bound_to_model}."
            )
    else:
        notes.append(_no_recipe_line(request, model, algo))
    if request.env_kwargs is not None:
        values["env_kwargs"] = {**values.get("env_kwargs", {}), **request.env_kwargs}
    config = algorithm(algo).config_class().build(values | given)
    config.validate()  # every value and combination, before any model loads
    set_keys = {canonical_key(k) for k in values | given}
    if config.run.num_envs == "auto" and "optim.micro_batch_size" not in set_keys:
        config.optim.micro_batch_size = "auto"  # sized with the envs unless set
    sized = size_auto(config)
    if sized:
        notes.insert(0, sized)  # the first line printed
    check_machine(config, lora_layers_given=any(canonical_key(k) == "lora.layers" for k in given))
    return RunPlan(algo, config, recipe, _final_episodes(request, recipe), notes, overrides)


def _final_episodes(request: TrainRequest, recipe: recipes.Recipe | None) -> int:
    """The final evaluation's episodes: given, else the recipe's, else 1000."""
    if request.final_eval_episodes is not None:
        return request.final_eval_episodes
    return (recipe and recipe.final_eval_episodes) or 1000


def _recipe(request: TrainRequest, given: dict[str, Any], algo: str | None, model: str) -> Any:
    """The recipe asked for (refused for another env), else the env's default where it fits."""
    if request.recipe == "none":  # generic settings, as commands written before recipes
        return None
    if request.recipe:
        recipe = recipes.get(request.recipe)
        if recipe.env != request.env_id:
            raise ConfigError(
                f"Recipe {recipe.name} is for {recipe.env}, not {request.env_id}; "
                f"`llmgym recipes {request.env_id}` lists this env's."
            )
        return recipe
    mode = given.get("policy.mode")
    return recipes.default_for(request.env_id, model, algo, mode, request.env_kwargs or {})


def _model(given: dict[str, Any]) -> str | None:
    """The model the options name (``--model`` or ``--set model=...``), None if none."""
    models = [v for k, v in given.items() if canonical_key(k) == "policy.model"]
    return models[-1] if models else None


def _recipe_line(request: TrainRequest, recipe: recipes.Recipe) -> str:
    """The first line of a run with a recipe: which, why, and the env kwargs it applies."""
    why = f"the default for {recipe.env} with {recipe.model}" if not request.recipe else "as asked"
    kwargs = f"; env kwargs {_kwargs(recipe.env_kwargs)}" if recipe.env_kwargs else ""
    return (
        f"Recipe {recipe.name}: {why} ({recipe.title}: {recipe.algo}, {recipe.policy}, "
        f"{recipe.mode}{kwargs}). `llmgym recipes` lists the others; options and --set "
        "override it."
    )


def _no_recipe_line(request: TrainRequest, model: str, algo: str) -> str:
    if request.recipe == "none":
        return "No recipe (--recipe none): generic settings, not known to learn."
    kwargs = _kwargs(request.env_kwargs or {}) or "no env kwargs"
    return f"No recipe for {model} / {algo} / {kwargs}: generic settings, not known to learn."


def _kwargs(kwargs: dict[str, Any]) -> str:
    return ", ".join(f"{k}={json.dumps(v)}" for k, v in kwargs.items())


def _resumed(request: TrainRequest) -> RunPlan:
    """A resumed run: its own config (refused for another env, model or algorithm), the new
    budget and this machine's settings."""
    saved = checkpoints.saved_config(request.output)
    if saved is None:
        raise ConfigError(f"No run config in {request.output}; start afresh without --resume.")
    given = request.given
    asked: dict[str, Any] = {"env_id": request.env_id}
    if request.algo is not None:
        asked["algo"] = legacy_algo(request.algo, given)[0]
    if request.env_kwargs:
        asked["env_kwargs"] = request.env_kwargs
    asked |= {"model": _model(given)} if _model(given) else {}
    checkpoints.check_resume(request.output, saved, asked)
    algo = saved.get("algo", request.algo or "ppo")
    if algo not in ALGORITHMS:
        raise ConfigError(
            f"The run in {request.output} names no known algorithm; resume another run."
        )
    budget_keys = ("run.total_env_steps", "run.total_episodes", "run.progress")
    taken = {
        k: v for k, v in given.items() if canonical_key(k).startswith(budget_keys + LOCAL_KEYS)
    }
    values = saved | taken | {"output_dir": request.output}  # the run may have been moved
    config = algorithm(algo).config_class().from_dict(values)
    config.validate()
    check_machine(config)
    ignored = checkpoints.not_applied(saved, {k: v for k, v in given.items() if k not in taken})
    recipe_name = config.run.recipe
    notes = [
        f"Resuming the run in {request.output}"
        + (f" (recipe {recipe_name})." if recipe_name else ".")
    ]
    recipe = None
    if recipe_name:
        try:
            recipe = recipes.get(recipe_name)
        except ConfigError:  # a recipe file of a run made elsewhere
            recipe = None
    final = _final_episodes(request, recipe)
    return RunPlan(algo, config, recipe, final, notes, ignored=ignored)


__all__ = ["RunPlan", "TrainRequest", "plan_run"]
