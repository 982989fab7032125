"""Where a run stands: the counters and random stream that every part of the trainer reads,
that a checkpoint saves and ``--resume`` restores, held in one object handed to each part.

Example:
    >>> state = RunState(seed=0)
    >>> state.next_seeds(2), state.next_seeds(1)
    ([0, 1], [2])
    >>> RunState(seed=3).next_seeds(1)  # seed * 100_003 + i
    [300009]
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

TRAIN_SEED_STRIDE = 100_003
"""The i-th training env seed of a run with seed ``s`` is ``s * TRAIN_SEED_STRIDE + i``."""


@dataclass
class RunState:
    """The counters of one run (the same in every process)."""

    seed: int
    """``run.seed``: the training env seeds and the minibatch stream derive from it."""
    iteration: int = 0
    """Updates done."""
    env_steps: int = 0
    """Env steps collected by the updates (every process)."""
    episodes_done: int = 0
    """Episodes collected by the updates (every process)."""
    seeds_used: int = 0
    """Training env seeds drawn (one per episode; one per GRPO group)."""
    skipped_updates: int = 0
    """Optimizer steps skipped for a non-finite loss or gradient."""
    skipped_at_load: int = 0
    """``skipped_updates`` when this session resumed (what earlier sessions skipped)."""
    ent_boost: float = 0.0
    """Added to the entropy bonus while entropy is below ``min_entropy``."""
    features_frozen: bool = False
    """After SFT the action head keeps the demos' feature map."""
    best_eval: dict[str, Any] | None = None
    """The best evaluation so far and its kept policy (``Checkpointer.keep_if_best``)."""
    first_eval: dict[str, Any] | None = None
    """The iteration-0 evaluation of ``Trainer.train`` (after the SFT warm start)."""
    recent_successes: list[Any] = field(default_factory=list)
    """Turns of successful episodes that ``sft.during_rl`` trains on."""
    np_rng: np.random.Generator = field(init=False)
    """Shuffles minibatches and draws GRPO's branch points; checkpointed."""

    def __post_init__(self) -> None:
        self.np_rng = np.random.default_rng(self.seed + 1)

    def next_seeds(self, n: int) -> list[int]:
        """Env seeds of the next ``n`` training episodes (deterministic in the episode index)."""
        base = self.seed * TRAIN_SEED_STRIDE
        seeds = [base + self.seeds_used + i for i in range(n)]
        self.seeds_used += n
        return seeds

    def counters(self) -> dict[str, Any]:
        """What a checkpoint's ``trainer_state.json`` keeps of this state."""
        return {
            "iteration": self.iteration,
            "env_steps": self.env_steps,
            "episodes_done": self.episodes_done,
            "seeds_used": self.seeds_used,
            "skipped_updates": self.skipped_updates,
            "ent_boost": self.ent_boost,
            "features_frozen": self.features_frozen,
            "np_rng": self.np_rng.bit_generator.state,
        }

    def restore(self, saved: dict[str, Any]) -> None:
        """Take back :meth:`counters` (keys a checkpoint predates keep their fresh values)."""
        self.iteration = saved["iteration"]
        self.env_steps = saved["env_steps"]
        self.episodes_done = saved["episodes_done"]
        self.seeds_used = saved["seeds_used"]
        self.skipped_updates = self.skipped_at_load = saved["skipped_updates"]
        self.ent_boost = saved.get("ent_boost", 0.0)
        self.features_frozen = saved.get("features_frozen", False)
        if "np_rng" in saved:
            self.np_rng.bit_generator.state = saved["np_rng"]


__all__ = ["TRAIN_SEED_STRIDE", "RunState"]
