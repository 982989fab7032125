"""Learning-curve plots of a run directory's metrics (``metrics.jsonl``, or ``metrics.csv`` for
a run logged before it): return, parse rate, KL, entropy."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from llmgym.errors import OutputError, TrainingError
from llmgym.files import write_figure
from llmgym.rl.logger import read_rows


def read_metrics(run_dir: str | Path) -> list[dict[str, float]]:
    """A run's logged rows with numeric values (blank, text or true/false values are dropped);
    a row a kill cut short is left out.

    Example:
        >>> import tempfile
        >>> from llmgym.rl.logger import MetricsLogger
        >>> run = Path(tempfile.mkdtemp())
        >>> logger = MetricsLogger(run, {}, tensorboard=False)
        >>> logger.log({"eval/mean_return": 0.5, "diagnostics/top_action": "hit"}, step=16)
        >>> read_metrics(run)
        [{'env_steps': 16.0, 'eval/mean_return': 0.5}]
    """
    run_dir = Path(run_dir)
    if not (run_dir / "metrics.jsonl").exists() and not (run_dir / "metrics.csv").exists():
        raise TrainingError(f"No metrics.csv in {run_dir}; pass the --output directory of a run.")
    rows = []
    for raw in read_rows(run_dir):
        row = {}
        for k, v in raw.items():
            if isinstance(v, bool):  # metrics.csv spelt these True/False: not plotted
                continue
            try:
                row[k] = float(v)
            except (TypeError, ValueError):
                continue
        rows.append(row)
    return rows


def _series(rows: list[dict[str, float]], key: str) -> tuple[list[float], list[float]]:
    xs, ys = [], []
    for r in rows:
        if key in r and math.isfinite(r[key]):
            xs.append(r.get("env_steps", len(xs)))
            ys.append(r[key])
    return xs, ys


def _eval_labels(rows: list[dict[str, float]]) -> tuple[str, str]:
    """The legend's names of the periodic and the final evaluations: the exact value where the
    final one was exact (``final_eval/episodes`` 0; the periodic ones are made alike), else
    the episodes played.

    Example:
        >>> _eval_labels([{"final_eval/mean_return": -0.07, "final_eval/episodes": 0.0}])
        ('eval (exact value)', 'final eval (exact value)')
        >>> _eval_labels([{"final_eval/mean_return": 0.5, "final_eval/episodes": 1000.0}])
        ('eval (greedy, fixed seeds)', 'final eval (1,000 episodes)')
    """
    _, episodes = _series(rows, "final_eval/episodes")
    if episodes and episodes[-1] == 0:
        return "eval (exact value)", "final eval (exact value)"
    final = f"final eval ({int(episodes[-1]):,} episodes)" if episodes else "final eval"
    return "eval (greedy, fixed seeds)", final


#: The series a learning curve draws; metrics with none of them have nothing to plot.
PLOTTED = (
    "charts/episodic_return",
    "eval/mean_return",
    "final_eval/mean_return",
    "llmgym/parse_rate",
    "eval/parse_rate",
    "losses/kl",
    "losses/approx_kl",
    "charts/entropy",
)


def plot_run(
    run_dir: str | Path,
    out: str | Path | None = None,
    references: dict[str, float] | None = None,
    title: str | None = None,
) -> Path:
    """Write a 2x2 learning-curve PNG (default ``RUN_DIR/learning_curve.png``); ``references``
    draws horizontal lines (e.g. ``{"random": -0.39, "optimal": -0.043}``). A PNG that cannot
    be written (a full disk, a read-only folder) raises ``TrainingError`` naming it, and leaves
    no partial file."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = read_metrics(run_dir)
    if not any(_series(rows, key)[0] for key in PLOTTED):
        raise TrainingError(
            f"The metrics of {run_dir} hold no row llmgym logged (no return, parse rate, KL or "
            "entropy); pass the --output directory of a run that trained."
        )
    out = Path(out) if out else Path(run_dir) / "learning_curve.png"
    fig, axes = plt.subplots(2, 2, figsize=(11, 7), constrained_layout=True)
    suffix = out.suffix.lstrip(".").lower()
    if suffix and suffix not in fig.canvas.get_supported_filetypes():
        plt.close(fig)
        raise TrainingError(f"Cannot plot to {out}: no image format is called {suffix!r}; use png.")
    ax = axes[0, 0]
    eval_label, final_label = _eval_labels(rows)
    x, y = _series(rows, "charts/episodic_return")
    if x:
        ax.plot(x, y, alpha=0.45, label="train episodes (sampled)")
    x, y = _series(rows, "eval/mean_return")
    _, ci = _series(rows, "eval/ci95")
    if x:
        ax.plot(x, y, "o-", label=eval_label)
        if len(ci) == len(y):
            ax.fill_between(
                x, [a - b for a, b in zip(y, ci)], [a + b for a, b in zip(y, ci)], alpha=0.2
            )
    x, y = _series(rows, "final_eval/mean_return")
    _, ci = _series(rows, "final_eval/ci95")
    if x:
        ax.errorbar(
            x,
            y,
            yerr=ci if len(ci) == len(y) else None,
            fmt="s",
            color="C3",
            capsize=4,
            label=final_label,
        )
    for name, value in (references or {}).items():
        ax.axhline(value, ls="--", lw=1, color="gray")
        ax.annotate(name, (0, value), xycoords=("axes fraction", "data"), fontsize=8, va="bottom")
    ax.set_title("return")
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=8)
    panels: list[tuple[Any, str, list[str]]] = [
        (axes[0, 1], "parse rate", ["llmgym/parse_rate", "eval/parse_rate"]),
        (axes[1, 0], "KL", ["losses/kl", "losses/approx_kl"]),
        (axes[1, 1], "entropy", ["charts/entropy"]),
    ]
    for ax, name, keys in panels:
        for key in keys:
            x, y = _series(rows, key)
            if x:
                ax.plot(x, y, ".-", label=key)
        ax.set_title(name)
        if ax.lines:
            ax.legend(fontsize=8)
    for ax in axes.flat:
        ax.set_xlabel("env steps")
        ax.grid(alpha=0.3)
    fig.suptitle(title or str(run_dir))
    try:
        write_figure(fig, out, dpi=110)  # all-or-nothing: no empty PNG on a full disk
    except OutputError as error:  # a TrainingError, which `llmgym plot` prints as it is
        raise TrainingError(str(error)) from None
    finally:
        plt.close(fig)
    return out


__all__ = ["plot_run", "read_metrics"]
