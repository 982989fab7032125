"""Smoke runs of the benchmark scripts (tiny model, tiny budgets): each writes its JSON with
the expected keys and sane values. No wall-clock assertions."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "benchmarks"


def _run(script: str, *args: str) -> str:
    env = dict(os.environ, OMP_NUM_THREADS="1")
    command = [sys.executable, str(BENCH / script), *args]
    done = subprocess.run(command, capture_output=True, text=True, env=env, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def _fake_run(path: Path, env_id: str) -> Path:
    """A run directory as `llmgym train` leaves it: run.json and metrics.csv."""
    path.mkdir()
    config = {"env_id": env_id, "seed": 0, "eval_method": "auto", "eval_episodes": 100}
    (path / "run.json").write_text(json.dumps({"config": config, "algo": "ppo"}))
    rows = [
        {"env_steps": 0, "eval/mean_return": -0.4, "final_eval/mean_return": ""},
        {"env_steps": 50, "eval/mean_return": "", "final_eval/mean_return": ""},
        {"env_steps": 120, "eval/mean_return": -0.1, "final_eval/mean_return": ""},
        {"env_steps": 300, "eval/mean_return": "", "final_eval/mean_return": -0.05},
    ]
    with (path / "metrics.csv").open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    return path


def test_sample_efficiency_quick_writes_curves_table_and_plot(tmp_path):
    run = _fake_run(tmp_path / "run", "Text-Blackjack-v1")
    out = tmp_path / "se.json"
    _run(
        "sample_efficiency.py",
        "--quick",
        "--envs",
        "Text-Blackjack-v1",
        "Text-CartPole-v1",
        "--seeds",
        "0",
        "--llm",
        f"Text-Blackjack-v1={run}",
        "--output",
        str(out),
    )
    report = json.loads(out.read_text())
    assert {"settings", "curves", "steps_to_target", "table", "warnings"} <= set(report)
    assert out.with_suffix(".png").stat().st_size > 0
    agents = {(c["env_id"], c["agent"]) for c in report["curves"]}
    assert agents == {
        ("Text-Blackjack-v1", "llm-ppo"),
        ("Text-Blackjack-v1", "sb3-ppo"),
        ("Text-Blackjack-v1", "sb3-dqn"),
        ("Text-CartPole-v1", "sb3-ppo"),
        ("Text-CartPole-v1", "sb3-dqn"),
    }
    llm = next(c for c in report["curves"] if c["agent"] == "llm-ppo")
    assert llm["env_steps"] == [0, 120, 300] and llm["values"] == [-0.4, -0.1, -0.05]
    assert report["steps_to_target"]["Text-Blackjack-v1"][f"llm-ppo:0:{run}"] == 300
    for curve in report["curves"]:
        assert curve["env_steps"][0] == 0 and curve["env_steps"] == sorted(curve["env_steps"])
        if curve["agent"].startswith("sb3-"):
            assert curve["env_steps"][-1] >= 600  # the quick budget
            lo, hi = (-1.0, 1.5) if "Blackjack" in curve["env_id"] else (1.0, 500.0)
            assert all(lo <= v <= hi for v in curve["values"])

    # The SB3 curves are reused, not retrained, when LLM curves are added later.
    again = tmp_path / "again.json"
    _run(
        "sample_efficiency.py",
        "--envs",
        "Text-Blackjack-v1",
        "--sb3-from",
        str(out),
        "--llm",
        f"Text-Blackjack-v1={run / 'metrics.csv'}",
        "--output",
        str(again),
    )
    reused = json.loads(again.read_text())
    old = [c for c in report["curves"] if c["env_id"] == "Text-Blackjack-v1"]
    new = [c for c in reused["curves"] if c["agent"].startswith("sb3-")]
    assert [c["values"] for c in new] == [c["values"] for c in old if c["source"] == "sb3"]


def test_train_throughput_quick_writes_every_configuration(tmp_path):
    out = tmp_path / "tt.json"
    _run(
        "train_throughput.py",
        "--quick",
        "--envs",
        "Text-Blackjack-v1",
        "--output",
        str(out),
        "--workdir",
        str(tmp_path / "runs"),
    )
    report = json.loads(out.read_text())
    assert {"gemm_peak_gflop_per_s", "flop_model", "table", "results", "machine"} <= set(report)
    assert report["gemm_peak_gflop_per_s"] > 0
    rows = {r["config"]: r for r in report["results"]}
    assert set(rows) == {"score-head", "score-lora-head", "generate-lora"}
    for name, row in rows.items():
        s = row["summary"]
        assert s["env_steps"] > 0 and s["env_steps_per_s"] > 0
        assert 0 < s["flop_ceiling_fraction"]
        # The forward hook and the policy's own counters agree on acting tokens (generate
        # mode feeds back every generated token but the last).
        assert s["act_tokens_per_step_hook"] == pytest.approx(
            s["act_tokens_per_step_stats"], rel=0.1
        )
        assert f"| {name} |" in report["table"]
    # Head-only: the frozen backbone is memoised, so the update runs no LM tokens, no backward.
    assert rows["score-head"]["summary"]["update_forward_tokens_per_step"] == 0
    assert rows["score-head"]["backward_span_params"] == 0
    assert rows["score-lora-head"]["summary"]["update_backward_tokens_per_step"] > 0
    assert rows["generate-lora"]["train_config"]["action_head"] is False


def test_sb3_curve_records_exact_values_where_it_can_and_episode_means_elsewhere(tmp_path):
    for env_id, evaluation in (("Blackjack-v1", "exact"), ("CartPole-v1", "mean return of 2")):
        out = tmp_path / f"{env_id}.json"
        _run(
            "sb3_curve.py",
            env_id,
            "a2c",
            "--budget",
            "80",
            "--every",
            "40",
            "--episodes",
            "2",
            "--output",
            str(out),
        )
        record = json.loads(out.read_text())
        assert record["evaluation"].startswith(evaluation)
        steps = record["env_steps"]  # PPO/A2C finish their rollout: the last point may pass 80
        assert steps[0] == 0 and steps == sorted(steps) and steps[-1] >= 80
        assert len(record["values"]) == len(steps)
        assert record["recipe"]["n_timesteps"] > 0 and "--budget 80" in record["command"]
    blackjack = json.loads((tmp_path / "Blackjack-v1.json").read_text())
    # An expected return, not the mean of 2 episodes (which could only be a multiple of 0.5).
    assert blackjack["values"][0] * 2 != round(blackjack["values"][0] * 2)


def test_sb3_curve_records_an_attempt_at_another_recipe(tmp_path):
    out = tmp_path / "curve.json"
    _run(
        "sb3_curve.py", "Blackjack-v1", "a2c", "--budget", "60", "--every", "40",
        "--set", "n_steps=8", "--set", "learning_rate=lin_1e-3", "--n-envs", "3",
        "--output", str(out),
    )  # fmt: skip
    record = json.loads(out.read_text())
    # 3 envs step together (an evaluation at 42, not 40) and learn() ends its last rollout of
    # 8 steps x 3 envs at 72 (with the recipe's n_steps 16 it would end at 96, with 8 envs at 64).
    assert record["env_steps"] == [0, 42, 72]
    recipe = record["recipe"]
    assert recipe["hyperparams"]["n_steps"] == 8 and recipe["n_envs"] == 3
    assert recipe["n_timesteps"] == 60
    assert record["overrides"] == {"n_steps": 8, "learning_rate": "lin_1e-3", "n_envs": 3}
    script = [sys.executable, str(BENCH / "sb3_curve.py"), "Blackjack-v1", "a2c"]
    for bad, message in (
        (["--set", "x"], "--set takes KEY=VALUE, not 'x'."),
        (
            ["--set", "n_envs=4"],
            "--set n_envs is not an algorithm hyperparameter here; use --n-envs.",
        ),
        (["--n-envs", "0"], "--n-envs must be at least 1, not 0."),
    ):
        done = subprocess.run(script + bad, capture_output=True, text=True, cwd=ROOT)
        assert done.returncode == 2 and message in done.stderr


@pytest.fixture(scope="module")
def cartpole_policy(tmp_path_factory) -> Path:
    """A tiny model's CartPole policy directory (action head, 40 training steps)."""
    from typer.testing import CliRunner

    from llmgym.cli import app

    tmp_path = tmp_path_factory.mktemp("cartpole")
    policy = tmp_path / "policy"
    args = ["train", "Text-CartPole-v1", "--model", "tiny", "--no-progress", "--steps", "40"]
    args += ["--output", str(tmp_path / "run"), "--policy-out", str(policy)]
    args += ["--eval-episodes", "2", "--final-eval-episodes", "2"]
    args += ["--set", "train_backbone=false", "--set", "eval_every=0"]
    args += ["--episodes-per-update", "2", "--set", "checkpoint_every=1"]
    assert CliRunner().invoke(app, args).exit_code == 0
    return policy


