"""``llmgym eval``: run an agent for N episodes on a text env, batched over K envs.

Episode ``j`` is seeded ``seed + j`` whatever ``num_envs`` is, so agents are compared on the
same episodes. Reports the mean return with a 95 % confidence interval (normal
approximation, 1.96 standard errors), the parse rate (share of answers the env parsed
without falling back) and env-steps per second (wall clock, model time included).

Example:
    >>> result = evaluate("Text-Blackjack-v1", "random", episodes=20, num_envs=4, progress=False)
    >>> result["episodes"], len(result["returns"]), result["parse_rate"]
    (20, 20, 1.0)
"""

from __future__ import annotations

import json
import math
import platform
import time
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
from rich.progress import Progress

from llmgym.agents.registry import TextAgent, make_agent

MODES = ("score", "generate")


def summarize(returns: list[float]) -> tuple[float, float]:
    """(mean, half-width of the 95 % confidence interval).

    Example:
        >>> mean, ci95 = summarize([1.0, -1.0] * 50)
        >>> round(mean, 3), round(ci95, 3)
        (0.0, 0.197)
    """
    mean = float(np.mean(returns))
    if len(returns) < 2:
        return mean, float("nan")
    return mean, 1.96 * float(np.std(returns, ddof=1)) / math.sqrt(len(returns))


def evaluate(
    env_id: str,
    agent: str | TextAgent,
    mode: str = "score",
    episodes: int = 10,
    num_envs: int = 8,
    seed: int = 0,
    output: str | Path | None = None,
    *,
    progress: bool = True,
    env_kwargs: dict[str, Any] | None = None,
    exact: bool = False,
    **agent_options: Any,
) -> dict[str, Any]:
    """Evaluate ``agent`` (a name for ``make_agent`` or a TextAgent) and return the summary
    dict (also written to ``output`` as JSON when given). ``history=k`` makes the envs carry
    the last k turns in ``info["messages"]``; ``env_kwargs`` go to ``gym.make`` and baseline
    agents; ``exact=True`` computes the greedy policy's exact expected return
    (``llmgym.agents.exact``) instead of playing episodes; other options go to
    ``make_agent``."""
    if env_id not in gym.registry:
        raise ValueError(
            f"Unknown environment {env_id!r}; run `llmgym envs` to list the text envs."
        )
    if mode not in MODES:
        raise ValueError(f"Unknown mode {mode!r}; use score or generate.")
    if episodes < 1 or num_envs < 1:
        raise ValueError("episodes and num_envs must be at least 1.")
    # Chat history comes from the env (info["messages"]), so it follows each env's episodes.
    history = int(agent_options.pop("history", None) or 0)
    name = agent if isinstance(agent, str) else type(agent).__name__
    env_kwargs = dict(env_kwargs or {})
    if isinstance(agent, str):
        options = agent_options | ({"greedy": True} if exact else {})
        agent = make_agent(agent, env_id, mode=mode, seed=seed, env_kwargs=env_kwargs, **options)
    if exact:
        return _exact(env_id, name, agent, mode, env_kwargs, output)
    num_envs = min(num_envs, episodes)
    if history:
        env_kwargs["history"] = history
    envs = [gym.make(env_id, **env_kwargs) for _ in range(num_envs)]
    returns: list[float] = [0.0] * episodes
    lengths = [0] * episodes
    parsed = steps = 0
    slots: dict[int, tuple[int, str, dict[str, Any]]] = {}  # env -> (episode, obs, info)
    next_episode = 0
    for i, env in enumerate(envs):
        obs, info = env.reset(seed=seed + next_episode)
        slots[i] = (next_episode, obs, info)
        next_episode += 1
    agent.reset(None)
    bar = Progress(transient=True, disable=not progress)
    task = bar.add_task(f"{name} on {env_id}", total=episodes)
    start = time.perf_counter()
    with bar:
        while slots:
            active = sorted(slots)
            answers = agent.act_batch([slots[i][1] for i in active], [slots[i][2] for i in active])
            for i, answer in zip(active, answers):
                episode = slots[i][0]
                obs, reward, terminated, truncated, info = envs[i].step(answer)
                returns[episode] += float(reward)
                lengths[episode] += 1
                steps += 1
                parsed += bool(info.get("parse", {}).get("ok", True))
                if not (terminated or truncated):
                    slots[i] = (episode, obs, info)
                    continue
                bar.advance(task)
                agent.reset([i])
                if next_episode < episodes:
                    obs, info = envs[i].reset(seed=seed + next_episode)
                    slots[i] = (next_episode, obs, info)
                    next_episode += 1
                else:
                    del slots[i]
    wall = time.perf_counter() - start
    mean, ci95 = summarize(returns)
    result = {
        "env_id": env_id,
        "agent": name,
        "mode": mode,
        "episodes": episodes,
        "num_envs": num_envs,
        "seed": seed,
        "mean_return": mean,
        "ci95": ci95,
        "std_return": float(np.std(returns, ddof=1)) if episodes > 1 else 0.0,
        "mean_length": float(np.mean(lengths)),
        "parse_rate": parsed / steps,
        "env_steps": steps,
        "env_steps_per_s": steps / wall,
        "wall_s": wall,
        "machine": f"{platform.machine()} {platform.system()}, python {platform.python_version()}",
        "returns": returns,
    }
    if output is not None:
        Path(output).parent.mkdir(parents=True, exist_ok=True)
        Path(output).write_text(json.dumps(result, indent=2) + "\n")
    return result


