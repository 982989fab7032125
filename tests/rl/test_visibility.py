"""Training says what it does (issue 36, item 3): the evaluation method before the start
evaluation and how to change it, every periodic evaluation, where a resume starts, and
``--no-start-eval`` skips the start evaluation."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

pytest.importorskip("peft")
sys.path.insert(0, str(Path(__file__).parents[1] / "support"))

from bandit import register  # noqa: E402
from typer.testing import CliRunner  # noqa: E402

from llmgym.cli import app  # noqa: E402

BANDIT = register("a")
ARGS = [
    "--model",
    "tiny",
    "--num-envs",
    "4",
    "--episodes-per-update",
    "4",
    "--eval-episodes",
    "4",
    "--final-eval-episodes",
    "4",
    "--set",
    "checkpoint_every=1",
]


def test_train_prints_its_evaluations_and_its_resume_point(tmp_path, capsys):
    out = str(tmp_path / "run")
    args = ["train", BANDIT, *ARGS, "--steps", "8", "--eval-every", "1", "--output", out]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    text = result.output + capsys.readouterr().out
    assert "Start evaluation: the greedy policy over 4 episodes (eval.method=auto" in text
    assert "--no-start-eval skips it" in text
    assert "iter 0: eval return" in text and "iter 1 (4 env steps): eval return" in text
    resume = ["train", BANDIT, *ARGS, "--steps", "12", "--output", out, "--resume"]
    result = CliRunner().invoke(app, resume)
    assert result.exit_code == 0, result.output
    text = result.output + capsys.readouterr().out
    assert "Resumed from " in text and "iter_000002: iteration 2, 8 env steps" in text


def test_no_start_eval_skips_the_start_evaluation(tmp_path, capsys):
    out = tmp_path / "run"
    args = ["train", BANDIT, *ARGS, "--steps", "4", "--no-start-eval", "--output", str(out)]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    text = result.output + capsys.readouterr().out
    assert "Start evaluation" not in text and "iter 0:" not in text
    assert "(before training not evaluated;" in " ".join(text.split())
    assert json.loads((out / "result.json").read_text())["start_value"] is None


def test_no_progress_hides_the_bar_but_not_the_evaluations(tmp_path, capsys):
    out = str(tmp_path / "run")
    args = ["train", BANDIT, *ARGS, "--eval-every", "1", "--no-progress", "--output", out]
    result = CliRunner().invoke(app, [*args, "--steps", "8"])
    assert result.exit_code == 0, result.output
    text = " ".join((result.output + capsys.readouterr().out).split())
    assert "budget 8 env steps (the last collection stops when they are spent)" in text
    assert "iter 0: eval return" in text and "iter 1 (4 env steps): eval return" in text
    result = CliRunner().invoke(app, [*args, "--steps", "12", "--resume"])
    assert result.exit_code == 0, result.output
    assert "Resumed from " in result.output + capsys.readouterr().out


def test_resume_takes_this_machines_threads(tmp_path, monkeypatch):
    # The run's own config is restored on --resume, but --threads belongs to the machine: a
    # run started with one thread and resumed with --threads 2 trains with two.
    import torch

    asked: list[int] = []
    monkeypatch.setattr(torch, "set_num_threads", asked.append)
    args = ["train", BANDIT, *ARGS, "--no-start-eval", "--output", str(tmp_path / "run")]
    result = CliRunner().invoke(app, [*args, "--steps", "4", "--threads", "1"])
    assert result.exit_code == 0, result.output
    result = CliRunner().invoke(app, [*args, "--steps", "8", "--threads", "2", "--resume"])
    assert result.exit_code == 0, result.output
    assert asked[0] == 1 and asked[-1] == 2, asked


def test_resume_names_the_options_it_does_not_apply(tmp_path, capsys):
    # The run keeps its own recipe on --resume: a changed --lr or --set is named, not dropped
    # in silence; the budget and options repeated unchanged are not.
    args = ["train", BANDIT, *ARGS, "--no-start-eval", "--output", str(tmp_path / "run")]
    result = CliRunner().invoke(app, [*args, "--steps", "4", "--lr", "0.003"])
    assert result.exit_code == 0, result.output
    capsys.readouterr()
    more = ["--steps", "8", "--lr", "0.0001", "--set", "gamma=0.5", "--resume"]
    result = CliRunner().invoke(app, [*args, *more])
    assert result.exit_code == 0, result.output
    text = " ".join((result.output + capsys.readouterr().out).split())
    assert (
        "--resume continues the run with its own settings, so these were not applied: --lr "
        "0.0001 (the run's: 0.003), --set gamma=0.5 (the run's: 1.0); pass another --output"
    ) in text, text
    result = CliRunner().invoke(app, [*args, "--steps", "12", "--lr", "0.003", "--resume"])
    assert result.exit_code == 0, result.output
    assert "not applied" not in result.output + capsys.readouterr().out


def test_the_bar_counts_the_episodes_that_whole_updates_train(tmp_path, capsys):
    # The budget is checked after each update of 4 episodes, so --episodes 6 trains 8; the bar
    # said 6/6 at the end of them.
    args = ["train", BANDIT, *ARGS, "--episodes", "6", "--steps", "1000", "--no-start-eval"]
    result = CliRunner().invoke(app, [*args, "--output", str(tmp_path / "run")])
    assert result.exit_code == 0, result.output
    bar = result.output + "".join(capsys.readouterr())
    assert "8/8" in bar and "/6 " not in bar, bar
    banner = " ".join(result.output.split())
    assert "budget 8 episodes (2 updates of 4) or 1000 env steps" in banner, banner


def test_the_start_evaluation_runs_once_where_it_measures_the_same(tmp_path, monkeypatch):
    # The start value (before training) and iteration 0's evaluation are one evaluation when
    # they measure the same thing (greedy, as many episodes, no SFT warm start in between).
    from llmgym.rl.run_evaluation import RunEvaluation

    calls: list[int | None] = []
    run = RunEvaluation.run
    monkeypatch.setattr(RunEvaluation, "run", lambda self, *a: calls.append(a[1]) or run(self, *a))
    args = ["train", BANDIT, *ARGS, "--steps", "4", "--eval-every", "0", "--no-progress"]
    result = CliRunner().invoke(app, [*args, "--output", str(tmp_path / "once")])
    assert result.exit_code == 0, result.output
    assert len(calls) == 2, calls  # the start value (also iteration 0's), the final one
    calls.clear()
    more = ["--eval-episodes", "8", "--output", str(tmp_path / "twice")]
    result = CliRunner().invoke(app, [*args, *more])
    assert result.exit_code == 0, result.output
    assert len(calls) == 3, calls  # 4 episodes before training, 8 at iteration 0: two


def test_an_exact_evaluation_shows_its_progress(capsys):
    from types import SimpleNamespace as NS

    import torch

    from llmgym.rl.run_evaluation import RunEvaluation

    config = NS(run=NS(env_id="Text-Blackjack-v1"))
    evaluation = RunEvaluation(config, [], {}, torch, show_progress=True)
    policy = NS(act=lambda obs, infos, greedy: [NS(text="stick") for _ in obs])
    assert evaluation.exact_value(policy)["mean_return"] < 0
    err = capsys.readouterr().err
    assert "exact evaluation" in err and "states" in err, err


def test_the_collapse_warning_names_a_parse_rate_of_zero():
    from types import SimpleNamespace as NS

    from llmgym.rl.metrics import collapse_warnings

    metrics = {
        "diagnostics/top_action_frac": 1.0,
        "diagnostics/num_valid_actions": 2,
        "diagnostics/top_action": "stick",
        "charts/episodic_length": 1.0,
        "charts/entropy": 10.79,
    }
    episodes = [NS(length=40)]
    nothing_parses = collapse_warnings(metrics | {"llmgym/parse_rate": 0.0}, episodes, 2.0)
    assert nothing_parses["collapse"].startswith("almost no answer parses (parse rate 0.00)")
    chosen = collapse_warnings(metrics | {"llmgym/parse_rate": 1.0}, episodes, 2.0)
    assert chosen["collapse"].startswith("action distribution collapsed: 'stick' is chosen 100%")
