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

``--sweep`` tunes SB3 instead, as the LLM recipes were tuned (4-8 variants per env): every
variant of ``SWEEP`` (overrides of the catalog recipe, which runs too, as ``catalog``) on the
envs, algos and seeds given, with the budget and evaluation above. It writes every variant's
per-seed results and curves to ``benchmarks/results/sb3_sweep.json`` and picks, per (env,
algo), the variant with the lowest mean over seeds of the env steps to first reach the target
("not reached" counting as the budget), ties broken by the higher mean final value
(``choose``). ``--tuned-from`` then adds the chosen variants' curves to the comparison as
``sb3-ppo-tuned`` / ``sb3-dqn-tuned``, beside the catalog recipe's:

    python benchmarks/sample_efficiency.py --sweep --envs Text-Blackjack-v1 Text-FrozenLake-v1
    python benchmarks/sample_efficiency.py --sb3-from benchmarks/results/sample_efficiency.json \\
        --tuned-from benchmarks/results/sb3_sweep.json --llm ...  # the --llm of the JSON's curves
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import os
import platform
import sys
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import llmgym  # noqa: F401  (registers the Text-* envs)
from llmgym.rl.trainer import EVAL_SEED_BASE  # the trainer's evaluation seeds

RESULTS = Path(__file__).parent / "results" / "sample_efficiency.json"
SWEEP_RESULTS = RESULTS.with_name("sb3_sweep.json")
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


def _grid(**axes: tuple[Any, ...]) -> list[dict[str, Any]]:
    """Every combination of the axes' values, the first axis varying slowest.

    Example:
        >>> _grid(a=(1, 2), b=("x",))
        [{'a': 1, 'b': 'x'}, {'a': 2, 'b': 'x'}]
    """
    combos: list[dict[str, Any]] = [{}]
    for key, values in axes.items():
        combos = [c | {key: v} for c in combos for v in values]
    return combos


#: --sweep: overrides of the catalog recipe, 8 per algo. PPO: rollouts of 16 or 64 steps x the
#: catalog's 8 envs (128 or 512 env steps per update, where the catalog's 256 x 8 makes 4
#: updates in 8,192 steps), minibatches of 64, two learning rates and epoch counts. DQN: when
#: learning starts, how long epsilon falls, and training every step with a target network
#: updated every 100 (or the catalog's every 4 and 500).
SWEEP: dict[str, list[dict[str, Any]]] = {
    "ppo": _grid(
        n_steps=(16, 64),
        batch_size=(64,),
        learning_rate=(3e-4, 1e-3),
        n_epochs=(4, 10),
    ),
    "dqn": [
        {
            "learning_starts": a,
            "exploration_fraction": b,
            "train_freq": f,
            "target_update_interval": t,
        }
        for a in (100, 1_000)
        for b in (0.1, 0.3)
        for f, t in ((4, 500), (1, 100))
    ],
}
SELECTION = (
    "per (env, algo), the variant with the lowest mean over seeds of the env steps to first "
    "reach the target ('not reached', or reached only in the rollout that runs past the "
    "budget, counts as the budget), ties broken by the higher mean "
    "final value, then by grid order"
)


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