def test_checkpoint_curve_evaluates_each_checkpoint_once(cartpole_policy, tmp_path):
    run = cartpole_policy.parent / "run"
    out = tmp_path / "curve.csv"
    args = [str(run), "--output", str(out), "--episodes", "2", "--model", "tiny"]
    _run("checkpoint_curve.py", *args)
    with out.open() as f:
        rows = list(csv.DictReader(f))
    states = sorted((run / "checkpoints").glob("iter_*/trainer_state.json"))
    assert len(rows) == len(states) >= 2
    assert [int(r["env_steps"]) for r in rows] == sorted(
        json.loads(s.read_text())["env_steps"] for s in states
    )
    assert all(1.0 <= float(r["eval/mean_return"]) <= 500.0 for r in rows)
    # The last checkpoint is the final policy: the same value as the trainer's final evaluation.
    with (run / "metrics.csv").open() as f:
        final = [r["final_eval/mean_return"] for r in csv.DictReader(f)][-1]
    assert float(rows[-1]["eval/mean_return"]) == pytest.approx(float(final))
    _run("checkpoint_curve.py", *args)  # resumes: nothing left to evaluate
    assert len(out.read_text().splitlines()) == len(rows) + 1


def test_sample_efficiency_draws_a_records_checkpoint_curve(tmp_path, monkeypatch):
    import importlib.util

    spec = importlib.util.spec_from_file_location("se", BENCH / "sample_efficiency.py")
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "se", module)  # its dataclasses look their module up
    spec.loader.exec_module(module)
    record = {"env_id": "Text-CartPole-v1", "algo": "ppo", "eval_method": "sampled"}
    (tmp_path / "r.json").write_text(json.dumps(record))
    (tmp_path / "r.csv").write_text(
        "env_steps,eval/mean_return,final_eval/mean_return\n0,9.5,\n300,,120.0\n"
    )
    (tmp_path / "r.checkpoints.csv").write_text(
        "env_steps,eval/mean_return,eval/ci95,checkpoint\n100,30.0,4.0,iter_000001\n"
        "300,119.0,9.0,iter_000002\n"
    )
    curve = module.read_llm_curve("Text-CartPole-v1", str(tmp_path / "r.json"))
    assert curve.env_steps == [0, 100, 300]
    assert curve.values == [9.5, 30.0, 120.0]  # the training record's own evaluation wins