def _exact(
    env_id: str, name: str, agent: TextAgent, mode: str, env_kwargs: dict, output: Any
) -> dict[str, Any]:
    from llmgym.agents.exact import exact_value

    start = time.perf_counter()
    exact = exact_value(env_id, agent.act_batch, env_kwargs)
    result = {
        "env_id": env_id,
        "env_kwargs": env_kwargs,
        "agent": name,
        "mode": mode,
        "eval_method": "exact",
        "mean_return": exact.value,
        "ci95": 0.0,
        "states": exact.states,
        "parse_rate": exact.parse_rate,
        "wall_s": time.perf_counter() - start,
        "machine": f"{platform.machine()} {platform.system()}, python {platform.python_version()}",
    }
    if output is not None:
        Path(output).parent.mkdir(parents=True, exist_ok=True)
        Path(output).write_text(json.dumps(result, indent=2) + "\n")
    return result


def format_result(result: dict[str, Any]) -> str:
    """The one-paragraph summary ``llmgym eval`` prints.

    Example:
        >>> print(format_result({"env_id": "E", "agent": "random", "episodes": 4,
        ...     "mean_return": 0.5, "ci95": 0.25, "parse_rate": 1.0, "env_steps_per_s": 10.0,
        ...     "mean_length": 2.0}))
        random on E: mean return +0.500 ± 0.250 (95% CI, 4 episodes, mean length 2.0)
        parse rate 100.0%, 10.0 env-steps/s
        >>> print(format_result({"env_id": "E", "agent": "optimal", "eval_method": "exact",
        ...     "mean_return": 0.74, "states": 11, "parse_rate": 1.0}))
        optimal on E: exact expected return of the greedy policy +0.7400 (11 states)
        parse rate 100.0%
    """
    if result.get("eval_method") == "exact":
        return (
            f"{result['agent']} on {result['env_id']}: exact expected return of the greedy "
            f"policy {result['mean_return']:+.4f} ({result['states']} states)\n"
            f"parse rate {100 * result['parse_rate']:.1f}%"
        )
    return (
        f"{result['agent']} on {result['env_id']}: mean return {result['mean_return']:+.3f} "
        f"± {result['ci95']:.3f} (95% CI, {result['episodes']} episodes, "
        f"mean length {result['mean_length']:.1f})\n"
        f"parse rate {100 * result['parse_rate']:.1f}%, "
        f"{result['env_steps_per_s']:.1f} env-steps/s"
    )


__all__ = ["evaluate", "format_result", "summarize"]
