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

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from llmgym.bench.charts import chart_label as chart_label  # re-exported: the charts
from llmgym.bench.charts import plot, plot_cost
from llmgym.bench.costs import TrainingCost, training_cost
from llmgym.bench.scores import BOOTSTRAP_SAMPLES as BOOTSTRAP_SAMPLES  # re-exported: the numbers
from llmgym.bench.scores import REFERENCE_AGENTS as REFERENCE_AGENTS
from llmgym.bench.scores import REFERENCE_RETURNS as REFERENCE_RETURNS
from llmgym.bench.scores import CellStats, summarize, variant_text
from llmgym.bench.scores import bootstrap_ci as bootstrap_ci
from llmgym.bench.scores import env_label as env_label
from llmgym.files import write_text


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

    from llmgym.bench.records import EXACT_FILE, load_rows

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
