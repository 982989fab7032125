"""Issue 37, item 3: the leaderboard of valid input never crashes (a normalized CI whose
anchors are reversed, as when a sampled random mean beats the published best reference)."""

from __future__ import annotations

import math

import typer
from typer.testing import CliRunner

import llmgym  # noqa: F401
from llmgym.bench.report import plot, summarize
from llmgym.cli.bench import register


def _app() -> typer.Typer:
    app = typer.Typer()
    register(app)
    return app


def test_blackjack_random_two_episodes_writes_the_leaderboard(tmp_path):
    out = tmp_path / "y"
    args = ["bench", "--envs", "Text-Blackjack-v1", "--agents", "random", "--episodes", "2"]
    result = CliRunner().invoke(_app(), [*args, "--output", str(out)])
    assert result.exit_code == 0, result.output
    assert (out / "leaderboard.png").stat().st_size > 0
    assert (out / "leaderboard.md").exists()


def test_reversed_anchors_keep_the_interval_ordered(tmp_path):
    # random's mean (0.5) lies above Blackjack's published best reference (-0.0431)
    rows = [
        {
            "env_id": "Text-Blackjack-v1",
            "agent": "random",
            "seed": s,
            "return": r,
            "length": 1,
            "parse_rate": 1.0,
            "wall_s": 0.001,
        }
        for s, r in enumerate([1.0, 0.0, 1.0, 0.0])
    ]
    (cell,) = summarize(rows, ["Text-Blackjack-v1"], ["random"])
    low, high = cell.normalized_ci
    assert low <= high
    plot([cell], tmp_path / "p.png")
    assert (tmp_path / "p.png").stat().st_size > 0


def test_plot_takes_non_finite_intervals(tmp_path):
    (cell,) = summarize(
        [
            {
                "env_id": "E",
                "agent": a,
                "seed": 0,
                "return": r,
                "length": 1,
                "parse_rate": 1.0,
                "wall_s": 0.0,
            }
            for a, r in [("random", 0.0), ("optimal", 1.0)]
        ],
        ["E"],
        ["optimal"],
    )
    broken = type(cell)(**{**cell.__dict__, "normalized_ci": (math.nan, math.inf)})
    plot([broken], tmp_path / "p.png")
    assert (tmp_path / "p.png").exists()
