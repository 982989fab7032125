"""The figures of a CartPole screen (experiments/cartpole_screen.sh), one line per run: env steps
reached, throughput, explained variance of the critic over the last five updates, mean value
and sampled return at the last update.

Run: python experiments/screen_table.py [DIR]   (default: benchmarks/results/rl/cartpole_screen)
"""

from __future__ import annotations

import argparse
import csv
import sys
from pathlib import Path


def summary(name: str, path: Path) -> str:
    """One run's line, from its metrics.csv."""
    with path.open() as f:
        rows = [r for r in csv.DictReader(f) if r.get("charts/episodic_return")]
    last = rows[-1]
    ev = [float(r["losses/explained_variance"]) for r in rows[-5:]]
    return (
        f"{name:12} {int(last['env_steps']):6,} steps  "
        f"{float(last['perf/env_steps_per_s']):5.1f} steps/s  "
        f"EV {min(ev):.2f}-{max(ev):.2f}  value {float(last['charts/value_mean']):5.1f}  "
        f"return {float(last['charts/episodic_return']):6.1f}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", nargs="?", default="benchmarks/results/rl/cartpole_screen")
    folder = Path(parser.parse_args().folder)
    runs = {p.stem: p for p in folder.glob("*.csv")}  # committed curves
    runs |= {p.parent.name: p for p in folder.glob("*/metrics.csv")}  # a screen's own folder
    if not runs:
        sys.exit(f"No metrics in {folder}: give the folder a screen wrote.")
    for name in sorted(runs):
        print(summary(name, runs[name]))


if __name__ == "__main__":
    main()
