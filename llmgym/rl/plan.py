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
import math
from dataclasses import dataclass, field
from typing import Any

from llmgym.envs.registration import check_env_id
from llmgym.errors import ConfigError
from llmgym.policy.models import (
    get_model_defaults,
    model_shape,
    resolve_device,
    resolve_dtype,
    same_model,
)
from llmgym.resources import (
    PROMPT_TOKENS,
    ModelShape,
    RunSize,
    check_training,
    device_memory,
    gigabytes,
    largest_batch,
    training_memory,
)
from llmgym.rl import checkpoints, recipes
from llmgym.rl.algorithms import ALGORITHMS, algorithm, legacy_algo
from llmgym.rl.config import TrainConfig, canonical_key
from llmgym.rl.weights import default_lora_targets
from llmgym.rollout import MAX_ENVS

#: Taken from the new command on ``--resume`` (the machine may differ, the server may have
#: moved), where given; everything else is the run's own.
LOCAL_KEYS = ("policy.backend", "policy.vllm", "run.num_threads")
#: ``run.num_envs=auto`` and ``optim.micro_batch_size=auto`` plan within this share of the
#: memory available: the estimate (``llmgym.resources``) is a lower bound.
AUTO_MEMORY_SHARE = 0.5
#: What ``auto`` takes where the model's size is unknown before it loads (a Hub id not
#: downloaded yet): the fields' defaults.
AUTO_FALLBACK = {"num_envs": 8, "micro_batch_size": 16}


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


def size_auto(config: TrainConfig) -> str | None:
    """Resolve ``run.num_envs`` and ``optim.micro_batch_size`` given as ``auto``, in place, from
    the memory estimator (``llmgym.resources``) within ``AUTO_MEMORY_SHARE`` of the memory free
    where the model runs; returns the line that says what was chosen and why (None: nothing
    was ``auto``). The micro-batch is the largest power of two up to ``minibatch_size`` that
    fits beside one acting env; then the envs are as many as fit (at most the episodes per
    update, and ``MAX_ENVS``).

    Example:
        >>> config = TrainConfig.build({"model": "tiny", "num_envs": "auto",
        ...     "episodes_per_update": 24, "micro_batch_size": "auto"})
        >>> print(size_auto(config))  # doctest: +ELLIPSIS
        num_envs auto -> 24, micro_batch_size auto -> 32 (memory estimate ... available ...; ...
        >>> config.run.num_envs, config.optim.micro_batch_size
        (24, 32)
    """
    run, optim = config.run, config.optim
    auto_envs, auto_micro = run.num_envs == "auto", optim.micro_batch_size == "auto"
    if not (auto_envs or auto_micro):
        return None
    episodes = _episodes_per_update(config)
    cap = min(episodes, MAX_ENVS)
    device = resolve_device(run.device)
    shape = model_shape(config.policy.model)
    if shape is None:
        envs = min(AUTO_FALLBACK["num_envs"], cap) if auto_envs else run.num_envs
        micro = AUTO_FALLBACK["micro_batch_size"] if auto_micro else optim.micro_batch_size
        why = f"model {config.policy.model}'s size is unknown before it downloads: the defaults"
    else:
        available = device_memory(device)
        budget = None if available is None else int(available * AUTO_MEMORY_SHARE)
        micro = optim.micro_batch_size
        if auto_micro:
            micro = max(1, 2 ** int(math.log2(optim.minibatch_size)))
            one = 1 if auto_envs else run.num_envs
            while micro > 1 and not _fits(shape, run_size(config, device, one, micro), budget):
                micro //= 2
        envs = run.num_envs
        if auto_envs:  # 0 when nothing fits: check_machine then refuses one env in a sentence
            envs = max(1, largest_batch(shape, run_size(config, device, 1, micro), budget, cap))
        need = sum(training_memory(shape, run_size(config, device, envs, micro)).values())
        where = f"on {device}" if device != "cpu" else "in this machine"
        free = "unknown" if available is None else f"{gigabytes(available)} available"
        limit = (
            f"the {episodes} episodes per update cap the envs"
            if auto_envs and envs == cap
            else f"planned within {AUTO_MEMORY_SHARE:.0%} of it"
        )
        why = f"memory estimate {gigabytes(need)} of {free} {where}; {limit}"
    chosen = []
    if auto_envs:
        chosen.append(f"num_envs auto -> {envs}")
        run.num_envs = envs
    if auto_micro:
        chosen.append(f"micro_batch_size auto -> {micro}")
        optim.micro_batch_size = micro
    return f"{', '.join(chosen)} ({why})."


