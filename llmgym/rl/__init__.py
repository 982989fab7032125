"""Online RL trainers for LLM agents in text envs: PPO, the Q-critic actor-critic, GRPO,
REINFORCE+KL, and the SFT warm start.

Each algorithm is one module in ``algorithms/`` with an ``XConfig`` dataclass and the
algorithm's targets and loss; ``algorithms.ALGORITHMS`` names them, and the ``Trainer``
(``trainer.py``) composes one with the learner, the collector and the run state.
``make_trainer("ppo", env_id=..., ...)`` builds one by name.
"""

from __future__ import annotations

import dataclasses
import warnings
from typing import Any

from llmgym.rl.algorithms import ALGORITHMS, algorithm, legacy_algo

#: The ``--algo`` names, in the table's order.
ALGOS = tuple(ALGORITHMS)


def config_class(algo: str) -> type:
    """The config dataclass of an algorithm name."""
    return algorithm(algo).config_class()


def make_trainer(algo: str, loaded: tuple[Any, Any] | None = None, **config: Any) -> Any:
    """``make_trainer("grpo", env_id="Text-Blackjack-v1", total_env_steps=500)`` (keys as
    ``TrainConfig.build`` takes them: flat, dotted or sections); ``loaded`` passes an already
    loaded ``(model, tokenizer)`` instead of loading the configured model.
    ``make_trainer("ppo", q_critic=True)`` is deprecated: it builds ``"qac"`` with a warning."""
    new_algo, config = legacy_algo(algo, config)
    if new_algo != algo:
        warnings.warn(
            'make_trainer("ppo", q_critic=True) is deprecated; use make_trainer("qac").',
            DeprecationWarning,
            stacklevel=2,
        )
    from llmgym.rl.trainer import Trainer

    cfg = config_class(new_algo).build(config)
    model, tokenizer = loaded if loaded is not None else (None, None)
    return Trainer(cfg, model=model, tokenizer=tokenizer)


def load_trained(checkpoint: str, device: str = "auto") -> tuple[Any, Any]:
    """``(model, tokenizer)`` of a ``llmgym train`` run directory (its newest checkpoint), one
    checkpoint folder or a policy directory (``Trainer.save_policy``), with the trained adapter
    (and any merged SFT/reference adapters) applied. An action head is not part of the model:
    use :func:`load_trained_policy` to act as the trained policy did."""
    trainer = restore_trainer(checkpoint, device)
    return trainer.model.eval(), trainer.tokenizer


def load_trained_policy(
    checkpoint: str,
    device: str = "auto",
    policy_config: Any = None,
    keep_mode: bool = False,
    model: str | None = None,
) -> Any:
    """The ``LLMPolicy`` a run trained (adapters and action head restored), ready to act;
    ``policy_config`` replaces its ``PolicyConfig`` (e.g. greedy evaluation), with the mode the
    run trained in where ``keep_mode``. ``model``: the base model the caller names, refused
    (``TrainingError``) when the run trained another. Features are memoised per prompt: the
    weights no longer change."""
    from llmgym.errors import TrainingError
    from llmgym.policy.models import same_model

    trainer = restore_trainer(checkpoint, device)
    trained = trainer.config.policy.model
    if model and not same_model(model, trained):
        raise TrainingError(
            f"The policy at {checkpoint!r} was trained on {trained!r}, not {model!r}; "
            f"pass llm:{trained}@{checkpoint}."
        )
    policy = trainer.policy
    if policy_config is not None:
        from llmgym.policy import LLMPolicy

        if keep_mode:
            policy_config = dataclasses.replace(policy_config, mode=policy.config.mode)
        policy = LLMPolicy(trainer.model, trainer.tokenizer, policy_config, head=policy.head)
    policy.model = trainer.model.eval()
    if policy.head is not None:
        policy.head.requires_grad_(False)
    policy.memoize = True
    return policy


def restore_trainer(checkpoint: str, device: str = "auto") -> Any:
    """The trainer of a run directory, checkpoint or policy directory, its weights loaded
    (what :func:`load_trained` and ``llmgym export`` start from)."""
    import json
    from pathlib import Path

    from llmgym.errors import TrainingError
    from llmgym.rl import checkpoints
    from llmgym.rl.trainer import Trainer

    path = Path(checkpoint)
    if (path / "checkpoints").is_dir():
        found = checkpoints.latest(path / "checkpoints")
        if found is not None:
            checkpoints.check_contained(found, root=path)
        path = found or path
    checkpoints.check_contained(path)  # no weights or config linked in from elsewhere
    whole = checkpoints.complete(path) or _is_policy_dir(path)
    if not whole or not (path / "config.json").is_file():
        raise TrainingError(
            f"No llmgym checkpoint at {checkpoint!r}; pass a run directory of `llmgym train` "
            "or a policy directory."
        )
    algo = json.loads((path / "trainer_state.json").read_text())["algo"]
    algo, values = legacy_algo(algo, json.loads((path / "config.json").read_text()))
    # A run trained through a vLLM server restores here, with transformers (no server needed);
    # the run's torch thread count (its `--threads`) was its machine's: this process keeps its own.
    values |= {
        "device": device,
        "sft": "none",
        "progress": False,
        "num_envs": 1,
        "backend": "hf",
        "num_threads": 0,
    }
    trainer = Trainer(config_class(algo).from_dict(values))
    trainer.load_checkpoint(path)
    return trainer


def _is_policy_dir(path: Any) -> bool:
    """Whether ``path`` holds a policy directory written by ``Trainer.save_policy``."""
    import json

    try:
        return bool(json.loads((path / "trainer_state.json").read_text()).get("policy_only"))
    except (OSError, ValueError, AttributeError):
        return False


__all__ = [
    "ALGORITHMS",
    "ALGOS",
    "config_class",
    "load_trained",
    "load_trained_policy",
    "make_trainer",
    "restore_trainer",
]
