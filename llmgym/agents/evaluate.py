"""``llmgym eval``: run an agent for N episodes on a text env, batched over K envs.

Episode ``j`` is seeded ``seed + j`` whatever ``num_envs`` is, so agents are compared on the
same episodes. Reports the mean return with a 95 % confidence interval (normal
approximation, 1.96 standard errors), the parse rate (share of answers the env parsed
without falling back) and env-steps per second (wall clock, model time included).
``exact=True`` computes the greedy policy's expected return from the transition model instead
(``llmgym.evaluation.exact``; Blackjack, FrozenLake, Taxi, CliffWalking), with a CI of 0.

Example:
    >>> result = evaluate("Text-Blackjack-v1", "random", episodes=20, num_envs=4, progress=False)
    >>> result["episodes"], len(result["returns"]), result["parse_rate"]
    (20, 20, 1.0)
"""

from __future__ import annotations

import json
import platform
import time
from pathlib import Path
from typing import Any

import gymnasium as gym
from rich.progress import Progress

from llmgym.agents.registry import make_agent
from llmgym.baselines.base import TextAgent
from llmgym.envs.registration import check_env_id, make_eval_env
from llmgym.errors import ConfigError
from llmgym.evaluation.evaluator import evaluate as evaluate_episodes
from llmgym.files import write_text
from llmgym.rollout import MAX_ENVS, Episode, check_count

MODES = ("score", "generate")


def acting_mode(agent: Any, mode: str | None) -> str:
    """The mode ``agent`` acts in: its LLM policy's, else ``mode`` (score by default).

    >>> acting_mode(object(), None), acting_mode(object(), "generate")
    ('score', 'generate')
    """
    config = getattr(getattr(agent, "policy", None), "config", None)
    return getattr(config, "mode", None) or mode or "score"


def evaluate(
    env_id: str,
    agent: str | TextAgent,
    mode: str | None = None,
    episodes: int = 10,
    num_envs: int = 8,
    seed: int = 0,
    output: str | Path | None = None,
    *,
    progress: bool = True,
    exact: bool = False,
    env_kwargs: dict[str, Any] | None = None,
    keep_returns: bool = True,
    **agent_options: Any,
) -> dict[str, Any]:
    """Evaluate ``agent`` (a name for ``make_agent`` or a TextAgent) and return the summary
    dict (also written to ``output`` as JSON when given). ``history=k`` makes the envs carry
    the last k turns in ``info["messages"]``; other options go to ``make_agent``.
    ``env_kwargs`` go to ``gym.make`` (and to baseline agents); ``exact=True`` evaluates the
    greedy policy exactly (see ``evaluate_exact``) instead of sampling episodes.
    ``keep_returns=False`` leaves the per-episode ``returns`` out (an empty list): memory then
    stays flat whatever ``episodes`` is."""
    if exact:
        return evaluate_exact(
            env_id, agent, mode, seed, output, env_kwargs, progress=progress, **agent_options
        )
    check_env_id(env_id)
    if mode is not None and mode not in MODES:
        raise ConfigError(f"Unknown mode {mode!r}; use score or generate.")
    if episodes < 1 or num_envs < 1:
        raise ConfigError("episodes and num_envs must be at least 1.")
    check_count(episodes, "--episodes")
    check_count(num_envs, "--num-envs", MAX_ENVS)
    # Chat history comes from the env (info["messages"]), so it follows each env's episodes.
    history = int(agent_options.pop("history", None) or 0)
    name = agent if isinstance(agent, str) else type(agent).__name__
    num_envs = min(num_envs, episodes)
    make_kwargs = {**(env_kwargs or {}), **({"history": history} if history else {})}
    envs = [_make_env(env_id, make_kwargs) for _ in range(num_envs)]
    if isinstance(agent, str):
        options = {**_with_env(env_kwargs), **agent_options}
        agent = make_agent(agent, env_id, mode=mode, seed=seed, **options)
    agent.reset(None)
    bar = Progress(transient=True, disable=not progress)
    task = bar.add_task(f"{name} on {env_id}", total=episodes)

    def episode_ended(slot: int, _episode: Episode) -> None:
        bar.advance(task)
        agent.reset([slot])

    with bar:
        played = evaluate_episodes(
            agent.act_batch,
            envs,
            range(seed, seed + episodes),
            on_end=episode_ended,
            keep_returns=keep_returns,
        )
    if not played.finite_episodes:
        raise ValueError(
            f"Every episode of {name} on {env_id} had a non-finite return; no mean to report."
        )
    summary = played.summary()
    kept = ("mean_return", "ci95", "nonfinite_episodes", "std_return", "mean_length")
    result = {
        "env_id": env_id,
        "agent": name,
        "mode": acting_mode(agent, mode),
        "episodes": episodes,
        "num_envs": num_envs,
        "seed": seed,
        **{k: summary[k] for k in kept},
        **{k: summary[k] for k in ("parse_rate", "env_steps", "env_steps_per_s", "wall_s")},
        "machine": f"{platform.machine()} {platform.system()}, python {platform.python_version()}",
        "returns": summary["returns"],
    }
    _write(result, output)
    return result


def _with_env(env_kwargs: dict[str, Any] | None) -> dict[str, Any]:
    """``make_agent`` options carrying the env kwargs, when there are any."""
    return {"env_kwargs": dict(env_kwargs)} if env_kwargs else {}