def sb3_run(
    env_id: str,
    setting: Setting,
    algo: str,
    seed: int,
    overrides: dict[str, Any] | None = None,
    agent: str | None = None,
    eval_fn: Any = None,
) -> Curve:
    """Train one fresh SB3 model, the catalog recipe changed by ``overrides`` (``n_envs``
    included), and evaluate it along the way."""
    from llmgym.baselines.sb3 import base_env_id, config_for, learning_curve

    overrides = dict(overrides or {})
    config = config_for(base_env_id(env_id), algo)
    if overrides:
        n_envs = overrides.pop("n_envs", config.n_envs)
        config = replace(config, n_envs=n_envs, hyperparams=config.hyperparams | overrides)
    agent = agent or f"sb3-{algo}"
    start = time.perf_counter()
    lc = learning_curve(
        env_id,
        algo,
        setting.budget,
        setting.eval_every,
        eval_fn or make_eval_fn(env_id, setting),
        seed=seed,
        env_kwargs=setting.env_kwargs,
        config=config,
    )
    meta = {
        "train_s": lc.train_seconds,
        "eval_s": lc.eval_seconds,
        "wall_s": round(time.perf_counter() - start, 2),
        "recipe": asdict(config),
    }
    print(
        f"{env_id} {agent} seed {seed}: final {lc.values[-1]:.3f} after "
        f"{lc.env_steps[-1]} steps, {meta['wall_s']:.0f} s",
        flush=True,
    )
    return Curve(env_id, agent, seed, lc.env_steps, lc.values, "sb3", meta)


def sb3_curves(
    envs: list[str], settings: dict[str, Setting], algos: list[str], seeds: list[int]
) -> list[Curve]:
    """Train fresh SB3 models with the catalog recipes and evaluate them along the way."""
    curves = []
    for env_id in envs:
        eval_fn = make_eval_fn(env_id, settings[env_id])
        for algo in algos:
            for seed in seeds:
                curves.append(sb3_run(env_id, settings[env_id], algo, seed, eval_fn=eval_fn))
    return curves


# ---------------------------------------------------------------------------- SB3 sweep
def variant_name(overrides: dict[str, Any]) -> str:
    """A variant's overrides as one short string (``catalog`` for none).

    Example:
        >>> variant_name({"n_steps": 16, "learning_rate": 0.001}), variant_name({})
        ('n_steps=16 learning_rate=0.001', 'catalog')
    """
    return (
        " ".join(f"{k}={v:g}" if isinstance(v, float) else f"{k}={v}" for k, v in overrides.items())
        or "catalog"
    )


def score(curves: list[Curve], setting: Setting) -> dict[str, Any]:
    """One variant's per-seed results and the two numbers the selection compares.

    Example:
        >>> s = Setting({}, 100, 10, 1.0, exact=True)
        >>> runs = [Curve("E", "a", 0, [0, 50], [0.0, 1.0], ""),
        ...         Curve("E", "a", 1, [0, 60], [0.0, 0.5], "")]
        >>> r = score(runs, s); r["steps_to_target"], r["mean_steps"], r["mean_final"]
        ([50, None], 75.0, 0.75)
    """
    reached = [c.steps_to_reach(setting.target) for c in curves]
    finals = [c.values[-1] for c in curves]
    return {
        "seeds": [c.seed for c in curves],
        "steps_to_target": reached,
        "steps_to_stay": [c.steps_to_stay(setting.target) for c in curves],
        "final": [round(v, 4) for v in finals],
        "mean_steps": sum(setting.budget if r is None else min(r, setting.budget) for r in reached)
        / len(curves),
        "mean_final": round(sum(finals) / len(curves), 4),
        "wall_s": [c.meta.get("wall_s") for c in curves],
    }


def choose(variants: list[dict[str, Any]]) -> dict[str, Any]:
    """The selection rule (``SELECTION``) over ``score``'s results (grid order breaks ties).

    Example:
        >>> choose([{"mean_steps": 90, "mean_final": 1}, {"mean_steps": 80, "mean_final": 0},
        ...         {"mean_steps": 80, "mean_final": 0.5}])
        {'mean_steps': 80, 'mean_final': 0.5}
    """
    return min(variants, key=lambda v: (v["mean_steps"], -v["mean_final"]))


