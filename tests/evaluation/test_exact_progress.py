"""An exact evaluation says how far it is (issue 52: ``eval --exact`` was silent for minutes):
``exact_value(progress=...)`` hears of every batch of states answered, up to all of them."""

from __future__ import annotations

from llmgym.agents.evaluate import evaluate_exact
from llmgym.evaluation.exact import BATCH_SIZE, exact_value


def test_exact_value_reports_each_batch_of_states():
    seen: list[tuple[int, int]] = []

    def stick(observations, infos):
        return ['{"action": "stick"}'] * len(observations)

    result = exact_value("Text-Blackjack-v1", stick, progress=lambda *p: seen.append(p))
    assert seen[-1] == (result.states, result.states)
    assert [done for done, _ in seen] == sorted({done for done, _ in seen})  # increasing
    assert len(seen) == -(-result.states // BATCH_SIZE)


def test_eval_exact_runs_with_and_without_its_bar():
    for progress in (True, False):
        result = evaluate_exact("Text-FrozenLake-v1", "optimal", progress=progress)
        assert result["exact"] and result["states"] > 0
