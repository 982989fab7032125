"""Whether two source trees train alike: short runs of nine algorithm and mode cases on the
tiny model, each tree in its own process (``PYTHONPATH``), their ``metrics.csv`` compared row
by row with the timings left out. The check behind "the composed engine logs the same metrics
as the mixed one" (issue 51; run against a ``git worktree`` of the older commit).

    git worktree add --detach /tmp/base 7c814c5
    python experiments/metrics_identity.py /tmp/base . --out /tmp/identity   # ~15 min, 2 cores
"""

from __future__ import annotations

import argparse
import csv
import os
import subprocess
import sys
from pathlib import Path

COMMON = dict(
    model="tiny", num_envs=4, episodes_per_update=8, eval_every=2, checkpoint_every=2,
    progress=False, num_threads=1, eval_episodes=4, total_episodes=24, minibatch_size=4,
)  # fmt: skip
CASES = {
    "ppo": ("ppo", dict(env_id="Text-Blackjack-v1", update_epochs=2, kl_coef=0.05)),
    "ppo-head": (
        "ppo",
        dict(env_id="Text-Blackjack-v1", action_head=True, value_norm=True, average_decay=0.9),
    ),
    "ppo-gen": ("ppo", dict(env_id="Text-Blackjack-v1", mode="generate", max_new_tokens=6)),
    "qac": (
        "qac",
        dict(env_id="Text-Blackjack-v1", action_head=False, q_window=2, head_layers=[1]),
    ),
    "qac-gen": (
        "qac",
        dict(env_id="Text-Blackjack-v1", mode="generate", max_new_tokens=6, normalization="sum"),
    ),
    "grpo": ("grpo", dict(env_id="Text-Blackjack-v1", group_size=4, update_epochs=2)),
    "grpo-step": ("grpo", dict(env_id="Text-FrozenLake-v1", group_size=4, group_level="step")),
    "reinforce": (
        "reinforce",
        dict(env_id="Text-Blackjack-v1", ref_refresh_every=1, baseline="ema"),
    ),
    "ppo-mirror": (
        "ppo",
        dict(env_id="Text-CartPole-v1", mirror=True, total_episodes=8, episodes_per_update=4),
    ),
}


def run_case(name: str, out: str) -> None:
    """Train one case in this process (the tree ``llmgym`` imports from)."""
    from llmgym.rl import make_trainer

    algo, kwargs = CASES[name]
    make_trainer(algo, output_dir=f"{out}/{name}", **(COMMON | kwargs)).train()


def rows(path: Path) -> list[dict[str, str]]:
    """The metrics rows without timings (``perf/*`` and wall seconds differ run to run)."""
    with path.open() as f:
        return [
            {k: v for k, v in r.items() if not k.startswith("perf/") and not k.endswith("wall_s")}
            for r in csv.DictReader(f)
        ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("trees", nargs=2, help="the two source trees (repository roots)")
    parser.add_argument("--out", default="/tmp/llmgym-metrics-identity")
    parser.add_argument("--cases", nargs="+", default=list(CASES), choices=list(CASES))
    parser.add_argument("--run", nargs=2, metavar=("CASE", "OUT"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.run:
        return run_case(*args.run)
    for i, tree in enumerate(args.trees):
        env = os.environ | {"PYTHONPATH": str(Path(tree).resolve())}
        for name in args.cases:
            command = [sys.executable, __file__, *args.trees, "--run", name, f"{args.out}/{i}"]
            subprocess.run(command, env=env, check=True, capture_output=True)
    differ = 0
    for name in args.cases:
        a, b = (rows(Path(args.out, str(i), name, "metrics.csv")) for i in (0, 1))
        same = a == b
        differ += not same
        print(f"{name}: {len(a)} and {len(b)} rows, {'identical' if same else 'DIFFERENT'}")
    sys.exit(1 if differ else 0)


if __name__ == "__main__":
    main()