def _fits(shape: ModelShape, size: RunSize, budget: int | None) -> bool:
    return budget is None or sum(training_memory(shape, size).values()) <= budget


def _episodes_per_update(config: TrainConfig) -> int:
    """Episodes kept until an update (GRPO plays whole groups)."""
    group = getattr(config, "group_size", 1)
    return max(1, config.run.episodes_per_update // group) * group


def check_machine(config: TrainConfig, lora_layers_given: bool = False) -> None:
    """What ``config`` asks of its model and this machine, before any model loads: the device
    exists, the model's ``config.json`` reads, ``max_new_tokens`` fits the model's context,
    ``lora.layers`` its depth (where given: the default takes every layer of a shallower
    model), ``lora.r`` its target modules, and the run fits in memory (``llmgym.resources``).

    Example:
        >>> config = TrainConfig.build({"model": "tiny", "lora.layers": 3})
        >>> check_machine(config)
        >>> check_machine(config, lora_layers_given=True)  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        llmgym.errors.ConfigError: lora.layers is 3 but model tiny has 2 layers; use at most 2 ...
    """
    device = resolve_device(config.run.device)
    policy, lora = config.policy, config.lora
    shape = model_shape(policy.model)
    if shape is None:  # a Hub id not downloaded yet: its loading checks the weights' size
        return
    new_tokens = policy.max_new_tokens or get_model_defaults(policy.model).max_new_tokens
    if shape.context and new_tokens > shape.context:
        raise ConfigError(
            f"max_new_tokens is {new_tokens:,} but model {policy.model} reads at most "
            f"{shape.context:,} tokens (its max_position_embeddings); use at most that."
        )
    trains = "lora" if lora.enabled else "full"
    trains = trains if config.optim.train_backbone else "frozen"
    if trains == "lora" and lora_layers_given and lora.layers > shape.num_hidden_layers:
        raise ConfigError(
            f"lora.layers is {lora.layers} but model {policy.model} has "
            f"{shape.num_hidden_layers} layers; use at most {shape.num_hidden_layers} "
            "(0: every layer)."
        )
    check_training(shape, run_size(config, device))


def run_size(
    config: TrainConfig, device: str, num_envs: int | None = None, micro: int | None = None
) -> RunSize:
    """What ``config`` holds at once, in numbers for the estimator (``num_envs`` and
    ``micro`` in place of the config's; an ``auto`` one counts as 1)."""
    policy, lora = config.policy, config.lora
    trains = "lora" if lora.enabled else "full"
    trains = trains if config.optim.train_backbone else "frozen"
    new_tokens = policy.max_new_tokens or get_model_defaults(policy.model).max_new_tokens
    dtype = resolve_dtype(None if policy.dtype == "auto" else policy.dtype, device)
    envs = num_envs or config.run.num_envs
    micro = micro or config.optim.micro_batch_size
    return RunSize(
        dtype_bytes=dtype.itemsize,
        trains=trains,
        lora_r=lora.r,
        lora_targets=lora.target_modules or default_lora_targets(policy.model),
        lora_layers=lora.layers,
        episodes=_episodes_per_update(config),
        prompt_tokens=PROMPT_TOKENS * (1 + policy.history),
        new_tokens=new_tokens if policy.mode == "generate" else 8,
        num_envs=1 if envs == "auto" else envs,
        micro_batch=1 if micro == "auto" else micro,
    )


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


__all__ = ["RunPlan", "TrainRequest", "check_machine", "plan_run", "run_size", "size_auto"]
