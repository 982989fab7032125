"""Exact evaluation: the expected return of a greedy Markov text policy, computed from the
env's transition model instead of sampled episodes (no Monte Carlo noise).

Supported: Blackjack (infinite deck, as Gymnasium deals; ``sab`` and ``natural`` honoured),
FrozenLake (any map, slippery or not), Taxi and CliffWalking (their ``P`` tables). Every
reachable state is shown to the policy once, as the exact text observation and info the text
env gives in that state; each answer is parsed by the env's own action parser (fallback
included), and the resulting deterministic policy is evaluated under the same step cap as
sampled evaluation (the registered limit, else ``DEFAULT_MAX_STEPS``).

Example:
    >>> def always_stick(observations, infos):
    ...     return ['{"action": "stick"}'] * len(observations)
    >>> result = exact_value("Text-Blackjack-v1", always_stick)
    >>> round(result.value, 4), result.states, result.parse_rate
    (-0.1829, 280, 1.0)
    >>> supports_exact("Text-CartPole-v1")
    False
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import cache
from typing import Any

import gymnasium as gym
import numpy as np

import llmgym  # noqa: F401  (registers the Text-* envs)
from llmgym.agents.baselines import DEFAULT_MAX_STEPS
from llmgym.agents.planning import (
    _NATURAL,
    CARD_PROBS,
    _cmp,
    _dealer_outcomes,
    _total,
    evaluate_tabular,
)
from llmgym.wrappers.text_action import TextAction
from llmgym.wrappers.text_observation import TextObservation

Act = Callable[[list[str], list[dict[str, Any]]], Sequence[str]]
TABULAR = ("FrozenLakeEnv", "TaxiEnv", "CliffWalkingEnv")
BATCH = 256


@dataclass
class ExactResult:
    """The exact expected return of the policy and what it did in each reachable state."""

    value: float
    """Expected (undiscounted) return from the env's initial-state distribution."""
    states: int
    """Reachable states the policy was asked about."""
    parse_rate: float
    """Share of those states whose answer parsed (the rest took the parser's fallback)."""
    actions: dict[Any, int] = field(default_factory=dict)
    """The base action taken in each reachable state (Blackjack: ``(total, dealer, ace)``)."""


def supports_exact(env_id: str, env_kwargs: dict[str, Any] | None = None) -> bool:
    """Whether ``exact_value`` can evaluate ``env_id`` with these ``gym.make`` kwargs."""
    if env_id not in gym.registry or not env_id.startswith("Text-"):
        return False
    kwargs = dict(env_kwargs or {})
    if kwargs.get("fickle_passenger") or kwargs.get("history"):
        return False  # dynamics outside Taxi's P table; prompts that are not Markov
    try:
        base = gym.make(env_id, **kwargs).unwrapped
    except Exception:  # noqa: BLE001 (unknown kwargs: not ours to evaluate)
        return False
    return type(base).__name__ in ("BlackjackEnv", *TABULAR)


def exact_value(
    env_id: str,
    act: Act,
    env_kwargs: dict[str, Any] | None = None,
    max_steps: int | None = None,
) -> ExactResult:
    """Expected return of the deterministic policy ``act`` (text observations -> answers) on
    ``env_id`` (see the module docstring). ``max_steps`` overrides the step cap."""
    if not supports_exact(env_id, env_kwargs):
        raise ValueError(
            f"Exact evaluation covers Blackjack, FrozenLake, Taxi and CliffWalking (Markov "
            f"prompts), not {env_id}; evaluate it with sampled episodes."
        )
    env = gym.make(env_id, **(env_kwargs or {}))
    text_obs, text_act = _find(env, TextObservation), _find(env, TextAction)
    base = env.unwrapped
    _, reset_info = env.reset(seed=0)
    cap = max_steps or (env.spec.max_episode_steps if env.spec else None) or DEFAULT_MAX_STEPS

    def answer(states: list[Any]) -> tuple[list[int], list[bool]]:
        actions, parsed = [], []
        for i in range(0, len(states), BATCH):
            chunk = states[i : i + BATCH]
            observations = [text_obs.observation(s) for s in chunk]
            infos = [text_obs._with_prompt(_info(reset_info), s) for s in chunk]
            for text in act(observations, infos):
                result = text_act.parser(str(text))
                actions.append(int(result.action))
                parsed.append(bool(result.ok))
        return actions, parsed

    if type(base).__name__ == "BlackjackEnv":
        return _blackjack(base, answer)
    return _tabular(base, answer, cap)


def _find(env: gym.Env, kind: type) -> Any:
    while not isinstance(env, kind):
        env = env.env
    return env


def _info(info: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in info.items() if k not in ("raw_obs", "prob", "action_mask")}


def _tabular(base: Any, answer: Callable, cap: int) -> ExactResult:
    """FrozenLake, Taxi, CliffWalking: the policy's action in every state reachable from the
    start, then exact finite-horizon evaluation on ``P``."""
    P = base.P
    start = np.asarray(base.initial_state_distrib, dtype=float)
    reachable, frontier = set(), [int(s) for s in np.flatnonzero(start)]
    while frontier:
        s = frontier.pop()
        if s in reachable:
            continue
        reachable.add(s)
        for outcomes in P[s].values():
            frontier += [nxt for p, nxt, _, done in outcomes if p > 0 and not done]
    states = sorted(reachable)
    actions, parsed = answer(states)
    policy = np.zeros(len(P), dtype=int)
    policy[states] = actions
    value = evaluate_tabular(P, policy, start, cap)
    return ExactResult(value, len(states), float(np.mean(parsed)), dict(zip(states, actions)))


def _blackjack(base: Any, answer: Callable) -> ExactResult:
    """Blackjack with an infinite deck: a hand ends within a few cards, so no cap applies.
    The policy sees ``(player total, dealer card, usable ace)``; 1 = hit, 0 = stick."""
    sab, natural = bool(base.sab), bool(base.natural)
    states = [
        (total, dealer, usable)
        for total in range(4, 22)
        for dealer in range(1, 11)
        for usable in (0, 1)
        if not usable or total >= 12
    ]
    actions, parsed = answer(states)
    table = dict(zip(states, actions))

    def stick(total: int, dealer: int, is_natural: bool) -> float:
        value = 0.0
        for score, p in _dealer_outcomes(dealer).items():
            reward = _cmp(total, 21 if score == _NATURAL else score)
            if is_natural and score != _NATURAL:
                if sab:
                    reward = 1.0
                elif natural and reward == 1.0:
                    reward = 1.5
            value += p * reward
        return value

    @cache
    def play(total: int, usable: bool, dealer: int, is_natural: bool = False) -> float:
        if table[(total, dealer, int(usable))] == 0:
            return stick(total, dealer, is_natural)
        value = 0.0
        for card, p in CARD_PROBS.items():
            hard = total - 10 * usable + card
            new_total = _total(hard, usable or card == 1)
            value += p * (-1.0 if new_total > 21 else play(new_total, new_total != hard, dealer))
        return value

    start = 0.0
    for c1, p1 in CARD_PROBS.items():
        for c2, p2 in CARD_PROBS.items():
            total = _total(c1 + c2, 1 in (c1, c2))
            for dealer, pd in CARD_PROBS.items():
                value = play(total, total != c1 + c2, dealer, {c1, c2} == {1, 10})
                start += p1 * p2 * pd * value
    return ExactResult(start, len(states), float(np.mean(parsed)), table)


__all__ = ["ExactResult", "exact_value", "supports_exact"]
