"""Exact evaluation of a deterministic Markov text policy from the env's transition model.

On the toy-text envs (Blackjack with its infinite deck, FrozenLake, Taxi, CliffWalking) the
expected return of a policy that answers each observation the same way can be computed with
no Monte Carlo noise. ``exact_value`` enumerates every state an episode can reach, writes for
each the observation text and info the ``Text-*`` env would give there (its own
``TextObservation``), asks ``act`` for the answers in batches, parses them with the env's own
``TextAction`` parser (fallback included) and evaluates the resulting policy by a finite-horizon
recursion under the step cap of sampled evaluation: the registered time limit, else
``DEFAULT_MAX_STEPS`` (``make_eval_env``). On a FrozenLake map set (``llmgym.envs.maps``) it
does so on every map of the set and reports the mean: the exact success rate over the set.

Example:
    >>> import json
    >>> def stick_at_17(observations, infos):
    ...     return [json.dumps({"action": "stick" if i["raw_obs"][0] >= 17 else "hit"})
    ...             for i in infos]
    >>> result = exact_value("Text-Blackjack-v1", stick_at_17)
    >>> round(result.value, 4), result.states, result.parse_rate, result.horizon
    (-0.0759, 280, 1.0, 200)
    >>> supports_exact("Text-FrozenLake-v1", {"is_slippery": False}), supports_exact(
    ...     "Text-CartPole-v1")
    (True, False)
    >>> def right_then_down(observations, infos):  # a map-blind path: the top row, then down
    ...     return [json.dumps({"action": "RIGHT" if i["raw_obs"] % 4 < 3 else "DOWN"})
    ...             for i in infos]
    >>> result = exact_value("Text-FrozenLakeMaps4x4-Heldout-v0", right_then_down)
    >>> result.maps, result.value  # the share of the 100 held-out maps it crosses
    (100, 0.33)
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import gymnasium as gym
import numpy as np

from llmgym.baselines.agents import RandomAgent
from llmgym.baselines.base import TextAgent
from llmgym.baselines.planning import Transitions, blackjack_mdp, evaluate_tabular
from llmgym.envs.maps import FrozenLakeMapsEnv
from llmgym.envs.registration import check_env_id, make_eval_env
from llmgym.errors import AgentError, ConfigError
from llmgym.wrappers.history import HistoryWrapper
from llmgym.wrappers.text_action import TextAction
from llmgym.wrappers.text_observation import TextObservation

#: Base env classes whose transition model is known exactly.
EXACT_ENVS = ("BlackjackEnv", "FrozenLakeEnv", "FrozenLakeMapsEnv", "TaxiEnv", "CliffWalkingEnv")
#: States answered per ``act`` call.
BATCH_SIZE = 256
#: Observations per forward pass of an LLM agent in ``agent_act`` (as the bench's batches):
#: 256 Taxi prompts with six candidates each in one pass held ~18 GB of KV cache.
LLM_BATCH_SIZE = 32
#: ``act(observations, infos) -> answers``: one answer string per text observation.
Act = Callable[[list[str], list[dict[str, Any]]], list[str]]


@dataclass(frozen=True)
class ExactResult:
    """The exact evaluation of one policy.

    ``value``: expected undiscounted return from the env's initial-state distribution within
    ``horizon`` steps (on a map set: its mean over the ``maps`` maps); ``states``: distinct
    observations the policy was asked about; ``parse_rate``: share of them whose answer parsed
    (the others took the fallback action); ``actions``: the base action taken for each raw
    observation (on a map set: for each ``(map index, raw observation)``).
    """

    value: float
    states: int
    parse_rate: float
    actions: dict[Any, int]
    horizon: int
    maps: int = 1


def _layers(env: gym.Env) -> list[gym.Env]:
    layers = [env]
    while isinstance(layers[-1], gym.Wrapper):
        layers.append(layers[-1].env)
    return layers


def _find(env: gym.Env, kind: type) -> Any:
    return next((layer for layer in _layers(env) if isinstance(layer, kind)), None)


def _make(env_id: str, env_kwargs: dict[str, Any] | None) -> tuple[gym.Env | None, str | None]:
    """The env as sampled evaluation makes it, or None and why exact evaluation cannot run."""
    try:
        check_env_id(env_id)
    except ConfigError as error:
        return None, str(error)
    try:
        env = make_eval_env(env_id, **(env_kwargs or {}))
    except (TypeError, ValueError, gym.error.Error) as error:
        return None, f"{env_id} cannot be made with {env_kwargs}: {error}"
    base = env.unwrapped
    if type(base).__name__ not in EXACT_ENVS:
        return None, (
            f"{env_id} has no known transition model (exact evaluation covers Blackjack, "
            "FrozenLake, Taxi and CliffWalking); use sampled evaluation without --exact."
        )
    action = _find(env, TextAction)
    if _find(env, TextObservation) is None or action is None:
        return None, f"{env_id} is not a text env; evaluate its Text- twin exactly instead."
    if _find(env, HistoryWrapper) is not None:
        return None, "Exact evaluation needs a Markov policy; drop the chat history (history=0)."
    if action.on_invalid not in ("fallback", "penalty"):
        return (
            None,
            f"Exact evaluation needs on_invalid=fallback or penalty, not {action.on_invalid}.",
        )
    if getattr(base, "fickle_passenger", False):
        return None, "Taxi's fickle passenger is not in its transition model; drop that option."
    return env, None


def exact_unsupported_reason(env_id: str, env_kwargs: dict[str, Any] | None = None) -> str | None:
    """Why ``exact_value`` cannot evaluate ``env_id`` (one sentence), or None when it can."""
    return _make(env_id, env_kwargs)[1]


def supports_exact(env_id: str, env_kwargs: dict[str, Any] | None = None) -> bool:
    """True when ``exact_value`` can evaluate policies on ``gym.make(env_id, **env_kwargs)``."""
    return exact_unsupported_reason(env_id, env_kwargs) is None


def _model(base: gym.Env) -> tuple[Transitions, np.ndarray, Callable[[int], Any]]:
    """Transitions, start distribution and the raw observation of each state."""
    if type(base).__name__ == "BlackjackEnv":
        mdp = blackjack_mdp(sab=bool(base.sab), natural=bool(base.natural))
        return mdp.P, mdp.start, mdp.observation
    return base.P, np.asarray(base.initial_state_distrib, dtype=float), int


def acting_states(P: Transitions, start: np.ndarray) -> list[int]:
    """States an episode can be in when an action is asked for: the start states and all
    states reached by a non-terminal transition under any actions.

    Example:
        >>> lake = gym.make("FrozenLake-v1").unwrapped
        >>> len(acting_states(lake.P, lake.initial_state_distrib))  # 16 cells - 4 holes - goal
        11
    """
    seen = {int(s) for s in np.flatnonzero(start)}
    todo = list(seen)
    while todo:
        state = todo.pop()
        for outcomes in P[state].values():
            for p, nxt, _, done in outcomes:
                if p > 0 and not done and int(nxt) not in seen:
                    seen.add(int(nxt))
                    todo.append(int(nxt))
    return sorted(seen)


def state_texts(
    env_id: str, env_kwargs: dict[str, Any] | None = None
) -> list[tuple[Any, str, dict[str, Any]]]:
    """``(raw_obs, observation, info)`` for every distinct observation an episode can show,
    as the text env writes them (``info``: ``system_prompt``, ``valid_actions``, ``raw_obs``,
    Taxi's ``action_mask``, a map set's ``map_index`` and ``map``; the path-dependent
    ``prob`` and ``parse`` are left out); on a map set, those of every map in turn."""
    env, reason = _make(env_id, env_kwargs)
    if env is None:
        raise ConfigError(reason)
    return [row for table in _tables(env) for row in table.rows.values()]


@dataclass(frozen=True)
class _Table:
    """One map's model: transitions, start distribution, the raw observation of each state,
    the acting states, and a row ``(raw_obs, observation, info)`` per distinct observation,
    keyed by raw observation, or by ``(map index, raw observation)`` on a map set."""

    P: Transitions
    start: np.ndarray
    obs_of: Callable[[int], Any]
    states: list[int]
    rows: dict[Any, tuple[Any, str, dict[str, Any]]]
    key: Callable[[Any], Any]


def _tables(env: gym.Env) -> list[_Table]:
    """The model of the env's one map, or of each map of a map set (loaded in turn)."""
    base = env.unwrapped
    if not isinstance(base, FrozenLakeMapsEnv):
        return [_table(env, lambda raw: raw)]
    tables = []
    for index in range(len(base.maps)):
        base.load_map(index)
        tables.append(_table(env, lambda raw, index=index: (index, raw)))
    return tables


