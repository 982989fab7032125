"""The held-out-map curves of issue 53's deliverable 3, gathered from the runs and plotted.

Each text-policy run trains on FrozenLake's ``train`` maps and evaluates the 100 ``heldout``
maps exactly every few updates (``eval.env_kwargs``); its ``metrics.csv`` holds those points. A
run of this study takes hours on a CPU, so it is gathered while it goes: ``--collect`` copies
a run folder's evaluation points (and whether the run has finished) into
``benchmarks/results/maps_curve.json``, which is committed; the plot and the docs table are made
from that file alone, beside SB3's curves (``maps_sb3.json``) and the map-blind reference.

    python benchmarks/maps_curve.py --collect runs/rl/frozenlake-maps-lm-qac-s0   # gather
    python benchmarks/maps_curve.py                # plot benchmarks/results/maps_curve.png

Example (the points of a ``metrics.csv``):
    >>> rows = [{"episodes": "", "env_steps": "0", "eval/mean_return": "0.0"},
    ...         {"episodes": "500", "env_steps": "3391", "eval/mean_return": ""},
    ...         {"episodes": "", "env_steps": "3391", "eval/mean_return": "0.24"}]
    >>> [(p["episodes"], p["heldout"]) for p in eval_points(rows)]
    [(0, 0.0), (500, 0.24)]
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
OUTPUT = ROOT / "benchmarks" / "results" / "maps_curve.json"
PLOT = ROOT / "benchmarks" / "results" / "maps_curve.png"
SB3 = ROOT / "benchmarks" / "results" / "maps_sb3.json"
HELDOUT = "Text-FrozenLakeMaps4x4-Heldout-v0"
#: The issue's goal for the language model alone, and its budget in training episodes.
GOAL, BUDGET = 0.8, 10_000
#: Training episodes per block of a run's own success on the train maps.
BLOCK = 500


def eval_points(rows: list[dict[str, str]]) -> list[dict[str, Any]]:
    """The evaluation rows of a ``metrics.csv`` as ``{episodes, env_steps, heldout}``; an
    evaluation row without an episode count (the start's, the last update's) is at the
    episodes of the update row before it (0 at the start)."""
    points, episodes = [], 0
    for row in rows:
        episodes = int(float(row.get("episodes") or episodes))
        if row.get("eval/mean_return", "") == "":
            continue
        points.append(
            {
                "episodes": episodes,
                "env_steps": int(float(row.get("env_steps") or 0)),
                "heldout": round(float(row["eval/mean_return"]), 4),
            }
        )
    return points


def training_success(rows: list[dict[str, str]], block: int = BLOCK) -> list[float]:
    """The run's own (sampled) success on the train maps, averaged over each whole ``block``
    of training episodes: the mean of its updates' ``charts/success_rate`` whose episodes end
    in that block (every update of a run plays the same number of episodes). A block the run
    has not finished is left out.

    Example:
        >>> rows = [{"episodes": str(20 * k), "charts/success_rate": str(v)}
        ...         for k, v in ((1, 0.1), (2, 0.3), (3, 0.5))] + [{"episodes": ""}]
        >>> training_success(rows, block=40), training_success(rows, block=60)
        ([0.2], [0.3])
    """
    blocks: dict[int, list[float]] = {}
    last = 0
    for row in rows:
        if row.get("charts/success_rate", "") in ("", None) or not row.get("episodes"):
            continue
        last = int(float(row["episodes"]))
        blocks.setdefault((last - 1) // block, []).append(float(row["charts/success_rate"]))
    whole = [v for index, v in sorted(blocks.items()) if (index + 1) * block <= last]
    return [round(sum(v) / len(v), 3) for v in whole]


def collect(run_dir: Path, record: Path | None = None) -> dict[str, Any]:
    """One run's entry: its recipe, seed, backbone, budget, progress and evaluation points,
    and, once it has finished, its record (``benchmarks/results/rl/NAME.json``)."""
    from llmgym.rl import config_class
    from llmgym.rl.records import policy_family

    info = json.loads((run_dir / "run.json").read_text())
    config = config_class(info["algo"]).from_dict(info["config"])
    with (run_dir / "metrics.csv").open(newline="") as f:
        rows = list(csv.DictReader(f))

    def most(key: str) -> int:
        return max((int(float(r[key])) for r in rows if r.get(key)), default=0)

    entry = {
        "recipe": config.run.recipe,
        "seed": config.run.seed,
        "policy": policy_family(config),
        "backbone": config.policy.backbone,
        "budget_episodes": config.run.total_episodes,
        "episodes": most("episodes"),
        "env_steps": most("env_steps"),
        "updates": most("iteration"),
        "finished": record is not None and record.exists(),
        "points": eval_points(rows),
        "training_success_per_block": training_success(rows),
    }
    if entry["finished"]:
        entry["record"] = str(record.relative_to(ROOT))
    return entry


def path_policy(moves: str, size: int = 4):
    """The map-blind policy that walks ``moves`` (a string of ``R`` and ``D``) from the top-left
    cell: each cell of the path is left by the path's next move (``act`` for ``exact_value``)."""
    cells, (row, col) = {}, (0, 0)
    for move in moves:
        cells[row * size + col] = "RIGHT" if move == "R" else "DOWN"
        row, col = (row, col + 1) if move == "R" else (row + 1, col)

    def act(observations: list[str], infos: list[dict[str, Any]]) -> list[str]:
        return [json.dumps({"action": cells.get(int(i["raw_obs"]), "DOWN")}) for i in infos]

    return act


