"""Learning curves of SB3: a fresh model trained for a budget and evaluated every so many
env steps (nothing cached), and the record of one such run. Re-exported by
``llmgym.baselines.sb3``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import gymnasium as gym

from llmgym.baselines.sb3_agent import SB3Agent
from llmgym.baselines.sb3_recipes import SB3Config, annealing
from llmgym.baselines.sb3_training import _build, _check, config_for
from llmgym.envs.registration import base_env_id
from llmgym.errors import AgentError


@dataclass
class LearningCurve:
    """Evaluations of one SB3 run taken while it trained (see :func:`learning_curve`)."""

    env_id: str
    algo: str
    seed: int
    env_kwargs: dict[str, Any]
    env_steps: list[int]
    """Training env steps done at each evaluation (the first is 0: the untrained policy)."""
    values: list[float]
    """``eval_fn``'s value at each of those points."""
    train_seconds: float
    """Wall clock of ``learn`` without the evaluations."""
    eval_seconds: float
    """Wall clock of all evaluations."""

    def steps_to_reach(self, target: float, tol: float = 1e-9) -> int | None:
        """Env steps of the first evaluation at or above ``target`` (None: never reached).

        Example:
            >>> curve = LearningCurve("E", "ppo", 0, {}, [0, 10, 20], [0.1, 0.5, 0.9], 1, 1)
            >>> curve.steps_to_reach(0.5), curve.steps_to_reach(2.0)
            (10, None)
        """
        return next((s for s, v in zip(self.env_steps, self.values) if v >= target - tol), None)


def learning_curve(
    env_id: str,
    algo: str,
    budget: int,
    eval_every: int,
    eval_fn: Callable[[SB3Agent], float],
    seed: int = 0,
    env_kwargs: dict[str, Any] | None = None,
    config: SB3Config | None = None,
) -> LearningCurve:
    """Train a fresh SB3 model (``config``, else the recipe of ``(env, algo)``;
    nothing cached) for ``budget`` env steps and evaluate it with ``eval_fn`` before training,
    then whenever another ``eval_every`` steps are done, and at the end. ``eval_fn`` gets the
    model as an :class:`SB3Agent` (deterministic actions), so it can play the ``Text-*`` env
    or be evaluated exactly. ``env_id`` may be the base id or its ``Text-*`` twin.

    PPO/A2C only change their policy after each rollout (``n_steps x n_envs`` steps), and
    ``learn`` finishes the rollout it is in, so the last point may lie a little past ``budget``.
    """
    from stable_baselines3.common.callbacks import BaseCallback

    base_id, env_kwargs = base_env_id(env_id), dict(env_kwargs or {})
    _check(base_id, algo)
    if budget < 1 or eval_every < 1:
        raise AgentError(f"budget and eval_every must be at least 1, not {budget}, {eval_every}.")
    config = config or config_for(base_id, algo)
    model = _build(base_id, algo, seed, config.n_envs, env_kwargs, config=config)
    normalizer = model.get_vec_normalize_env()  # its statistics as they stand at each point
    normalize = normalizer.normalize_obs if normalizer is not None else None
    agent = SB3Agent(gym.make(base_id, **env_kwargs), model, f"sb3-{algo}", normalize)
    steps: list[int] = []
    values: list[float] = []
    eval_seconds = 0.0

    def record(step: int) -> None:
        nonlocal eval_seconds
        start = time.perf_counter()
        values.append(float(eval_fn(agent)))
        steps.append(int(step))
        eval_seconds += time.perf_counter() - start

    class EvalEvery(BaseCallback):
        def _on_step(self) -> bool:
            if self.num_timesteps >= len(steps) * eval_every:
                record(self.num_timesteps)
            return True

    record(0)
    start, before = time.perf_counter(), eval_seconds
    anneal = annealing(config.hyperparams)
    model.learn(total_timesteps=budget, callback=[EvalEvery(), *([anneal] if anneal else [])])
    train_seconds = time.perf_counter() - start - (eval_seconds - before)
    if steps[-1] < model.num_timesteps:
        record(model.num_timesteps)
    return LearningCurve(
        base_id,
        algo,
        seed,
        env_kwargs,
        steps,
        values,
        round(train_seconds, 2),
        round(eval_seconds, 2),
    )