def test_cartpole_failures_says_how_each_episode_ended_and_what_the_head_reads(cartpole_policy):
    out = _run(
        "cartpole_failures.py",
        str(cartpole_policy),
        "--model",
        "tiny",
        "--episodes",
        "2",
        "--states",
        "24",
        "--threads",
        "1",
    )
    ends = [line for line in out.splitlines() if line.startswith("  seed ")]
    assert len(ends) == 2
    assert all(("off the track" in e) or ("pole fell" in e) or ("truncated" in e) for e in ends)
    for name in ("x_dot", "theta_dot", "bias"):
        assert f"  {name}" in out
    # the language model's part and the head's add up to the whole score's weights
    rows = {
        line.split()[0]: line.split()[2:]
        for line in out.splitlines()
        if line.split()[:1] in (["LM"], ["head"], ["total"])
    }
    lm, head, total = (np.array(rows[k], dtype=float) for k in ("LM", "head", "total"))
    assert np.allclose(lm + head, total, atol=2e-3)
    assert "fitted on the words alone" in out
    rules = out.split("rules of the state")[1].splitlines()[1:]
    assert "rotating right" in rules[1] and rules[1].split()[-3:] == ["199.75", "+-", "20.04"]


@pytest.mark.parametrize(
    "flags, rows_named",
    [([], ["words", "numbers", "degrees"]), (["--layers"], ["0", "1", "2"])],  # texts; states
)
def test_cartpole_readable_probes_each_variable(cartpole_policy, flags, rows_named):
    out = _run(
        "cartpole_readable.py", str(cartpole_policy), "--model", "tiny", "--states", "40", *flags
    )
    rows = {line.split()[0]: line.split()[1:] for line in out.splitlines()[2:]}
    assert list(rows) == rows_named  # --layers: the embeddings and after each of the 2 layers
    for cells in rows.values():
        values = [float(v) for v in cells if v != "/"]
        assert len(values) == 8 and all(v <= 1.0 for v in values)
