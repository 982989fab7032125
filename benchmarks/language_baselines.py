"""Random and optimal reference rows for the language suite (no model needed).

- ``random``: a uniformly random valid action (TextWorld's admissible commands, BabyAI's six
  actions); for math, a uniformly random integer answer in [0, 1000];
- ``optimal``: TextWorld's walkthrough, minigrid's BabyAI bot, the reference math answer.

Each env runs the same explicit seeds for both agents (episode ``i`` uses ``reset(seed=i)``;
for TextWorld that is game ``i``). Run from the repository root:

    python benchmarks/language_baselines.py --episodes 100 --textworld-episodes 10
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from collections.abc import Callable
from pathlib import Path

import gymnasium as gym
import numpy as np

import llmgym
from llmgym.envs.language import LANGUAGE_SUITE
from llmgym.envs.language.babyai_env import BabyAIBotPolicy

OUT = Path(__file__).parent / "results" / "language_random.json"
Policy = Callable[[str, dict], str]


def random_policy(env: gym.Env, rng: np.random.Generator) -> tuple[Callable[[], None], Policy]:
    def act(obs: str, info: dict) -> str:
        if info["valid_actions"]:
            return str(rng.choice(info["valid_actions"]))
        return json.dumps({"answer": int(rng.integers(0, 1001))})

    return (lambda: None), act


def optimal_policy(env: gym.Env, env_id: str) -> tuple[Callable[[], None], Policy]:
    """(per-episode reset hook, policy); the walkthrough is read from the reset info."""
    if "BabyAI" in env_id:
        bot = BabyAIBotPolicy(env)
        return bot.reset, lambda obs, info: bot.act()
    plan: list[str] = []

    def reset() -> None:
        plan.clear()

    def act(obs: str, info: dict) -> str:
        if "walkthrough" in info and not plan:
            plan.extend(reversed(info["walkthrough"]))
        if "answer" in info:
            return json.dumps({"answer": info["answer"]})
        return plan.pop() if plan else "look"

    return reset, act


def run(env_id: str, agent: str, episodes: int) -> dict:
    env = gym.make(env_id)
    rng = np.random.default_rng(0)
    if agent == "random":
        on_reset, act = random_policy(env, rng)
    else:
        on_reset, act = optimal_policy(env, env_id)
    returns, lengths, parsed, wins, steps, start = [], [], [], [], 0, time.perf_counter()
    for seed in range(episodes):
        obs, info = env.reset(seed=seed)
        on_reset()
        total, length, done = 0.0, 0, False
        while not done:
            obs, reward, terminated, truncated, info = env.step(act(obs, info))
            total, length, done = total + float(reward), length + 1, terminated or truncated
            parsed.append(bool(info["parse"]["ok"]))
        returns.append(total)
        lengths.append(length)
        wins.append(bool(info.get("won", info.get("correct", total > 0))))
        steps += length
    elapsed = time.perf_counter() - start
    return {
        "episodes": episodes,
        "seeds": f"0..{episodes - 1}",
        "mean_return": round(float(np.mean(returns)), 4),
        "std_return": round(float(np.std(returns)), 4),
        "success_rate": round(float(np.mean(wins)), 4),
        "mean_length": round(float(np.mean(lengths)), 2),
        "parse_rate": round(float(np.mean(parsed)), 4),
        "env_steps_per_s": round(steps / elapsed, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=100)
    parser.add_argument("--textworld-episodes", type=int, default=10)
    args = parser.parse_args()
    results: dict[str, dict] = {}
    for env_id in [i for i in LANGUAGE_SUITE if i in llmgym.text_env_ids()]:
        n = args.textworld_episodes if "TextWorld" in env_id else args.episodes
        results[env_id] = {agent: run(env_id, agent, n) for agent in ("random", "optimal")}
        print(env_id, json.dumps(results[env_id]), flush=True)
    OUT.parent.mkdir(parents=True, exist_ok=True)
    meta = {
        "script": "benchmarks/language_baselines.py",
        "args": vars(args),
        "python": platform.python_version(),
        "machine": platform.machine(),
        "note": "env_steps_per_s include TextWorld game generation when the cache is cold",
    }
    OUT.write_text(json.dumps({"suite": "language", "meta": meta, "results": results}, indent=2))
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
