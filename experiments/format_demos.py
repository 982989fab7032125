"""Demos that teach the answer format and no preference: every state a uniformly random player
reaches, once with each valid action (so the demos' NLL is lowest at equal odds). A warm start
on them (``--sft FILE``) lets GRPO start at a parse rate of 1 with every action in play, where
plain GRPO on the language model alone spent its first updates learning to answer validly and
learned to answer "stick" only (docs/results/research-notes.md, "GRPO on the language model
alone"). Seeds 6,000,000 on: disjoint from training, evaluation and ``--sft auto``'s.

    python experiments/format_demos.py Text-Blackjack-v1 /tmp/blackjack-format.jsonl
"""

from __future__ import annotations

import argparse
import json
import random

import gymnasium as gym

import llmgym  # noqa: F401  (registers the Text-* envs)
from llmgym.rl.algorithms.sft import Demo, save_demos
from llmgym.rollout import play

parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
parser.add_argument("env_id")
parser.add_argument("output")
parser.add_argument("--episodes", type=int, default=2000)
args = parser.parse_args()

env = gym.make(args.env_id)
rng = random.Random(0)
states: dict[str, tuple[str, list[str]]] = {}


def act(observations: list[str], infos: list[dict]) -> list[str]:
    valid = list(infos[0]["valid_actions"])
    states.setdefault(observations[0], (infos[0]["system_prompt"], valid))
    return [json.dumps({"action": rng.choice(valid)})]


play(act, [env], range(6_000_000, 6_000_000 + args.episodes), keep=False)
env.close()
demos = [Demo(s, obs, a, valid) for obs, (s, valid) in states.items() for a in valid]
save_demos(args.output, demos)
print(f"{len(states)} states, {len(demos)} demos -> {args.output}")
