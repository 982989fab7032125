"""Online RL trainers for LLM agents in text envs: PPO, GRPO, REINFORCE+KL, SFT warm start.

Each algorithm is one readable file (``ppo.py``, ``grpo.py``, ``reinforce.py``) with an
``XConfig`` dataclass and an ``XTrainer``; shared loop pieces live in ``base.py``, the SFT
warm start in ``sft.py``. ``make_trainer("ppo", env_id=..., ...)`` builds one by name.
"""

from __future__ import annotations

from typing import Any

ALGOS = ("ppo", "grpo", "reinforce")


def config_class(algo: str) -> type:
    """The config dataclass of an algorithm name."""
    if algo == "ppo":
        from llmgym.agents.trainers.ppo import PPOConfig

        return PPOConfig
    if algo == "grpo":
        from llmgym.agents.trainers.grpo import GRPOConfig

        return GRPOConfig
    if algo == "reinforce":
        from llmgym.agents.trainers.reinforce import ReinforceConfig

        return ReinforceConfig
    raise ValueError(f"Unknown algorithm {algo!r}; choose one of {', '.join(ALGOS)}.")


def trainer_class(algo: str) -> type:
    """The trainer class of an algorithm name."""
    config_class(algo)
    if algo == "ppo":
        from llmgym.agents.trainers.ppo import PPOTrainer

        return PPOTrainer
    if algo == "grpo":
        from llmgym.agents.trainers.grpo import GRPOTrainer

        return GRPOTrainer
    from llmgym.agents.trainers.reinforce import ReinforceTrainer

    return ReinforceTrainer


def make_trainer(algo: str, loaded: tuple[Any, Any] | None = None, **config: Any) -> Any:
    """``make_trainer("grpo", env_id="Text-Blackjack-v1", total_env_steps=500)``; ``loaded``
    passes an already loaded ``(model, tokenizer)`` instead of loading ``config["model"]``."""
    cfg = config_class(algo)(**config)
    model, tokenizer = loaded if loaded is not None else (None, None)
    return trainer_class(algo)(cfg, model=model, tokenizer=tokenizer)


__all__ = ["ALGOS", "config_class", "make_trainer", "trainer_class"]
