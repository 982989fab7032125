"""The leaderboard's two PNG charts: normalized score per env and agent with its 95 % CI
(``plot``), and normalized score against training env steps (``plot_cost``), each written
all-or-nothing. ``llmgym.bench.report`` writes them next to ``leaderboard.md``.

Example:
    >>> chart_label("llm:smollm2-135m@runs/taxi-ppo-s0,mode=generate")
    'llm:smollm2-135m@taxi-ppo-s0,mode=generate'
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from llmgym.bench.scores import CellStats
from llmgym.files import write_figure


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
