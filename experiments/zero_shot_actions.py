"""Zero-shot action distribution of SmolLM2-135M per curated discrete env, with the answer
format the prompts used to have (an example naming the first valid action) and the one they
have now (a placeholder naming none).

For each env, states come from seeded random-policy rollouts; the policy scores every valid
action (score mode, temperature 1) and we report the mean probability of each action and how
often it is the argmax. Writes benchmarks/results/zero_shot/actions.json and prints a
markdown table (docs/training.md quotes it).

    python experiments/zero_shot_actions.py                 # ~10 minutes on one CPU thread
    python experiments/zero_shot_actions.py --states 4 --model tiny   # a smoke run
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import gymnasium as gym
import numpy as np
import torch

import llmgym  # noqa: F401  (registers the Text-* envs)
from llmgym.describers import answer_format
from llmgym.policy import LLMPolicy, PolicyConfig
from llmgym.policy.models import load_model_for

ENVS = [
    "Text-CartPole-v1",
    "Text-Acrobot-v1",
    "Text-MountainCar-v0",
    "Text-Blackjack-v1",
    "Text-FrozenLake-v1",
    "Text-Taxi-v4",
    "Text-CliffWalking-v1",
]
BENCH_RESULTS = Path(__file__).resolve().parents[1] / "benchmarks" / "results"
RESULTS = BENCH_RESULTS / "zero_shot" / "actions.json"
OLD_FORMAT = 'Reply with a JSON object naming one valid action, for example {{"action": "{}"}}.'


def states(env_id: str, n: int, seed: int = 0) -> list[tuple[str, dict]]:
    """``n`` (observation, info) pairs from random-policy rollouts with seeds ``seed..``."""
    env = gym.make(env_id)
    rng = np.random.default_rng(seed)
    out: list[tuple[str, dict]] = []
    episode = 0
    while len(out) < n:
        obs, info = env.reset(seed=seed + episode)
        episode += 1
        done = False
        while not done and len(out) < n:
            out.append((obs, info))
            action = str(rng.choice(info["valid_actions"]))
            obs, _, terminated, truncated, info = env.step(f'{{"action": "{action}"}}')
            done = terminated or truncated
    return out


def with_old_format(info: dict, env: gym.Env) -> dict:
    """The info with the system prompt's answer format as it was before the placeholder."""
    names = list(info["valid_actions"])
    prompt = info["system_prompt"].replace(answer_format(env, names), OLD_FORMAT.format(names[0]))
    return info | {"system_prompt": prompt}


def distribution(policy: LLMPolicy, pairs: list[tuple[str, dict]]) -> dict[str, dict]:
    """Mean probability and argmax share of each valid action over ``pairs``."""
    names = list(pairs[0][1]["valid_actions"])
    rows: list[list[float]] = []
    for i in range(0, len(pairs), 16):
        chunk = pairs[i : i + 16]
        rows += policy.action_probabilities([o for o, _ in chunk], [info for _, info in chunk])
    arr = np.array(rows)
    top = np.bincount(arr.argmax(1), minlength=len(names)) / len(arr)
    return {
        name: {"mean_prob": round(float(arr[:, k].mean()), 3), "argmax": round(float(top[k]), 3)}
        for k, name in enumerate(names)
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--states", type=int, default=64, help="states per env")
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--output", default=str(RESULTS))
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    model, tokenizer = load_model_for(args.model)
    policy = LLMPolicy(model, tokenizer, PolicyConfig(mode="score"))
    result: dict[str, dict] = {}
    for env_id in ENVS:
        pairs = states(env_id, args.states)
        env = gym.make(env_id)
        old = [(o, with_old_format(info, env)) for o, info in pairs]
        result[env_id] = {"before": distribution(policy, old), "after": distribution(policy, pairs)}
        print(env_id, json.dumps(result[env_id]), flush=True)
    out = {"model": args.model, "states_per_env": args.states, "envs": result}
    Path(args.output).parent.mkdir(parents=True, exist_ok=True)
    Path(args.output).write_text(json.dumps(out, indent=2))
    print(table(result))


def table(result: dict[str, dict]) -> str:
    """Markdown: per env, mean P(action) before -> after (argmax share in brackets)."""
    lines = ["| env | action: mean P before -> after (argmax share before -> after) |", "|---|---|"]
    for env_id, r in result.items():
        cells = [
            f"{a} {r['before'][a]['mean_prob']:.2f} -> {r['after'][a]['mean_prob']:.2f} "
            f"({r['before'][a]['argmax']:.2f} -> {r['after'][a]['argmax']:.2f})"
            for a in r["after"]
        ]
        lines.append(f"| {env_id} | {'; '.join(cells)} |")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
