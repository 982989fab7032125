"""The classic leaderboard, regenerated from the committed records: ``leaderboard.md``,
``leaderboard.png`` and ``leaderboard_cost.png`` in benchmarks/results/classic/, and the
block between ``<!-- leaderboard:start -->`` and ``<!-- leaderboard:end -->`` of the docs page
docs/results/leaderboard.md (the script kept its name from when that block was in README.md).

The records: ``episodes.jsonl`` and ``exact.jsonl`` (made by benchmarks/classic_leaderboard.sh),
``sb3_models.json`` (SB3 training budgets and wall times) and, for the policies RL trained from
scratch, their records in benchmarks/results/rl/ (env steps, wall time, command). Nothing is
played or trained here; it takes a few seconds.

    python benchmarks/leaderboard_readme.py            # rewrite the files and the docs block
    python benchmarks/leaderboard_readme.py --check    # exit 1 if either is out of date
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from llmgym.bench.report import (
    CellStats,
    leaderboard_stats,
    plot,
    plot_cost,
    report_text,
    summary_table,
)
from llmgym.bench.suites import SUITES

ROOT = Path(__file__).resolve().parents[1]
OUTPUT = Path("benchmarks/results/classic")
#: The page that holds the leaderboard block (README.md until the docs site).
README = Path("docs/results/leaderboard.md")
#: The leaderboard's agents, in its order (other agents recorded there follow them).
AGENTS = [
    "random",
    "optimal",
    "sb3-ppo",
    "sb3-dqn",
    "sb3-a2c",
    "llm:smollm2-135m",
    "llm:smollm2-135m,mode=generate",
    "llm:smollm2-135m@benchmarks/weights/rl/blackjack-ppo-s0",
    "llm:smollm2-135m@benchmarks/weights/rl/frozenlake-slippery-ppo-s0",
    "llm:smollm2-135m@benchmarks/weights/rl/frozenlake-slippery-ppo-t1g-s0",
    "llm:smollm2-135m@benchmarks/weights/rl/cartpole-ppo-critic-s0",
    "llm:smollm2-135m@benchmarks/weights/rl/cartpole-ppo-vnorm-s0",
    "llm:smollm2-135m@benchmarks/weights/rl/cartpole-ppo-layer8g-s0",
]
COMMAND = "bash benchmarks/classic_leaderboard.sh"
#: Where a training record names no machine: every committed record was made on this project's
#: shared CPU, which newer records name as the trainer's ``machine_description()`` does.
MACHINE = "x86_64 CPU, 2 cores"
START, END = "<!-- leaderboard:start -->", "<!-- leaderboard:end -->"


def readme_block(stats: Sequence[CellStats]) -> str:
    """The docs page's leaderboard block, markers included."""
    made_by = (
        "<!-- made by `python benchmarks/leaderboard_readme.py` from benchmarks/results/classic/"
        " and benchmarks/results/rl/: edit those, not this block -->"
    )
    return f"{START}\n{made_by}\n\n{summary_table(stats, MACHINE)}\n{END}"


def replace_block(text: str, block: str) -> str:
    """``text`` with the part from ``START`` to ``END`` replaced by ``block``.

    Example:
        >>> replace_block(f"a\\n{START}\\nold\\n{END}\\nb", f"{START}\\nnew\\n{END}")
        'a\\n<!-- leaderboard:start -->\\nnew\\n<!-- leaderboard:end -->\\nb'
    """
    start, end = text.find(START), text.find(END)
    if start < 0 or end < start:
        raise ValueError(f"no {START} ... {END} block to replace")
    return text[:start] + block + text[end + len(END) :]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--output", type=Path, help=f"the bench output folder (default {OUTPUT})")
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 if stale")
    parser.add_argument("--no-readme", action="store_true", help=f"leave {README} as it is")
    parser.add_argument("--no-charts", action="store_true", help="skip the two PNG charts")
    args = parser.parse_args(argv)
    output = args.output.resolve() if args.output else OUTPUT
    os.chdir(ROOT)  # the agents' checkpoint paths and the training records are repo-relative
    stats = leaderboard_stats(output, SUITES["classic"], AGENTS)
    files = {output / "leaderboard.md": report_text(stats, COMMAND)}
    if not args.no_readme:
        files[README] = replace_block(README.read_text(), readme_block(stats))
    stale = [path for path, text in files.items() if path.read_text() != text]
    if args.check:
        for path in stale:
            print(f"{path} is out of date: run python benchmarks/leaderboard_readme.py")
        return 1 if stale else 0
    for path in stale:
        path.write_text(files[path])
    if not args.no_charts:
        stale += [output / "leaderboard.png", output / "leaderboard_cost.png"]
        plot(stats, stale[-2])
        plot_cost(stats, stale[-1])
    print("Wrote", ", ".join(str(p) for p in stale) or "nothing: up to date")
    return 0


if __name__ == "__main__":
    sys.exit(main())
