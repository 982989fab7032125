"""Sample efficiency against Stable-Baselines3: return vs env steps for the LLM agent and SB3
PPO/DQN on Blackjack, FrozenLake (is_slippery=False) and CartPole, and env steps to a target.

Same env, same budget, same evaluation for every curve:

* Blackjack, FrozenLake: the greedy policy's exact expected return from the transition model
  (``llmgym.evaluation.exact.exact_value``); the SB3 policy answers each state's text observation
  from ``info["raw_obs"]``, deterministically.
* CartPole: greedy mean return over 20 fixed episodes, seeds ``1_000_000 + i`` (the text env,
  SB3 mapping ``raw_obs`` to an action).

SB3 trains fresh models with the catalog's recipes (``llmgym.baselines.sb3.HYPERPARAMS``) for
the budget below (``learning_curve``), several seeds. LLM curves are read from ``llmgym train``
runs: a run directory (its ``metrics.csv``), such a CSV, or a result record
(``benchmarks/results/rl/*.json``, whose curve is the CSV of the same name beside it, with
the checkpoints' evaluations of ``NAME.checkpoints.csv`` where ``benchmarks/checkpoint_curve.py``
made one; without a CSV, its start and final values). Writes
``benchmarks/results/sample_efficiency.json`` and ``.png`` and prints the table of env steps to
reach the target.

    python benchmarks/sample_efficiency.py --sb3-only                      # ~4 min, 2-core CPU
    python benchmarks/sample_efficiency.py --sb3-from benchmarks/results/sample_efficiency.json \\
        --llm Text-Blackjack-v1=benchmarks/results/rl/blackjack-ppo-s0.json
    python benchmarks/sample_efficiency.py --quick --output /tmp/se.json  # smoke run
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import os
import platform
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import llmgym  # noqa: F401  (registers the Text-* envs)
from llmgym.rl.trainer import EVAL_SEED_BASE  # the trainer's evaluation seeds

RESULTS = Path(__file__).parent / "results" / "sample_efficiency.json"
ALGOS = ("ppo", "dqn")


@dataclass(frozen=True)
class Setting:
    """One env of the comparison: budget, evaluation and target."""

    env_kwargs: dict[str, Any]
    budget: int
    """SB3 training env steps."""
    eval_every: int
    """SB3 env steps between evaluations."""
    target: float
    """The table reports the env steps of the first evaluation at or above this."""
    exact: bool
    """Exact expected return (else the mean over ``eval_episodes`` fixed episodes)."""
    eval_episodes: int = 0


SETTINGS: dict[str, Setting] = {
    "Text-Blackjack-v1": Setting({}, 8_000, 200, -0.07, exact=True),
    "Text-FrozenLake-v1": Setting({"is_slippery": False}, 12_000, 300, 1.0, exact=True),
    "Text-CartPole-v1": Setting({}, 20_000, 1_000, 195.0, exact=False, eval_episodes=20),
}
#: --quick: tiny budgets, a smoke test of every code path.
QUICK = {"budget": 600, "eval_every": 300, "eval_episodes": 2}


@dataclass
class Curve:
    """One learning curve: value of the evaluation after ``env_steps`` training steps."""

    env_id: str
    agent: str
    """``sb3-ppo``, ``sb3-dqn`` or ``llm`` plus what the run was."""
    seed: int | None
    env_steps: list[int]
    values: list[float]
    source: str
    meta: dict[str, Any] = field(default_factory=dict)

    def steps_to_reach(self, target: float) -> int | None:
        """Env steps of the first evaluation at or above ``target`` (None: not reached).

        Example:
            >>> Curve("E", "a", 0, [0, 5, 9], [0.0, 1.0, 1.0], "").steps_to_reach(1.0)
            5
        """
        hit = (s for s, v in zip(self.env_steps, self.values) if v >= target - 1e-9)
        return next(hit, None)

    def steps_to_stay(self, target: float) -> int | None:
        """Env steps of the first evaluation from which every later one is at or above
        ``target`` (None: the last one is below it).

        Example:
            >>> Curve("E", "a", 0, [0, 5, 9, 12], [1.0, 0.0, 1.0, 1.0], "").steps_to_stay(1.0)
            9
        """
        stay = None
        for step, value in zip(reversed(self.env_steps), reversed(self.values)):
            if value < target - 1e-9:
                break
            stay = step
        return stay


# ---------------------------------------------------------------------------- evaluation
def make_eval_fn(env_id: str, setting: Setting):
    """``eval_fn(agent) -> value`` for a text agent, as the LLM trainer evaluates."""
    if setting.exact:
        from llmgym.evaluation.exact import agent_act, exact_value

        return lambda agent: exact_value(env_id, agent_act(agent), setting.env_kwargs).value

    from llmgym.agents.evaluate import evaluate

    def sampled(agent: Any) -> float:
        n = setting.eval_episodes
        result = evaluate(
            env_id,
            agent,
            episodes=n,
            num_envs=n,
            seed=EVAL_SEED_BASE,
            progress=False,
            env_kwargs=setting.env_kwargs,
        )
        return result["mean_return"]

    return sampled


def sb3_curves(
    envs: list[str], settings: dict[str, Setting], algos: list[str], seeds: list[int]
) -> list[Curve]:
    """Train fresh SB3 models and evaluate them along the way."""
    from llmgym.baselines.sb3 import config_for, learning_curve

    curves = []
    for env_id in envs:
        setting = settings[env_id]
        eval_fn = make_eval_fn(env_id, setting)
        for algo in algos:
            for seed in seeds:
                start = time.perf_counter()
                lc = learning_curve(
                    env_id,
                    algo,
                    setting.budget,
                    setting.eval_every,
                    eval_fn,
                    seed=seed,
                    env_kwargs=setting.env_kwargs,
                )
                config = config_for(lc.env_id, algo)
                meta = {
                    "train_s": lc.train_seconds,
                    "eval_s": lc.eval_seconds,
                    "wall_s": round(time.perf_counter() - start, 2),
                    "recipe": asdict(config),
                }
                curves.append(
                    Curve(env_id, f"sb3-{algo}", seed, lc.env_steps, lc.values, "sb3", meta)
                )
                print(
                    f"{env_id} sb3-{algo} seed {seed}: final {lc.values[-1]:.3f} after "
                    f"{lc.env_steps[-1]} steps, {meta['wall_s']:.0f} s",
                    flush=True,
                )
    return curves


# ---------------------------------------------------------------------------- LLM runs
def _num(text: str | None) -> float | None:
    try:
        value = float(text) if text not in (None, "") else None
    except ValueError:
        return None
    return value if value is not None and math.isfinite(value) else None


def read_metrics_csv(*paths: Path) -> tuple[list[int], list[float]]:
    """(env_steps, value) of every periodic and final evaluation in a run's metrics.csv (or in
    ``checkpoint_curve.py``'s CSV); at a step evaluated twice, the later file wins and, within a
    file, the final evaluation."""
    points: dict[int, float] = {}
    for path in paths:
        with path.open(newline="") as f:
            for row in csv.DictReader(f):
                step = _num(row.get("env_steps"))
                if step is None:
                    continue
                for key in ("eval/mean_return", "final_eval/mean_return"):
                    value = _num(row.get(key))
                    if value is not None:
                        points[int(step)] = value
    if not points:
        raise ValueError(f"{paths[-1]} has no evaluation rows (eval/mean_return).")
    steps = sorted(points)
    return steps, [points[s] for s in steps]


def read_llm_curve(env_id: str, source: str) -> Curve:
    """An LLM curve from a run directory, its metrics.csv, or a result record (.json)."""
    path = Path(source)
    meta: dict[str, Any] = {}
    record: dict[str, Any] = {}
    csv_path: Path | None = None
    checkpoint_csv: Path | None = None
    if path.is_dir():
        csv_path = path / "metrics.csv"
        run = path / "run.json"  # written by `llmgym train`: the TrainConfig and the algo
        if run.is_file():
            from llmgym.rl.config import flat_view

            info = json.loads(run.read_text())
            meta = {**flat_view(info.get("config", {})), "algo": info.get("algo")}
    elif path.suffix == ".json":
        record = json.loads(path.read_text())
        # A record's eval_episodes are the final evaluation's, not the periodic ones'.
        meta = {k: v for k, v in record.items() if k != "eval_episodes"}
        beside = path.with_suffix(".csv")
        csv_path = beside if beside.is_file() else None
        after = path.with_suffix(".checkpoints.csv")  # benchmarks/checkpoint_curve.py's
        checkpoint_csv = after if after.is_file() else None
    elif path.suffix == ".csv":
        csv_path = path
    else:
        raise ValueError(f"{source}: pass a run directory, a metrics CSV or a record JSON.")
    if meta.get("env_id") not in (None, env_id):
        raise ValueError(f"{source} is a run on {meta['env_id']}, not {env_id}.")
    if csv_path is not None:
        steps, values = read_metrics_csv(*[p for p in (checkpoint_csv, csv_path) if p])
    elif "start_value" in record and "eval_value" in record:
        steps, values = [0, int(record["env_steps"])], [record["start_value"], record["eval_value"]]
    else:
        raise ValueError(f"{source}: no metrics CSV beside it and no start/eval values in it.")
    keys = ("algo", "mode", "seed", "eval_method", "eval_episodes", "train_backbone", "sft")
    kept = {k: meta[k] for k in keys if k in meta} | {"name": path.stem}
    label = f"llm-{kept.get('algo', 'run')}"
    return Curve(env_id, label, kept.get("seed"), steps, values, source, kept)


def check_llm_eval(curve: Curve, setting: Setting) -> str | None:
    """A warning when the LLM run was evaluated differently from the SB3 curves."""
    method = curve.meta.get("eval_method")
    if method is None and "eval_episodes" not in curve.meta:
        return f"{curve.source}: how the run was evaluated is unknown (no run.json or record)."
    if setting.exact and method not in (None, "exact", "auto"):
        return f"{curve.source}: eval_method {method}, the SB3 curves use exact evaluation."
    episodes = curve.meta.get("eval_episodes")
    if not setting.exact and episodes not in (None, setting.eval_episodes):
        return (
            f"{curve.source}: {episodes} evaluation episodes, the SB3 curves use "
            f"{setting.eval_episodes} (same seeds 1_000_000 + i)."
        )
    return None


# ---------------------------------------------------------------------------- report
def table(curves: list[Curve], settings: dict[str, Setting], envs: list[str]) -> str:
    """Markdown table: env steps to reach the target (per run), and the final values."""
    agents = sorted({c.agent for c in curves}, key=lambda a: (not a.startswith("llm"), a))
    lines = [
        "| env | target | " + " | ".join(agents) + " |",
        "|---|---|" + "---|" * len(agents),
    ]
    for env_id in envs:
        setting = settings[env_id]
        cells = []
        for agent in agents:
            runs = [c for c in curves if c.env_id == env_id and c.agent == agent]
            if not runs:
                cells.append("-")
                continue
            parts = []
            for c in runs:
                hit, stay = c.steps_to_reach(setting.target), c.steps_to_stay(setting.target)
                if hit is None:
                    parts.append(f">{c.env_steps[-1]:,} ({c.values[-1]:.3g})")
                else:
                    parts.append(f"{hit:,}/{f'{stay:,}' if stay is not None else '-'}")
            cells.append(", ".join(parts))
        lines.append(f"| {env_id} | {setting.target:g} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def plot(curves: list[Curve], settings: dict[str, Setting], envs: list[str], path: Path) -> None:
    """One panel per env: value vs env steps (symmetric-log x: linear below 100), each
    evaluation held until the next (steps)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    colors = {"sb3-ppo": "tab:blue", "sb3-dqn": "tab:orange"}
    fig, axes = plt.subplots(1, len(envs), figsize=(5 * len(envs), 4), squeeze=False)
    for ax, env_id in zip(axes[0], envs):
        setting = settings[env_id]
        labelled = set()
        for c in (c for c in curves if c.env_id == env_id):
            color = colors.get(c.agent, "tab:green" if c.agent.startswith("llm") else "tab:gray")
            label = None if c.agent in labelled else c.agent
            labelled.add(c.agent)
            width = 2.0 if c.agent.startswith("llm") else 1.2
            ax.plot(
                c.env_steps,
                c.values,
                color=color,
                alpha=0.75,
                lw=width,
                label=label,
                drawstyle="steps-post",
            )
        ax.axhline(setting.target, color="k", ls="--", lw=0.8, label=f"target {setting.target:g}")
        ax.set_xscale("symlog", linthresh=100)
        ax.set_xlim(left=0)
        how = "exact value" if setting.exact else f"mean of {setting.eval_episodes} episodes"
        kwargs = ", ".join(f"{k}={v}" for k, v in setting.env_kwargs.items())
        ax.set_title(f"{env_id}{f' ({kwargs})' if kwargs else ''}", fontsize=9)
        ax.set_xlabel("env steps (symlog)")
        ax.set_ylabel(f"greedy return ({how})")
        ax.legend(fontsize=7)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=90)
    plt.close(fig)


