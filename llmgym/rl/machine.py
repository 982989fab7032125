"""What a training config asks of this machine, before any model loads: the device exists, the
model's limits (its context, its depth, LoRA's rank) and the memory (``llmgym.resources``), and
the sizes given as ``auto`` (``run.num_envs``, ``optim.micro_batch_size``) chosen to fit. Both
``llmgym train``'s plan (``llmgym.rl.plan``) and a ``Trainer`` built from Python run them.
"""

from __future__ import annotations

import math

from llmgym.errors import ConfigError
from llmgym.policy.models import get_model_defaults, model_shape, resolve_device, resolve_dtype
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
from llmgym.rl.config import TrainConfig
from llmgym.rl.weights import default_lora_targets
from llmgym.rollout import MAX_ENVS

#: ``run.num_envs=auto`` and ``optim.micro_batch_size=auto`` plan within this share of the
#: memory available: the estimate (``llmgym.resources``) is a lower bound.
AUTO_MEMORY_SHARE = 0.5
#: What ``auto`` takes where the model's size is unknown before it loads (a Hub id not
#: downloaded yet): the fields' defaults.
AUTO_FALLBACK = {"num_envs": 8, "micro_batch_size": 16}


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


__all__ = ["AUTO_MEMORY_SHARE", "check_machine", "run_size", "size_auto"]
