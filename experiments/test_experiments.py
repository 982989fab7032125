"""Smoke runs of the experiment scripts (tiny model, tiny budgets). Not part of `make test`
(pytest's testpaths are tests/ and llmgym/); run them with

    .venv/bin/python -m pytest -p no:cacheprovider experiments/test_experiments.py
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
EXPERIMENTS = ROOT / "experiments"


def _run(script: str, *args: str) -> str:
    env = dict(os.environ, OMP_NUM_THREADS="1")
    command = [sys.executable, str(EXPERIMENTS / script), *args]
    done = subprocess.run(command, capture_output=True, text=True, env=env, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


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
    script = [sys.executable, str(EXPERIMENTS / "sb3_curve.py"), "Blackjack-v1", "a2c"]
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


def test_lm_score_table_has_a_row_per_sum_and_a_column_per_dealer_card(tmp_path):
    from typer.testing import CliRunner

    from llmgym.cli import app

    run = tmp_path / "run"
    args = ["train", "Text-Blackjack-v1", "--model", "tiny", "--no-progress", "--steps", "16"]
    args += ["--output", str(run), "--episodes-per-update", "8", "--no-start-eval"]
    args += ["--final-eval-episodes", "2", "--set", "action_head=false", "--set", "eval_every=0"]
    args += ["--set", "eval_method=sampled"]
    assert CliRunner().invoke(app, args).exit_code == 0
    out = _run("lm_score_table.py", str(run), "--json", str(tmp_path / "table.json"))
    rows = out.splitlines()[1:]
    assert [int(r.split()[0]) for r in rows] == list(range(4, 22))
    assert all(len(r.split()) == 11 for r in rows)
    table = json.loads((tmp_path / "table.json").read_text())["hit_minus_stick"]
    assert [len(r) for r in table] == [10] * 18


def test_lm_exact_pg_steps_with_the_exact_gradient_and_maps_the_greedy_policy(tmp_path):
    """Two exact-gradient steps on the tiny model: the curve has a point per step, values are
    Blackjack returns, and the map has an action for every hard hand against every card."""
    out = tmp_path / "curve.json"
    args = ["--steps", "2", "--direction", "logits", "--json", str(out), "--set", "model=tiny"]
    args += ["--set", "minibatch_size=560", "--set", f"output_dir={tmp_path / 'run'}"]
    _run("lm_exact_pg.py", *args)
    record = json.loads(out.read_text())
    assert [p["step"] for p in record["curve"]] == [0, 1, 2]
    assert all(-1.0 <= p["greedy_exact"] <= 1.0 for p in record["curve"])
    hard = record["greedy_hard"]
    assert sorted(int(k) for k in hard) == list(range(4, 22))
    assert all(len(row) == 10 and set(row) <= {"H", "."} for row in hard.values())


def test_q_critic_tabular_fits_the_exact_q_values_and_runs_the_loop(tmp_path):
    """The tiny model's layer 1: R^2 for each policy and action, and a curve point per 5
    updates for each setting, every value a Blackjack return."""
    out = tmp_path / "loops.json"
    args = ["--model", "tiny", "--layer", "1", "--ridge", "1", "0", "--seeds", "1"]
    args += ["--updates", "5", "--episodes-per-update", "4", "--json", str(out)]
    _run("q_critic_tabular.py", *args)
    record = json.loads(out.read_text())
    assert sorted(record["representation_r2"]) == [
        "always_stick/hit",
        "always_stick/stick",
        "optimal/hit",
        "optimal/stick",
    ]
    assert [(loop["ridge"], len(loop["curves"][0])) for loop in record["loops"]] == [(1, 1), (0, 1)]
    assert all(-1.0 <= v <= 1.0 for loop in record["loops"] for v in loop["curves"][0])


def test_exact_eval_dtype_evaluates_a_policy_in_each_dtype(tmp_path):
    from llmgym.rl import make_trainer

    run = tmp_path / "run"
    make_trainer(
        "ppo", model="tiny", total_env_steps=16, episodes_per_update=8, eval_every=0,
        progress=False, num_threads=1, output_dir=str(run), **{"eval.start": False},
    ).train()  # fmt: skip
    out = _run("exact_eval_dtype.py", str(run))
    assert "float32: exact value" in out and "bfloat16: exact value" in out
    assert "greedy actions differ" in out


def test_format_demos_holds_each_state_once_with_each_action(tmp_path):
    out = tmp_path / "demos.jsonl"
    printed = _run("format_demos.py", "Text-Blackjack-v1", str(out), "--episodes", "20")
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    by_state: dict[str, list[str]] = {}
    for row in rows:
        state = row["messages"][1]["content"]
        by_state.setdefault(state, []).append(json.loads(row["messages"][2]["content"])["action"])
    assert all(sorted(actions) == ["hit", "stick"] for actions in by_state.values())
    assert f"{len(by_state)} states, {len(rows)} demos" in printed


def test_critic_greedy_evaluates_the_actor_and_the_critic_of_a_qac_run(tmp_path):
    from llmgym.rl import make_trainer

    run = tmp_path / "run"
    make_trainer(
        "qac", model="tiny", env_id="Text-FrozenLakeMaps4x4-Train-v0", num_envs=4,
        episodes_per_update=8, total_episodes=16, total_env_steps=10**6, action_head=False,
        head_layers=[1], lora_layers=1, q_window=4, eval_every=0, progress=False,
        num_threads=1, output_dir=str(run), eval_episodes=2,
        **{"eval.start": False, "eval.method": "sampled"},
    ).train(final_episodes=2)  # fmt: skip
    printed = _run("critic_greedy.py", str(run), "--env-kwarg", "map_set=heldout")
    assert f"{run}: update 2, 16 episodes" in printed
    assert "actor (the LM's greedy choice): exact value" in printed
    assert "critic (argmax Q): exact value" in printed and "'map_set': 'heldout'" in printed


def test_first_answers_counts_parsed_answers_greedy_and_sampled():
    out = _run("first_answers.py", "Text-Blackjack-v1", "--states", "4", "--model", "tiny")
    lines = out.strip().splitlines()
    assert [line.split(":")[0] for line in lines] == ["greedy", "sampled (temperature 1)"]
    assert all(" of 4 answers parse; " in line for line in lines)


def test_decode_rows_counts_decode_work_and_compares_row_subsets():
    out = _run("decode_rows.py", "tiny", "--rows", "8", "--workdir", "/tmp/llmgym-decode-rows-test")
    lines = out.strip().splitlines()
    assert lines[0].startswith("answer lengths (tokens: answers): {")
    answers, kept, decode = (int(w) for w in re.findall(r"\d+", lines[1])[:3])
    assert answers == 256 and 0 < kept <= decode <= 24 * answers
    assert [line.split(":")[0] for line in lines[2:]] == [
        "7 of 8 rows", "3 of 8 rows", "3 of 8 rows", "1 of 8 rows"
    ]  # fmt: skip
