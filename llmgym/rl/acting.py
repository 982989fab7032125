"""What a run acts with: the vLLM engine where the policy acts through one, the acting policy
(``LLMPolicy`` over the trained model, the action head, the kept hidden states), and the random
streams it samples from, one per process.

Example:
    >>> import random
    >>> seed_everything(3); a = random.random()
    >>> seed_everything(3); a == random.random()
    True
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import numpy as np

from llmgym.policy.action_head import head_for, state_layers


def vllm_engine(config: Any) -> Any:
    """The vLLM engine the policy acts through (``policy.uses_vllm``), else None."""
    if not config.policy.uses_vllm:
        return None
    from llmgym.policy.backends import make_vllm_backend

    p, inprocess = config.policy, config.policy.backend == "vllm-inprocess"
    return make_vllm_backend(p.vllm_url, p.vllm_model, p.model, inprocess)


def acting_policy(
    config: Any,
    model: Any,
    tokenizer: Any,
    vllm: Any,
    run_dir: Path,
    trainer: Any,
    policy_config: Any = None,
) -> Any:
    """The run's ``LLMPolicy``. Acting through ``vllm``, the engine is told how to write the
    ``trainer``'s current weights for hot-loading (its adapter, or the whole model after a full
    fine-tune); updates recompute locally."""
    from llmgym.policy import LLMPolicy

    if vllm is not None:
        from llmgym.rl.adapters import write_adapter, write_weights

        prefix = f"llmgym-{run_dir.name or 'run'}"
        if config.lora.enabled:
            vllm.use_adapters(
                lambda path: write_adapter(trainer, path), run_dir / "vllm_adapters", prefix
            )
        else:  # a full fine-tune: vLLM reloads the whole model after each update
            vllm.use_weights(
                lambda path: write_weights(trainer, path), run_dir / "vllm_weights", prefix
            )
    return LLMPolicy(
        model,
        tokenizer,
        policy_config or config.policy.acting(),
        head=head_for(model, config.policy),
        memoize=not config.optim.train_backbone,
        backend=vllm,
        layers=state_layers(model, config.policy),
    )


def seed_everything(seed: int) -> None:
    """Python's, numpy's and torch's global random streams from ``seed``."""
    import torch

    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def seed_sampling(processes: Any, seed: int, iteration: int, policy: Any) -> None:
    """With several processes, a sampling stream of its own for each (from the run's seed, the
    iteration and the rank); one process keeps the stream its seed started."""
    if processes.num > 1:
        stream = (seed * 1_000_003 + iteration * 1009 + processes.rank + 1) % 2**32
        seed_everything(stream)
        generator = getattr(policy, "generator", None)
        if generator is not None:
            generator.manual_seed(stream)


__all__ = ["acting_policy", "seed_everything", "seed_sampling", "vllm_engine"]