def _table(env: gym.Env, key: Callable[[Any], Any]) -> _Table:
    base = env.unwrapped
    observe: TextObservation = _find(env, TextObservation)
    P, start, obs_of = _model(base)
    states = acting_states(P, start)
    rows: dict[Any, tuple[Any, str, dict[str, Any]]] = {}
    for state in states:
        raw = obs_of(state)
        if key(raw) not in rows:
            extra = {"action_mask": base.action_mask(state)} if hasattr(base, "action_mask") else {}
            if isinstance(base, FrozenLakeMapsEnv):  # the map, as the env's own info has it
                extra.update(base.map_info())
            rows[key(raw)] = (raw, observe.observation(raw), observe.with_prompt(extra, raw))
    return _Table(P, start, obs_of, states, rows, key)


def exact_value(
    env_id: str,
    act: Act,
    env_kwargs: dict[str, Any] | None = None,
    max_steps: int | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> ExactResult:
    """Exact expected return of the deterministic Markov policy ``act`` on
    ``gym.make(env_id, **env_kwargs)`` within ``max_steps`` steps (default: the step cap of
    sampled evaluation); on a map set, its mean over the maps. ``act`` is called once per
    batch of ``BATCH_SIZE`` states; it must answer each observation as it would in an episode
    (greedily, with no memory); ``progress(done, total)`` after each batch, in states. Raises
    ``ConfigError`` (one sentence) where ``supports_exact`` is False."""
    env, reason = _make(env_id, env_kwargs)
    if env is None:
        raise ConfigError(reason)
    horizon = int(max_steps if max_steps is not None else env.spec.max_episode_steps)
    parse = _find(env, TextAction)
    tables = _tables(env)
    rows = [(key, row) for table in tables for key, row in table.rows.items()]
    actions: dict[Any, int] = {}
    parsed: dict[Any, bool] = {}
    for i in range(0, len(rows), BATCH_SIZE):
        batch = rows[i : i + BATCH_SIZE]
        answers = list(act([text for _, (_, text, _) in batch], [info for _, (*_, info) in batch]))
        if len(answers) != len(batch):
            raise ValueError(f"act answered {len(answers)} observations out of {len(batch)}.")
        for (key, _), answer in zip(batch, answers):
            result = parse.parser(answer)
            actions[key], parsed[key] = int(result.action), bool(result.ok)
        if progress is not None:
            progress(i + len(batch), len(rows))
    values = []
    for table in tables:
        policy = np.zeros(len(table.P), dtype=int)
        penalty = np.zeros(len(table.P))
        for state in table.states:
            key = table.key(table.obs_of(state))
            policy[state] = actions[key]
            penalty[state] = 0.0 if parsed[key] else parse.invalid_penalty
        values.append(evaluate_tabular(table.P, policy, table.start, horizon, penalty))
    value = float(np.mean(values))
    parse_rate = sum(parsed.values()) / len(rows)
    return ExactResult(value, len(rows), parse_rate, actions, horizon, len(tables))


def agent_act(agent: TextAgent) -> Act:
    """``act`` for ``exact_value`` from a ``make_agent`` agent: each call forgets the agent's
    history, and an LLM agent acts greedily (its config gets ``greedy=True, history=0`` for the
    call). The random agent has no deterministic policy and is refused (``AgentError``)."""
    if isinstance(agent, RandomAgent):
        raise AgentError("The random agent is not deterministic, so it has no exact value.")
    policy = getattr(agent, "policy", None)

    def act(observations: Sequence[str], infos: Sequence[dict[str, Any]]) -> list[str]:
        agent.reset(None)
        config = getattr(policy, "config", None)
        if config is None:
            return list(agent.act_batch(observations, infos))
        policy.config = dataclasses.replace(config, greedy=True, history=0)
        try:
            answers: list[str] = []
            for i in range(0, len(observations), LLM_BATCH_SIZE):
                chunk = slice(i, i + LLM_BATCH_SIZE)
                answers += agent.act_batch(observations[chunk], infos[chunk])
            return answers
        finally:
            policy.config = config

    return act


__all__ = [
    "EXACT_ENVS",
    "ExactResult",
    "acting_states",
    "agent_act",
    "exact_unsupported_reason",
    "exact_value",
    "state_texts",
    "supports_exact",
]
