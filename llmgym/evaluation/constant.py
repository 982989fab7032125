"""Constant policies: the exact value of always taking one action, the best of them, and
whether a greedy policy is one.

A trained policy that ends up answering every state the same way has learned nothing about
the states; its record says so (``constant_policy``) next to the value that policy class can
reach (``best_constant_value``), so that a result is read against it. Both need the env's
transition model (``exact_value``: Blackjack, FrozenLake, Taxi, CliffWalking); on any other env
``constant_values`` returns None and ``greedy_constant`` makes no call.

Example:
    >>> consts = constant_values("Text-Blackjack-v1")
    >>> {name: round(value, 4) for name, value in consts.values.items()}
    {'stick': -0.1829, 'hit': -1.0}
    >>> consts.best, round(consts.best_value, 4)
    ('stick', -0.1829)
    >>> import json
    >>> def stick_at_17(observations, infos):
    ...     return [json.dumps({"action": "stick" if i["raw_obs"][0] >= 17 else "hit"})
    ...             for i in infos]
    >>> always_hit = lambda observations, infos: ["hit"] * len(observations)
    >>> consts.constant_action(exact_value("Text-Blackjack-v1", stick_at_17)), greedy_constant(
    ...     "Text-Blackjack-v1", always_hit)
    (None, 'hit')
    >>> constant_values("Text-CartPole-v1") is None
    True
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from llmgym.evaluation.exact import Act, ExactResult, exact_value, state_texts, supports_exact


@dataclass(frozen=True)
class ConstantValues:
    """The exact value of each constant policy on one env.

    ``values``: action name -> exact expected return of always answering that name (in the
    env's action order); ``actions``: base action -> its name.
    """

    values: dict[str, float]
    actions: dict[int, str]

    @property
    def best(self) -> str:
        """The name of the best constant action (the first of equals)."""
        return max(self.values, key=lambda name: self.values[name])

    @property
    def best_value(self) -> float:
        """The best constant policy's exact value."""
        return self.values[self.best]

    def constant_action(self, result: ExactResult) -> str | None:
        """The action's name when the policy evaluated in ``result`` takes one action in
        every state it acts in (the fallback action counts where an answer did not parse),
        else None."""
        taken = set(result.actions.values())
        return self.actions.get(taken.pop()) if len(taken) == 1 else None


def constant_values(
    env_id: str, env_kwargs: dict[str, Any] | None = None, max_steps: int | None = None
) -> ConstantValues | None:
    """The exact value of always answering each valid action on ``gym.make(env_id,
    **env_kwargs)`` within ``max_steps`` steps (default: the step cap of sampled evaluation,
    as in ``exact_value``); None where the env has no exact evaluation (``supports_exact`` is
    False: no known transition model, a chat history, ...)."""
    if not supports_exact(env_id, env_kwargs):
        return None
    _, _, info = state_texts(env_id, env_kwargs)[0]
    values: dict[str, float] = {}
    actions: dict[int, str] = {}
    for name in info["valid_actions"]:
        answer = json.dumps({"action": name})
        result = exact_value(
            env_id, lambda obs, _infos, a=answer: [a] * len(obs), env_kwargs, max_steps
        )
        values[name] = result.value
        actions.setdefault(next(iter(result.actions.values())), name)
    return ConstantValues(values, actions)


def greedy_constant(env_id: str, act: Act, env_kwargs: dict[str, Any] | None = None) -> str | None:
    """The action's name when the greedy Markov policy ``act`` (as ``exact_value`` calls it)
    takes that one action in every state an episode can reach; None when it takes several,
    or where the env has no exact evaluation (``act`` is then never called)."""
    consts = constant_values(env_id, env_kwargs)
    if consts is None:
        return None
    return consts.constant_action(exact_value(env_id, act, env_kwargs))


__all__ = ["ConstantValues", "constant_values", "greedy_constant"]
