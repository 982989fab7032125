"""The docs' classic leaderboard (docs/results/leaderboard.md) and ``leaderboard.md`` are what
``benchmarks/leaderboard_readme.py`` makes from the committed records (so neither can drift),
and the trained LLM rows carry their training records' env steps and wall time."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from llmgym.bench.costs import TrainingCost, training_cost

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def script():
    spec = importlib.util.spec_from_file_location(
        "leaderboard_readme", ROOT / "benchmarks" / "leaderboard_readme.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture()
def stats(script, monkeypatch):
    from llmgym.bench.report import leaderboard_stats
    from llmgym.bench.suites import SUITES

    monkeypatch.chdir(ROOT)  # checkpoint paths and training records are repo-relative
    return leaderboard_stats(script.OUTPUT, SUITES["classic"], script.AGENTS)


def test_docs_block_is_the_scripts_output(script, stats):
    readme = (ROOT / script.README).read_text()
    start, end = readme.index(script.START), readme.index(script.END) + len(script.END)
    assert readme[start:end] == script.readme_block(stats), (
        f"{script.README} leaderboard is stale: run python benchmarks/leaderboard_readme.py"
    )


def test_leaderboard_md_is_the_scripts_output(script, stats):
    from llmgym.bench.report import report_text

    committed = (ROOT / script.OUTPUT / "leaderboard.md").read_text()
    assert committed == report_text(stats, script.COMMAND)


def test_rl_trained_rows_show_their_records_wall_time(script, stats):
    cell = next(s for s in stats if s.agent.endswith("@benchmarks/weights/rl/blackjack-ppo-s0"))
    assert cell.training == TrainingCost(2906, 236.9)  # benchmarks/results/rl/blackjack-ppo-s0.json
    block = script.readme_block(stats)
    assert "| -0.0686 | 2,906 (3.9 min) |" in block
    assert f"measured on {script.MACHINE}." in block


def test_a_record_for_other_weights_is_not_used(tmp_path, monkeypatch):
    """A record whose env steps disagree with the weights' trainer_state.json describes an
    earlier run: only the weights' own env steps count."""
    weights = tmp_path / "weights"
    weights.mkdir()
    (weights / "trainer_state.json").write_text('{"env_steps": 100}')
    records = tmp_path / "records"
    records.mkdir()
    record = f'{{"weights": "{weights}", "env_steps": 90, "wall_s": 5.0, "machine": "M"}}'
    (records / "run.json").write_text(record)
    monkeypatch.setattr("llmgym.bench.costs.RUN_RECORDS", records)
    cost = training_cost(f"llm:smollm2-135m@{weights}", "Text-Blackjack-v1", tmp_path)
    assert cost == TrainingCost(100, None)
    (records / "run.json").write_text(record.replace("90", "100"))
    cost = training_cost(f"llm:smollm2-135m@{weights}", "Text-Blackjack-v1", tmp_path)
    assert cost == TrainingCost(100, 5.0, "M")


def test_a_removed_policy_keeps_its_training_cost(tmp_path, monkeypatch):
    """A policy no longer committed (its record's ``weights`` is null, ``weights_removed`` names
    where it was) keeps the cost of the leaderboard rows it played."""
    records = tmp_path / "records"
    records.mkdir()
    gone = tmp_path / "weights" / "gone"
    record = {"weights": None, "weights_removed": str(gone), "env_steps": 90, "wall_s": 5.0}
    (records / "run.json").write_text(json.dumps(record))
    monkeypatch.setattr("llmgym.bench.costs.RUN_RECORDS", records)
    cost = training_cost(f"llm:smollm2-135m@{gone}", "Text-Blackjack-v1", tmp_path)
    assert cost == TrainingCost(90, 5.0, None)