def _make_env(env_id: str, kwargs: dict[str, Any]) -> gym.Env:
    """``make_eval_env`` (the step cap of every evaluation), with a one-sentence error for
    keyword arguments the env does not take."""
    try:
        return make_eval_env(env_id, **kwargs)
    except TypeError as error:
        raise ConfigError(f"{env_id} does not take the env kwargs {kwargs}: {error}.") from None


def _write(result: dict[str, Any], output: str | Path | None) -> None:
    """``result`` as JSON in ``output``, all-or-nothing (``OutputError`` if it cannot be)."""
    if output is not None:
        write_text(output, json.dumps(result, indent=2) + "\n")


def evaluate_exact(
    env_id: str,
    agent: str | TextAgent,
    mode: str | None = None,
    seed: int = 0,
    output: str | Path | None = None,
    env_kwargs: dict[str, Any] | None = None,
    *,
    progress: bool = True,
    **agent_options: Any,
) -> dict[str, Any]:
    """The exact expected return of ``agent``'s greedy policy (``llmgym.evaluation.exact``) as
    ``evaluate``'s summary dict, with ``exact: True``, ``ci95: 0``, no episodes, and ``maps``
    (the maps of a FrozenLake map set the mean is over; 1 elsewhere). ``progress``: a bar over
    the states answered.

    Example:
        >>> lake = {"is_slippery": False}
        >>> r = evaluate_exact("Text-FrozenLake-v1", "optimal", env_kwargs=lake, progress=False)
        >>> r["mean_return"], r["ci95"], r["states"], r["horizon"]
        (1.0, 0.0, 11, 100)
    """
    from llmgym.evaluation.exact import agent_act, exact_unsupported_reason, exact_value

    reason = exact_unsupported_reason(env_id, env_kwargs)
    if reason is not None:
        raise ConfigError(reason)
    if mode is not None and mode not in MODES:
        raise ConfigError(f"Unknown mode {mode!r}; use score or generate.")
    if agent_options.pop("history", None):
        raise ConfigError("--exact evaluates a Markov policy; drop --history.")
    name = agent if isinstance(agent, str) else type(agent).__name__
    if isinstance(agent, str):
        options = {**_with_env(env_kwargs), **agent_options, "greedy": True}
        agent = make_agent(agent, env_id, mode=mode, seed=seed, **options)
    start = time.perf_counter()
    bar = Progress(transient=True, disable=not progress)
    task = bar.add_task(f"{name} on {env_id}: exact value, states answered", total=None)
    with bar:
        exact = exact_value(
            env_id,
            agent_act(agent),
            env_kwargs,
            progress=lambda done, total: bar.update(task, completed=done, total=total),
        )
    result = {
        "env_id": env_id,
        "agent": name,
        "mode": acting_mode(agent, mode),
        "exact": True,
        "env_kwargs": dict(env_kwargs or {}),
        "mean_return": exact.value,
        "ci95": 0.0,
        "episodes": 0,
        "states": exact.states,
        "maps": exact.maps,
        "horizon": exact.horizon,
        "parse_rate": exact.parse_rate,
        "wall_s": time.perf_counter() - start,
        "machine": f"{platform.machine()} {platform.system()}, python {platform.python_version()}",
        "actions": {str(raw): action for raw, action in exact.actions.items()},
    }
    _write(result, output)
    return result


def format_result(result: dict[str, Any]) -> str:
    """The one-paragraph summary ``llmgym eval`` prints.

    Example:
        >>> print(format_result({"env_id": "E", "agent": "random", "episodes": 4,
        ...     "mean_return": 0.5, "ci95": 0.25, "parse_rate": 1.0, "env_steps_per_s": 10.0,
        ...     "mean_length": 2.0}))
        random on E: mean return +0.500 ± 0.250 (95% CI, 4 episodes, mean length 2.0)
        parse rate 100.0%, 10.0 env-steps/s
        >>> print(format_result({"env_id": "M", "agent": "optimal", "exact": True, "maps": 57,
        ...     "states": 700, "mean_return": 1.0, "parse_rate": 1.0, "horizon": 30}))
        optimal on M: exact return +1.0000 ± 0 (exact mean over 57 maps (700 states), 30-step cap)
        parse rate 100.0% of states
    """
    if result.get("exact"):
        maps = int(result.get("maps", 1))
        over = (
            f"exact mean over {maps} maps ({result['states']} states)"
            if maps > 1
            else f"exact, greedy policy over {result['states']} states"
        )
        return (
            f"{result['agent']} on {result['env_id']}: exact return {result['mean_return']:+.4f} "
            f"± 0 ({over}, {result['horizon']}-step cap)\n"
            f"parse rate {100 * result['parse_rate']:.1f}% of states"
        )
    return (
        f"{result['agent']} on {result['env_id']}: mean return {result['mean_return']:+.3f} "
        f"± {result['ci95']:.3f} (95% CI, {result['episodes']} episodes, "
        f"mean length {result['mean_length']:.1f})\n"
        f"parse rate {100 * result['parse_rate']:.1f}%, "
        f"{result['env_steps_per_s']:.1f} env-steps/s"
    )


__all__ = ["evaluate", "evaluate_exact", "format_result"]
