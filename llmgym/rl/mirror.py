"""Mirrored samples (``PPOConfig.mirror``): each acted state seen in the env's mirror (from the
catalog, e.g. CartPole's negated state with LEFT and RIGHT swapped), paired with the mirrored
action. PPO trains on them with the advantage and return of the sample they mirror, so an
update moves a symmetric policy the same way on both sides. It does not make a lopsided
policy symmetric: a pair's gradient on the preference's constant part is
A (1 - P(a|s) - P(mirrored a|mirrored s)), zero only where the policy is already symmetric
(start from a symmetric policy: ``lm_prior=false``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import gymnasium as gym
import numpy as np

from llmgym.envs.registration import mirror_for
from llmgym.errors import ConfigError
from llmgym.rollout import Step
from llmgym.wrappers.text_observation import text_wrapper


def check_mirror(env: gym.Env | None, mode: str, history: int) -> None:
    """Refuse ``mirror=true`` where it cannot work, in one sentence."""
    if env is None or mirror_for(env) is None:
        name = env.spec.id if env is not None and env.spec else "this trainer"
        raise ConfigError(
            f"mirror=true needs an env with a mirror symmetry in the catalog (CartPole); "
            f"{name} declares none."
        )
    if mode != "score" or history:
        raise ConfigError("mirror=true needs score mode and history=0 (it mirrors one state).")


def mirrored_samples(policy: Any, env: gym.Env, steps: Sequence[Step]) -> list[Any]:
    """For each step, the sample of the mirrored action in the mirrored state (its log-prob is
    left to the trainer's recompute: ``logprobs`` holds a placeholder 0)."""
    mirror = mirror_for(env)
    text = text_wrapper(env)
    out = []
    for step in steps:
        sample = step.sample
        observation = text.observation(mirror.observation(np.asarray(step.raw_observation)))
        info = {"system_prompt": step.info.get("system_prompt", "")}
        messages = policy.messages_for(-1, observation, info)  # -1: no history
        k = mirror.actions[sample.action_index]
        out.append(policy.score_sample(messages, sample.valid_actions, k))
    return out


__all__ = ["check_mirror", "mirrored_samples"]