def sweep(
    envs: list[str],
    settings: dict[str, Setting],
    algos: list[str],
    seeds: list[int],
    grid: dict[str, dict[str, list[dict[str, Any]]]],
) -> tuple[dict[str, Any], list[Curve]]:
    """Run the catalog recipe and every variant of ``grid[env][algo]`` on each seed.

    Returns the per-variant results by env and algo (the chosen one marked) and every curve,
    each curve's agent ``sb3-ALGO`` and its variant in ``meta``."""
    results: dict[str, Any] = {}
    curves: list[Curve] = []
    for env_id in envs:
        setting = settings[env_id]
        eval_fn = make_eval_fn(env_id, setting)
        for algo in algos:
            rows = []
            for overrides in [{}, *(v for v in grid[env_id][algo] if v)]:
                name = variant_name(overrides)
                runs = []
                for seed in seeds:
                    curve = sb3_run(env_id, setting, algo, seed, overrides, eval_fn=eval_fn)
                    curve.meta |= {"variant": name, "overrides": overrides}
                    runs.append(curve)
                rows.append({"variant": name, "overrides": overrides, **score(runs, setting)})
                curves += runs
            best = choose(rows)
            for row in rows:
                row["chosen"] = row is best
            results.setdefault(env_id, {})[algo] = rows
    return results, curves


def sweep_table(results: dict[str, Any]) -> str:
    """Markdown: one row per (env, algo, variant), the chosen ones in bold."""
    lines = [
        "| env | algo | variant | steps to target per seed | mean (none = budget) "
        "| final per seed | mean final |",
        "|---|---|---|---|---:|---|---:|",
    ]
    for env_id, by_algo in results.items():
        for algo, rows in by_algo.items():
            for r in rows:
                name = f"**{r['variant']}**" if r["chosen"] else r["variant"]
                reached = ", ".join("-" if s is None else f"{s:,}" for s in r["steps_to_target"])
                finals = ", ".join(f"{v:.3g}" for v in r["final"])
                lines.append(
                    f"| {env_id} | {algo} | {name} | {reached} | {r['mean_steps']:,.0f} "
                    f"| {finals} | {r['mean_final']:.3g} |"
                )
    return "\n".join(lines)


def load_tuned(path: Path, envs: list[str]) -> list[Curve]:
    """The chosen variants' curves of a ``--sweep`` JSON, as agents ``sb3-ALGO-tuned``."""
    data = json.loads(path.read_text())
    chosen = {
        (env_id, algo): next(r["variant"] for r in rows if r["chosen"])
        for env_id, by_algo in data["results"].items()
        for algo, rows in by_algo.items()
    }
    tuned = []
    for c in data["curves"]:
        algo = c["agent"].removeprefix("sb3-")
        if c["env_id"] in envs and chosen.get((c["env_id"], algo)) == c["meta"]["variant"]:
            tuned.append(Curve(**(c | {"agent": f"sb3-{algo}-tuned", "source": "sb3-sweep"})))
    return tuned


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

    colors = {
        "sb3-ppo": "tab:blue",
        "sb3-dqn": "tab:orange",
        "sb3-ppo-tuned": "navy",
        "sb3-dqn-tuned": "tab:red",
    }
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


