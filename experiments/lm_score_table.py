"""How a trained Blackjack policy's scores depend on the state: score(hit) - score(stick) for
every hard hand (player sum 4-21 against each dealer card), from a run directory or checkpoint.
Positive: the greedy policy hits. Shows whether the language model reads the player's sum
(issue 35: SmolLM2 reads its first digit, so 10-19 move together).

    .venv/bin/python experiments/lm_score_table.py runs/lm/NAME [--json OUT]
"""

from __future__ import annotations

import argparse
import json

import gymnasium as gym

import llmgym  # noqa: F401  (registers the Text- envs)
from llmgym.rl import load_trained_policy

SUMS = range(4, 22)
DEALER = range(1, 11)


def observation(player: int, dealer: int) -> str:
    shown = "an ace" if dealer == 1 else f"a {dealer}"
    return f"Your hand totals {player} with no usable ace. The dealer shows {shown}."


def score_table(policy) -> list[list[float]]:
    """Rows: player sums 4-21; columns: dealer ace, 2-10; entries score(hit) - score(stick)."""
    _, info = gym.make("Text-Blackjack-v1").reset(seed=0)
    obs = [observation(p, d) for p in SUMS for d in DEALER]
    scores = policy.action_scores(obs, [info] * len(obs))
    hit, stick = info["valid_actions"].index("hit"), info["valid_actions"].index("stick")
    diffs = [s[hit] - s[stick] for s in scores]
    return [diffs[i * len(DEALER) : (i + 1) * len(DEALER)] for i in range(len(SUMS))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run", help="run directory, checkpoint or policy directory")
    parser.add_argument("--json", help="also write the table here")
    args = parser.parse_args()
    table = score_table(load_trained_policy(args.run))
    print("sum " + "".join(f"{'A' if d == 1 else d:>7}" for d in DEALER))
    for player, row in zip(SUMS, table):
        print(f"{player:>3} " + "".join(f"{x:7.2f}" for x in row))
    if args.json:
        record = {
            "run": args.run,
            "sums": list(SUMS),
            "dealer": list(DEALER),
            "hit_minus_stick": table,
        }
        with open(args.json, "w") as f:
            json.dump(record, f, indent=1)


if __name__ == "__main__":
    main()