def load_sb3(path: Path, envs: list[str]) -> list[Curve]:
    """SB3 curves of an earlier run of this script (to add LLM curves without retraining)."""
    data = json.loads(path.read_text())
    return [
        Curve(**c) for c in data["curves"] if c["agent"].startswith("sb3-") and c["env_id"] in envs
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description="LLM vs SB3 sample efficiency.")
    parser.add_argument("--envs", nargs="+", default=list(SETTINGS), choices=list(SETTINGS))
    parser.add_argument("--algos", nargs="+", default=list(ALGOS), choices=list(ALGOS))
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2], help="SB3 seeds")
    parser.add_argument(
        "--llm",
        action="append",
        default=[],
        metavar="ENV=PATH",
        help="An LLM run: run dir, metrics CSV or record JSON (repeatable).",
    )
    parser.add_argument("--sb3-only", action="store_true", help="Train and plot SB3 only.")
    parser.add_argument("--sb3-from", type=Path, help="Reuse the SB3 curves of this JSON.")
    parser.add_argument("--quick", action="store_true", help="Tiny budgets (smoke test).")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--output", type=Path, default=RESULTS)
    args = parser.parse_args()

    os.environ.setdefault("OMP_NUM_THREADS", str(args.threads))
    import torch

    torch.set_num_threads(args.threads)
    settings = dict(SETTINGS)
    if args.quick:
        settings = {
            k: Setting(
                s.env_kwargs,
                QUICK["budget"],
                QUICK["eval_every"],
                s.target,
                s.exact,
                QUICK["eval_episodes"] if not s.exact else 0,
            )
            for k, s in settings.items()
        }
    llm: list[Curve] = []
    warnings = []
    if not args.sb3_only:
        for spec in args.llm:
            env_id, _, source = spec.partition("=")
            if env_id not in args.envs or not source:
                parser.error(f"--llm {spec!r}: use ENV=PATH with ENV one of {args.envs}")
            curve = read_llm_curve(env_id, source)
            llm.append(curve)
            if (warning := check_llm_eval(curve, settings[env_id])) is not None:
                warnings.append(warning)
    start = time.perf_counter()
    if args.sb3_from:
        sb3 = load_sb3(args.sb3_from, args.envs)
        sb3_wall = json.loads(args.sb3_from.read_text()).get("sb3_wall_s")
    else:
        sb3 = sb3_curves(args.envs, settings, args.algos, args.seeds)
        sb3_wall = round(time.perf_counter() - start, 1)
    curves = llm + sb3
    report = {
        "machine": f"{platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, "
        f"{args.threads} torch thread(s), no GPU",
        "settings": {k: asdict(settings[k]) for k in args.envs},
        "evaluation": {
            "exact": "greedy policy's exact expected return (llmgym.evaluation.exact.exact_value)",
            "sampled": "greedy mean return over eval_episodes episodes, seeds 1_000_000 + i",
        },
        "sb3_seeds": args.seeds,
        "sb3_wall_s": sb3_wall,
        "sb3_from": str(args.sb3_from) if args.sb3_from else None,
        "steps_to_target": {
            env_id: {
                f"{c.agent}:{c.seed}:{c.source}": c.steps_to_reach(settings[env_id].target)
                for c in curves
                if c.env_id == env_id
            }
            for env_id in args.envs
        },
        "steps_to_stay_at_target": {
            env_id: {
                f"{c.agent}:{c.seed}:{c.source}": c.steps_to_stay(settings[env_id].target)
                for c in curves
                if c.env_id == env_id
            }
            for env_id in args.envs
        },
        "warnings": warnings,
        "curves": [asdict(c) for c in curves],
    }
    text = table(curves, settings, args.envs)
    report["table"] = text
    print(
        "\nEnv steps to reach the target, per run: 'first/stays' = first evaluation at or above"
        " it / first from which all later ones are ('-': falls back below); '>N (v)': not"
        " reached in N steps, final value v"
    )
    print(text)
    for warning in warnings:
        print(f"warning: {warning}")
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(report, indent=2) + "\n")
    plot(curves, settings, args.envs, args.output.with_suffix(".png"))
    print(f"wrote {args.output} and {args.output.with_suffix('.png')}")


if __name__ == "__main__":
    main()