def load_sb3(path: Path, envs: list[str], tuned: bool = True) -> list[Curve]:
    """SB3 curves of an earlier run of this script (to add LLM curves without retraining);
    without the ``-tuned`` ones unless ``tuned``."""
    data = json.loads(path.read_text())
    return [
        Curve(**c)
        for c in data["curves"]
        if c["agent"].startswith("sb3-")
        and c["env_id"] in envs
        and (tuned or not c["agent"].endswith("-tuned"))
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
    parser.add_argument(
        "--tuned-from",
        type=Path,
        help="Add the chosen variants of this --sweep JSON as sb3-ALGO-tuned (replacing any "
        "tuned curves of --sb3-from).",
    )
    parser.add_argument(
        "--sweep",
        action="store_true",
        help="Tune SB3 instead: the catalog recipe and every SWEEP variant on --envs, --algos "
        "and --seeds; writes results/sb3_sweep.json unless --output.",
    )
    parser.add_argument(
        "--variants", type=int, help="--sweep: only the first N variants per algo (smoke test)."
    )
    parser.add_argument(
        "--chosen-from",
        type=Path,
        help="--sweep: run only the chosen variant of this earlier sweep JSON per (env, algo), "
        "beside the catalog recipe (to check the choice on other --seeds).",
    )
    parser.add_argument("--quick", action="store_true", help="Tiny budgets (smoke test).")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument(
        "--output",
        type=Path,
        help=f"Default {RESULTS.name} (sweep: {SWEEP_RESULTS.name}) in benchmarks/results/.",
    )
    args = parser.parse_args()
    if args.sweep and (args.llm or args.sb3_from or args.tuned_from):
        parser.error("--sweep trains SB3 only: no --llm, --sb3-from or --tuned-from.")
    if args.chosen_from and not args.sweep:
        parser.error("--chosen-from goes with --sweep.")

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
    machine = (
        f"{platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, "
        f"{args.threads} torch thread(s), no GPU"
    )
    if args.sweep:
        run_sweep(args, settings, machine)
        return
    output = args.output or RESULTS
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
        sb3 = load_sb3(args.sb3_from, args.envs, tuned=args.tuned_from is None)
        sb3_wall = json.loads(args.sb3_from.read_text()).get("sb3_wall_s")
    else:
        sb3 = sb3_curves(args.envs, settings, args.algos, args.seeds)
        sb3_wall = round(time.perf_counter() - start, 1)
    if args.tuned_from:
        sb3 += load_tuned(args.tuned_from, args.envs)
    curves = llm + sb3
    report = {
        "machine": machine,
        "settings": {k: asdict(settings[k]) for k in args.envs},
        "evaluation": {
            "exact": "greedy policy's exact expected return (llmgym.evaluation.exact.exact_value)",
            "sampled": "greedy mean return over eval_episodes episodes, seeds 1_000_000 + i",
        },
        "sb3_seeds": args.seeds,
        "sb3_wall_s": sb3_wall,
        "sb3_from": str(args.sb3_from) if args.sb3_from else None,
        "tuned_from": str(args.tuned_from) if args.tuned_from else None,
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
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(json.dumps(report, indent=2) + "\n")
    plot(curves, settings, args.envs, output.with_suffix(".png"))
    print(f"wrote {output} and {output.with_suffix('.png')}")


def run_sweep(args: argparse.Namespace, settings: dict[str, Setting], machine: str) -> None:
    """``--sweep``: run the grid, print its table and write every result and curve."""
    output = args.output or SWEEP_RESULTS
    grid = {env_id: {a: SWEEP[a][: args.variants] for a in args.algos} for env_id in args.envs}
    if args.chosen_from:  # only the chosen variants of an earlier sweep (e.g. on other seeds)
        earlier = json.loads(args.chosen_from.read_text())["results"]
        grid = {
            env_id: {
                a: [r["overrides"] for r in earlier[env_id][a] if r["chosen"]] for a in args.algos
            }
            for env_id in args.envs
        }
    start = time.perf_counter()
    results, curves = sweep(args.envs, settings, args.algos, args.seeds, grid)
    text = sweep_table(results)
    print(f"\nSelection: {SELECTION}.")
    print(text)
    report = {
        "command": "python benchmarks/sample_efficiency.py " + " ".join(sys.argv[1:]),
        "machine": machine,
        "wall_s": round(time.perf_counter() - start, 1),
        "selection": SELECTION,
        "settings": {k: asdict(settings[k]) for k in args.envs},
        "seeds": args.seeds,
        "chosen_from": str(args.chosen_from) if args.chosen_from else None,
        "grid": grid,
        "results": results,
        "chosen": {
            env_id: {algo: choose(rows)["variant"] for algo, rows in by_algo.items()}
            for env_id, by_algo in results.items()
        },
        "table": text,
        "curves": [asdict(c) for c in curves],
    }
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(json.dumps(report, indent=1) + "\n")
    print(f"wrote {output}")


if __name__ == "__main__":
    main()
