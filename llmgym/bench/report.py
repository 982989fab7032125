"""The leaderboard: per (env, agent) mean return, 95 % bootstrap CI, normalized score, parse
rate, env-steps/s and the agent's training env steps, as markdown and as two PNG charts
(normalized score per env; normalized score against training env steps).

Where the env allows it, ``exact`` is the exact expected return of the agent's greedy policy
(``exact.jsonl``, from ``llmgym.evaluation.exact``), next to the sampled mean.

A bench run with env kwargs (``llmgym bench --env-kwarg action_names=alt``) labels its envs
with them (``Text-Blackjack-v1 [action_names=alt]``, see ``env_label``) and counts only the
rows made with them, so a variant's rows never read as the plain env's.

Normalized score = (mean - random) / (best reference - random), per env: ``random`` is the
mean of the ``random`` agent on the same seeds, ``best reference`` the best mean among the
reference agents (``optimal`` and ``sb3-*``) on the same seeds. Where those rows are missing,
the published figures in ``REFERENCE_RETURNS`` stand in; with neither the score is blank.

Example:
    >>> rows = [{"env_id": "E", "agent": a, "seed": s, "return": r, "length": 1,
    ...          "parse_rate": 1.0, "wall_s": 0.001}
    ...         for a, r in [("random", 0.0), ("optimal", 1.0), ("x", 0.5)] for s in range(4)]
    >>> [(s.agent, s.mean, s.normalized) for s in summarize(rows, ["E"], ["random", "x"])]
    [('random', 0.0, 0.0), ('x', 0.5, 0.5)]
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from llmgym.bench.costs import TrainingCost, training_cost
from llmgym.envs.catalog import text_id
from llmgym.files import write_figure, write_text

#: Published (random, best known) returns for when a run lacks random or reference rows (see
#: the project's REFERENCE.md), keyed by the catalog's text ids.
REFERENCE_RETURNS: dict[str, tuple[float, float]] = {
    text_id("CartPole"): (22.0, 500.0),
    text_id("Acrobot"): (-500.0, -73.5),
    text_id("MountainCar"): (-200.0, -100.8),
    text_id("Blackjack"): (-0.394, -0.0431),
    text_id("FrozenLake"): (0.0139, 0.744),
}
REFERENCE_AGENTS = ("optimal", "sb3-ppo", "sb3-dqn", "sb3-a2c")
BOOTSTRAP_SAMPLES = 2000


def bootstrap_ci(
    values: Sequence[float], level: float = 0.95, seed: int = 0
) -> tuple[float, float]:
    """Percentile bootstrap confidence interval of the mean (deterministic for a seed).

    Example:
        >>> bootstrap_ci([1.0, 1.0, 1.0])
        (1.0, 1.0)
    """
    data = np.asarray(values, dtype=float)
    rng = np.random.default_rng(seed)
    means = data[rng.integers(len(data), size=(BOOTSTRAP_SAMPLES, len(data)))].mean(axis=1)
    tail = (1 - level) / 2 * 100
    low, high = np.percentile(means, [tail, 100 - tail])
    return float(low), float(high)


@dataclass(frozen=True)
class CellStats:
    """One leaderboard line."""

    env_id: str
    agent: str
    episodes: int
    mean: float
    ci_low: float
    ci_high: float
    normalized: float | None
    normalized_ci: tuple[float, float] | None
    parse_rate: float
    steps_per_s: float
    exact: float | None = None
    training: TrainingCost | None = None
    #: The env kwargs the bench made the env with, as ``env_label`` writes them ("" if none).
    variant: str = ""

    @property
    def label(self) -> str:
        """The env as the leaderboard names it: its id, then its env kwargs in brackets."""
        return f"{self.env_id} [{self.variant}]" if self.variant else self.env_id


def variant_text(env_kwargs: dict[str, Any] | None) -> str:
    """Env kwargs as a leaderboard label writes them: ``KEY=VALUE``, comma-separated.

    Example:
        >>> variant_text({"action_names": "alt", "shuffle_actions": True}), variant_text(None)
        ('action_names=alt, shuffle_actions=true', '')
    """
    import json

    return ", ".join(
        f"{k}={v if isinstance(v, str) else json.dumps(v)}" for k, v in (env_kwargs or {}).items()
    )


def env_label(env_id: str, env_kwargs: dict[str, Any] | None = None) -> str:
    """An env's name in the leaderboard: its id, with the bench's env kwargs in brackets.

    Example:
        >>> env_label("Text-Blackjack-v1", {"action_names": "alt"}), env_label("Text-Taxi-v4")
        ('Text-Blackjack-v1 [action_names=alt]', 'Text-Taxi-v4')
    """
    variant = variant_text(env_kwargs)
    return f"{env_id} [{variant}]" if variant else env_id


def _anchors(means: dict[str, float], env_id: str) -> tuple[float, float] | None:
    random, best = REFERENCE_RETURNS.get(env_id, (None, None))
    random = means.get("random", random)
    references = [means[a] for a in REFERENCE_AGENTS if a in means]
    best = max(references) if references else best
    if random is None or best is None or math.isclose(best, random):
        return None
    return random, best


def _normalizer(random: float, best: float) -> Any:
    return lambda value: (value - random) / (best - random)


def _ordered(a: float, b: float) -> tuple[float, float]:
    """``(low, high)``: a normalizer whose best reference lies below random (a sampled
    random mean above the published best) reverses the interval; keep it ordered."""
    return (a, b) if a <= b else (b, a)


def summarize(
    rows: Sequence[dict[str, Any]],
    env_ids: Sequence[str],
    agents: Sequence[str],
    exact: dict[tuple[str, str], float] | None = None,
    costs: dict[tuple[str, str], TrainingCost | None] | None = None,
) -> list[CellStats]:
    """Leaderboard lines for ``agents`` on ``env_ids`` (in that order); the normalization
    anchors come from every agent's rows on the env. ``exact[(env, agent)]`` is the exact
    value of a cell and ``costs[(env, agent)]`` its agent's training, where known."""
    by_cell: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for row in sorted(rows, key=lambda r: r["seed"]):  # statistics ignore the order of arrival
        by_cell.setdefault((row["env_id"], row["agent"]), []).append(row)
    stats = []
    for env_id in env_ids:
        means = {
            a: float(np.mean([r["return"] for r in rs]))
            for (e, a), rs in by_cell.items()
            if e == env_id
        }
        anchors = _anchors(means, env_id)
        for agent in agents:
            cell = by_cell.get((env_id, agent))
            if not cell:
                continue
            returns = [r["return"] for r in cell]
            low, high = bootstrap_ci(returns)
            steps = sum(r["length"] for r in cell)
            parsed = sum(r["parse_rate"] * r["length"] for r in cell)
            wall = sum(r["wall_s"] for r in cell)
            mean = means[agent]
            scale = None if anchors is None else _normalizer(*anchors)
            stats.append(
                CellStats(
                    env_id=env_id,
                    agent=agent,
                    episodes=len(cell),
                    mean=mean,
                    ci_low=low,
                    ci_high=high,
                    normalized=None if scale is None else scale(mean),
                    normalized_ci=None if scale is None else _ordered(scale(low), scale(high)),
                    parse_rate=parsed / steps,
                    steps_per_s=steps / wall if wall > 0 else float("nan"),
                    exact=(exact or {}).get((env_id, agent)),
                    training=(costs or {}).get((env_id, agent)),
                )
            )
    return stats