def map_blind_best(env_id: str = HELDOUT, size: int = 4) -> tuple[float, str]:
    """The best fixed path of RIGHT and DOWN moves on a map set: its exact success (the mean
    over the maps) and the path.

    Example:
        >>> value, moves = map_blind_best()
        >>> round(value, 2), len(moves)
        (0.33, 6)
    """
    from itertools import combinations

    from llmgym.evaluation.exact import exact_value

    n = 2 * (size - 1)
    best = (-1.0, "")
    for downs in combinations(range(n), size - 1):
        moves = "".join("D" if i in downs else "R" for i in range(n))
        best = max(best, (exact_value(env_id, path_policy(moves, size)).value, moves))
    return best


def sb3_curves() -> list[dict[str, Any]]:
    """SB3 PPO given the map: the longest run of each seed, its curve in episodes."""
    runs = json.loads(SB3.read_text())["runs"] if SB3.exists() else []
    best: dict[int, dict[str, Any]] = {}
    for run in runs:
        longest = best.get(run["seed"], {"timesteps": 0})["timesteps"]
        if run["size"] == 4 and run["timesteps"] > longest:
            best[run["seed"]] = run
    return [best[s] for s in sorted(best)]


def label(name: str, run: dict[str, Any]) -> str:
    """A run's name in the legend and the table: ``the LM (LoRA), seed 0``."""
    who = {"lm": "the LM (LoRA)", "head": "a head on the frozen LM"}.get(
        run["policy"], "the LM and a head"
    )
    if run["backbone"] == "random-init":
        who += ", random-init backbone"
    return f"{who}, seed {run['seed']}"


def table(data: dict[str, Any]) -> str:
    """The runs' points as a Markdown table: one row per run, its held-out success at each
    evaluation (``episodes: value``), and how far it has gone."""
    lines = [
        "| run | recipe | held-out success at training episodes | progress |",
        "|---|---|---|---|",
    ]
    for name, run in data["runs"].items():
        points = ", ".join(f"{p['episodes']:,}: {p['heldout']:.2f}" for p in run["points"])
        state = "finished" if run["finished"] else "not finished (it continues with `--resume`)"
        lines.append(
            f"| {label(name, run)} | `{run['recipe']}` | {points} | {run['episodes']:,} of "
            f"{run['budget_episodes']:,} episodes, {run['updates']} updates; {state} |"
        )
    for run in sb3_curves():
        curve = [p for p in run["curve"] if p["episodes"] <= 2 * BUDGET]
        points = ", ".join(f"{p['episodes']:,}: {p['heldout']:.2f}" for p in curve)
        lines.append(
            f"| SB3 PPO given the map, seed {run['seed']} | `benchmarks/maps_sb3.py` | {points} "
            f"| {run['timesteps']:,} steps, finished (points to {2 * BUDGET:,} episodes) |"
        )
    blind = data["map_blind"]
    lines.append(
        f"| the best map-blind path ({blind['path']}: R right, D down), exact | - | "
        f"{blind['value']:.2f} at every point | no training |"
    )
    return "\n".join(lines)


