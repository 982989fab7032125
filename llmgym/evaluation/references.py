"""The returns an LLM policy is measured against: the expert (the optimal or heuristic agent
of ``llmgym.baselines.agents.OPTIMAL``) and a uniformly random agent, played through the text
env on the same seeds, with the one evaluator.

Example:
    >>> r = reference_returns("Text-FrozenLake-v1", {"is_slippery": False}, range(3))
    >>> r["mean_return"], r["episodes"]
    (1.0, 3)
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

import gymnasium as gym
import numpy as np

from llmgym.errors import TrainingError
from llmgym.evaluation.evaluator import evaluate


def expert_for(env: gym.Env) -> Callable[[Any], Any]:
    """An expert ``raw_obs -> base action`` for ``env``: the optimal or heuristic agent of
    ``llmgym.baselines.agents.OPTIMAL`` (exact DP / value iteration, controllers). Raises
    TrainingError when there is none."""
    from llmgym.baselines.agents import OPTIMAL

    base = type(env.unwrapped).__name__
    if base not in OPTIMAL:
        raise TrainingError(
            f"No expert is known for {base}; pass --sft FILE with demos (JSONL) or --sft none."
        )
    return OPTIMAL[base](env)


def reference_returns(
    env_id: str,
    env_kwargs: dict[str, Any] | None,
    seeds: Sequence[int],
    agent: str = "expert",
) -> dict[str, float]:
    """Mean return and 95 % CI of the ``expert`` or a uniformly ``random`` agent, played
    through the text env on ``seeds`` (the same seeds an LLM policy is evaluated on).

    Raises ``TrainingError`` for an env without valid actions (free text, e.g. math) or, for
    the expert, without a known expert."""
    env = gym.make(env_id, **(env_kwargs or {}))
    expert = expert_for(env) if agent == "expert" else None
    rng = np.random.default_rng(12345)

    def act(observations: list[str], infos: list[dict[str, Any]]) -> list[str]:
        valid = list(infos[0].get("valid_actions") or [])
        if not valid:
            raise TrainingError(f"{env_id} lists no valid actions: no {agent} agent plays it.")
        k = int(expert(infos[0]["raw_obs"])) if expert else int(rng.integers(len(valid)))
        return [json.dumps({"action": valid[k]})]

    try:
        result = evaluate(act, [env], list(seeds))
    finally:
        env.close()
    return {"mean_return": result.mean_return, "ci95": result.ci95, "episodes": result.episodes}


__all__ = ["expert_for", "reference_returns"]