def _num(x: float) -> str:
    return f"{x:.3f}" if abs(x) < 10 else f"{x:.1f}"


def training_text(cost: TrainingCost | None) -> str:
    """A training-cost cell: env steps, then wall time where recorded.

    Example:
        >>> training_text(TrainingCost(50_000, 334.1)), training_text(TrainingCost(0, 0.0))
        ('50,000 (5.6 min)', '0')
        >>> training_text(TrainingCost(21_193, None)), training_text(None)
        ('21,193', '?')
    """
    if cost is None:
        return "?"
    if not cost.env_steps:
        return "0"
    wall = f" ({cost.wall_s / 60:.1f} min)" if cost.wall_s else ""
    return f"{cost.env_steps:,}{wall}"


def markdown_table(stats: Sequence[CellStats]) -> str:
    """The leaderboard as a GitHub markdown table."""
    lines = [
        "| env | agent | episodes | mean return | 95 % CI | normalized | parse rate "
        "| env-steps/s | exact | trained on (env steps) |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for s in stats:
        normalized = "—" if s.normalized is None else f"{s.normalized:.2f}"
        exact = "—" if s.exact is None else f"{s.exact:.4f}"
        lines.append(
            f"| {s.label} | {s.agent} | {s.episodes} | {_num(s.mean)} | "
            f"[{_num(s.ci_low)}, {_num(s.ci_high)}] | {normalized} | {s.parse_rate:.2f} | "
            f"{s.steps_per_s:,.0f} | {exact} | {training_text(s.training)} |"
        )
    return "\n".join(lines) + "\n"


def summary_table(stats: Sequence[CellStats], default_machine: str | None = None) -> str:
    """The leaderboard without the run-time columns (parse rate, env-steps/s): mean return and
    normalized score with their 95 % CIs, exact value and training cost; then a line naming
    the machine(s) the training wall times were measured on (``default_machine`` for records
    that name none). One machine goes in that line, several in each cell.

    Example:
        >>> cell = CellStats("Text-E-v0", "sb3-ppo", 30, 0.5, 0.25, 0.75, 0.5, (0.25, 0.75),
        ...                  1.0, 100.0, training=TrainingCost(50_000, 120.0))
        >>> print(summary_table([cell], "a 2-core CPU"))
        | env | agent | episodes | mean return [95 % CI] | normalized [95 % CI] | exact | trained on (env steps) |
        |---|---|---:|---:|---:|---:|---:|
        | E-v0 | sb3-ppo | 30 | 0.500 [0.250, 0.750] | 0.50 [0.25, 0.75] | — | 50,000 (2.0 min) |
        <BLANKLINE>
        Training wall times (in parentheses) were measured on a 2-core CPU.
        <BLANKLINE>
    """  # noqa: E501
    timed = [s.training for s in stats if s.training is not None and s.training.wall_s]
    machines = list(dict.fromkeys(c.machine or default_machine or "?" for c in timed))
    lines = [
        "| env | agent | episodes | mean return [95 % CI] | normalized [95 % CI] | exact "
        "| trained on (env steps) |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    for s in stats:
        normalized = "—"
        if s.normalized is not None and s.normalized_ci is not None:
            low, high = s.normalized_ci
            normalized = f"{s.normalized:.2f} [{low:.2f}, {high:.2f}]"
        exact = "—" if s.exact is None else f"{s.exact:.4f}"
        trained = training_text(s.training)
        if len(machines) > 1 and s.training is not None and s.training.wall_s:
            trained = f"{trained[:-1]}, {s.training.machine or default_machine or '?'})"
        lines.append(
            f"| {s.label.removeprefix('Text-')} | {s.agent} | {s.episodes} | "
            f"{_num(s.mean)} [{_num(s.ci_low)}, {_num(s.ci_high)}] | {normalized} | {exact} | "
            f"{trained} |"
        )
    if len(machines) == 1:
        lines += ["", f"Training wall times (in parentheses) were measured on {machines[0]}."]
    return "\n".join(lines) + "\n"


def _bar(length: float) -> float:
    """An error bar's length as matplotlib takes it: finite and not negative."""
    return length if math.isfinite(length) and length > 0 else 0.0


def chart_label(agent: str) -> str:
    """An agent's name in a chart's legend: a trained policy by its run's folder name.

    Example:
        >>> chart_label("llm:smollm2-135m@benchmarks/weights/rl/blackjack-ppo-s0")
        'llm:smollm2-135m@blackjack-ppo-s0'
        >>> chart_label("llm:smollm2-135m,mode=generate"), chart_label("sb3-ppo")
        ('llm:smollm2-135m,mode=generate', 'sb3-ppo')
    """
    model, at, run = agent.partition("@")
    if not at:
        return agent
    path, comma, options = run.partition(",")
    return f"{model}@{Path(path.rstrip('/')).name or path}{comma}{options}"


def plot(stats: Sequence[CellStats], path: Path) -> None:
    """Grouped bars of normalized score per env and agent, with the normalized 95 % CI; a dot
    marks each bar's value, so that a score of 0 (random's, by definition) still shows."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    envs = list(dict.fromkeys(s.env_id for s in stats))
    agents = list(dict.fromkeys(s.agent for s in stats))
    width = 0.8 / max(len(agents), 1)
    fig, ax = plt.subplots(figsize=(max(8.0, 1.2 * len(envs) + 2), 5.0))
    ax.axhline(0, color="black", linewidth=0.8, zorder=1)
    ax.axhline(1, color="grey", linewidth=0.8, linestyle="--", zorder=1)
    for k, agent in enumerate(agents):
        xs, ys, errs = [], [], [[], []]
        for i, env_id in enumerate(envs):
            cell = next((s for s in stats if s.env_id == env_id and s.agent == agent), None)
            if cell is None or cell.normalized is None or cell.normalized_ci is None:
                continue
            low, high = cell.normalized_ci
            xs.append(i + (k - (len(agents) - 1) / 2) * width)
            ys.append(cell.normalized)
            errs[0].append(_bar(cell.normalized - low))
            errs[1].append(_bar(high - cell.normalized))
        colour = plt.cm.tab10(k) if k < 10 else plt.cm.tab20((2 * k + 1) % 20)  # light: 11th on
        ax.bar(xs, ys, width, color=colour, label=chart_label(agent), zorder=2)
        ax.errorbar(
            xs, ys, yerr=errs, fmt="o", color=colour, markersize=3.5, markeredgecolor="black",
            markeredgewidth=0.5, ecolor="black", elinewidth=0.8, capsize=2, zorder=3,
        )  # fmt: skip
    ax.set_xticks(range(len(envs)))
    labels = {s.env_id: s.label for s in stats}
    ax.set_xticklabels([labels[e].removeprefix("Text-") for e in envs], rotation=30, ha="right")
    ax.set_ylabel("normalized score")
    ax.set_title(
        "Normalized score per env (random = 0, best reference = 1), 95 % bootstrap CI",
        fontsize="medium",
    )
    ax.set_ylim(bottom=min(-0.25, ax.get_ylim()[0]))
    ax.legend(
        fontsize="small", ncol=min(len(agents), 3), loc="upper center",
        bbox_to_anchor=(0.5, -0.3), frameon=False,
    )  # fmt: skip
    _save(fig, path, bbox_inches="tight")


def _save(fig: Any, path: Path, **savefig: Any) -> None:
    """``fig`` as a PNG at ``path``, all-or-nothing; the figure is closed either way."""
    import matplotlib.pyplot as plt

    try:
        write_figure(fig, path, dpi=120, format="png", **savefig)
    finally:
        plt.close(fig)


def plot_cost(stats: Sequence[CellStats], path: Path) -> None:
    """Normalized score against training env steps (log x; untrained agents at 1), one marker
    per agent and one colour per env: how much training each agent's score cost."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cells = [s for s in stats if s.normalized is not None and s.training is not None]
    envs = list(dict.fromkeys(s.env_id for s in cells))
    agents = list(dict.fromkeys(s.agent for s in cells))
    markers = "osD^v<>pP*Xh"
    fig, ax = plt.subplots(figsize=(11, 5))
    for s in cells:
        ax.scatter(
            max(s.training.env_steps, 1),
            s.normalized,
            color=plt.cm.tab10(envs.index(s.env_id) % 10),
            marker=markers[agents.index(s.agent) % len(markers)],
        )
    labels = {s.env_id: s.label for s in cells}
    for i, env_id in enumerate(envs):  # legend entries: colours for envs, markers for agents
        ax.scatter([], [], color=plt.cm.tab10(i % 10), label=labels[env_id].removeprefix("Text-"))
    for k, agent in enumerate(agents):
        ax.scatter([], [], color="grey", marker=markers[k % len(markers)], label=chart_label(agent))
    ax.set_xscale("log")
    ax.axhline(1, color="grey", linewidth=0.8, linestyle="--")
    ax.set_xlabel("training env steps (untrained agents at 1)")
    ax.set_ylabel("normalized score")
    ax.set_title("Normalized score against the training it cost")
    if cells:
        ax.legend(fontsize="x-small", loc="center left", bbox_to_anchor=(1.01, 0.5))
    _save(fig, path, bbox_inches="tight")


NOTES = """
- **mean return**: mean undiscounted episode return over the episodes (episode *i* starts with
  `reset(seed=SEED + i)`, the same for every agent).
- **95 % CI**: percentile bootstrap of the mean (2,000 resamples).
- **normalized**: (mean - random) / (best reference - random), where random is the `random`
  agent's mean and best reference the best mean among `optimal` and `sb3-*` on the same
  seeds (published figures stand in when those rows are missing); 1 = as good as the best
  reference, 0 = no better than random.
- **parse rate**: fraction of steps whose action text parsed (`info["parse"]["ok"]`).
- **env-steps/s**: steps / wall time of acting and stepping (LLM agents: batched forward
  passes included); machine-dependent.
- **exact**: the exact expected return of the agent's greedy policy, from the env's
  transition model under the same step cap (Blackjack, FrozenLake, Taxi, CliffWalking; not
  for `random`); no sampling error.
- **trained on**: env steps (and wall time, this project's 2-core CPU) the agent was trained
  for: 0 for random, optimal and zero-shot LLMs; SB3 from `sb3_models.json` or its cache
  record; a trained LLM (`llm:MODEL@RUN`) from its run's `result.json`, else the training
  record whose `weights` is RUN (`benchmarks/results/rl/NAME.json`, with its command), else
  RUN's `trainer_state.json` (env steps only); `?` where unknown.
  `leaderboard_cost.png` plots normalized score against it.
"""


def leaderboard_stats(
    output: Path,
    env_ids: Sequence[str],
    agents: Sequence[str],
    seeds: Callable[[str], range] | None = None,
    env_kwargs: dict[str, Any] | None = None,
) -> list[CellStats]:
    """The leaderboard lines of the episodes recorded under ``output`` on ``env_ids`` (only
    those of ``seeds(env_id)`` if given, else all): ``agents`` first, then any other agent an
    earlier run recorded (cells may hold different episode counts; their first seeds are
    shared), with exact values and training costs. Only rows made with ``env_kwargs`` count
    (a row records its env kwargs; none for the plain envs), and the lines are labelled
    with them (``CellStats.label``)."""
    import dataclasses

    from llmgym.bench.runner import EXACT_FILE, load_rows

    output = Path(output)
    kwargs = dict(env_kwargs or {})

    def mine(row: dict[str, Any]) -> bool:
        return row.get("env_kwargs", {}) == kwargs

    rows = [
        r
        for r in load_rows(output)
        if mine(r) and (seeds is None or r["seed"] in seeds(r["env_id"]))
    ]
    exact = {
        (r["env_id"], r["agent"]): r["exact_return"]
        for r in load_rows(output, EXACT_FILE)
        if mine(r)
    }
    earlier = [r["agent"] for r in rows if r["env_id"] in env_ids]
    names = list(dict.fromkeys([*agents, *earlier]))
    costs = {(e, a): training_cost(a, e, output) for e in env_ids for a in names}
    stats = summarize(rows, env_ids, names, exact, costs)
    variant = variant_text(kwargs)
    return [dataclasses.replace(s, variant=variant) for s in stats] if variant else stats


def report_text(stats: Sequence[CellStats], command: str) -> str:
    """The text of ``leaderboard.md``: the table made by ``command``, then the notes."""
    return f"# Leaderboard\n\nMade by `{command}`.\n\n{markdown_table(stats)}{NOTES}"


def write_report(
    output: Path,
    env_ids: Sequence[str],
    agents: Sequence[str],
    command: str,
    chart: bool = True,
    seeds: Callable[[str], range] | None = None,
    env_kwargs: dict[str, Any] | None = None,
) -> list[CellStats]:
    """Write ``leaderboard.md`` (and ``leaderboard.png``, ``leaderboard_cost.png``) under
    ``output`` from ``leaderboard_stats(output, env_ids, agents, seeds, env_kwargs)``, each
    all-or-nothing (``OutputError`` when one cannot be written)."""
    output = Path(output)
    stats = leaderboard_stats(output, env_ids, agents, seeds, env_kwargs)
    write_text(output / "leaderboard.md", report_text(stats, command))
    if chart and stats:
        plot(stats, output / "leaderboard.png")
        plot_cost(stats, output / "leaderboard_cost.png")
    return stats