def training_table(data: dict[str, Any]) -> str:
    """Each run's own success on the train maps (sampled, as it trained) per ``BLOCK``
    training episodes, as a Markdown table."""
    lines = [
        f"| run | own success on the train maps, per {BLOCK} training episodes |",
        "|---|---|",
    ]
    for name, run in data["runs"].items():
        blocks = run.get("training_success_per_block")
        if blocks:
            lines.append(f"| {label(name, run)} | {', '.join(f'{v:.2f}' for v in blocks)} |")
    return "\n".join(lines)


def plot(data: dict[str, Any], path: Path = PLOT) -> None:
    """Held-out success against training episodes: every run, SB3's seeds, the map-blind
    path and the goal."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from llmgym.files import atomic_path

    fig, ax = plt.subplots(figsize=(7, 5.4))
    for name, run in data["runs"].items():
        xs = [p["episodes"] for p in run["points"]]
        ys = [p["heldout"] for p in run["points"]]
        ax.plot(xs, ys, marker="o", label=label(name, run))
    for i, run in enumerate(sb3_curves()):
        xs = [p["episodes"] for p in run["curve"]]
        ys = [p["heldout"] for p in run["curve"]]
        sb3 = "SB3 PPO given the map" if i == 0 else None
        ax.plot(xs, ys, color="grey", alpha=0.6, lw=1, label=sb3)
    blind = data["map_blind"]
    blind_label = f"best map-blind path ({blind['value']:.2f})"
    ax.axhline(blind["value"], color="black", ls=":", lw=1, label=blind_label)
    ax.axhline(GOAL, color="green", ls="--", lw=1, label=f"goal ({GOAL})")
    ax.set_xlim(0, BUDGET * 1.02)
    ax.set_ylim(-0.02, 1.02)
    ax.set_xlabel("training episodes (train maps)")
    ax.set_ylabel("exact success, 100 held-out maps")
    ax.set_title("Non-slippery FrozenLake 4x4: transfer to unseen maps")
    # Below the axes, where it hides no curve.
    ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.14), ncol=2)
    fig.tight_layout()
    with atomic_path(path) as tmp:
        fig.savefig(tmp, dpi=110, format="png")
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--collect", type=Path, nargs="*", default=[], metavar="RUN_DIR")
    parser.add_argument("--output", type=Path, default=OUTPUT)
    parser.add_argument("--plot", type=Path, default=PLOT)
    args = parser.parse_args(argv)
    from llmgym.files import write_text

    data: dict[str, Any] = {"runs": {}}
    if args.output.exists():
        data = json.loads(args.output.read_text())
    for run_dir in args.collect:
        if not (run_dir / "metrics.csv").exists() or not (run_dir / "run.json").exists():
            print(f"{run_dir} is not a training run's folder (no metrics.csv and run.json).")
            return 2
        name = run_dir.name
        record = ROOT / "benchmarks" / "results" / "rl" / f"{name}.json"
        data["runs"][name] = collect(run_dir, record)
    if args.collect or "map_blind" not in data:
        value, path = map_blind_best()
        data["map_blind"] = {"value": round(value, 4), "path": path}
        write_text(args.output, json.dumps(data, indent=2) + "\n")
    plot(data, args.plot)
    print(table(data))
    print()
    print(training_table(data))
    return 0


if __name__ == "__main__":
    sys.exit(main())
