"""Smoke runs of the benchmark scripts (tiny model, tiny budgets): each writes its JSON with
the expected keys and sane values. No wall-clock assertions."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from pathlib import Path

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


@pytest.mark.heavy  # ~17 s: every variant trains (make test-heavy, CI)
def test_sample_efficiency_sweep_records_every_variant_and_adds_the_chosen_one(tmp_path):
    sweep = tmp_path / "sweep.json"
    env = "Text-FrozenLake-v1"
    common = ["--quick", "--envs", env, "--seeds", "0", "1"]
    out = _run(
        "sample_efficiency.py", "--sweep", *common, "--variants", "1", "--output", str(sweep)
    )
    assert "Selection:" in out
    report = json.loads(sweep.read_text())
    assert report["command"].startswith("python benchmarks/sample_efficiency.py --sweep")
    assert {"machine", "selection", "settings", "grid", "results", "chosen", "table"} <= set(report)
    for algo in ("ppo", "dqn"):
        rows = report["results"][env][algo]
        assert [r["variant"] for r in rows][0] == "catalog" and len(rows) == 2
        assert [r["chosen"] for r in rows].count(True) == 1
        assert report["chosen"][env][algo] == next(r["variant"] for r in rows if r["chosen"])
        for r in rows:
            assert r["seeds"] == [0, 1] and len(r["steps_to_target"]) == len(r["final"]) == 2
            assert 0 <= r["mean_steps"] <= 600  # the quick budget
    assert len(report["curves"]) == 2 * 2 * 2  # algos x (catalog + 1 variant) x seeds
    variant = report["curves"][-1]["meta"]
    assert variant["overrides"] == report["grid"][env]["dqn"][0]
    assert all(variant["recipe"]["hyperparams"][k] == v for k, v in variant["overrides"].items())

    # --chosen-from reruns only the chosen variant (beside the catalog recipe), on other seeds.
    held = tmp_path / "held.json"
    _run(
        "sample_efficiency.py",
        "--sweep",
        "--quick",
        "--envs",
        env,
        "--seeds",
        "2",
        "--chosen-from",
        str(sweep),
        "--output",
        str(held),
    )
    for algo, rows in json.loads(held.read_text())["results"][env].items():
        chosen = report["chosen"][env][algo]
        assert [r["variant"] for r in rows] == ["catalog", chosen][: 1 + (chosen != "catalog")]
        assert all(r["seeds"] == [2] for r in rows)

    # The chosen variants join the catalog recipe's curves as sb3-ALGO-tuned, once.
    se = tmp_path / "se.json"
    _run("sample_efficiency.py", *common, "--tuned-from", str(sweep), "--output", str(se))
    again = tmp_path / "again.json"
    _run(
        "sample_efficiency.py",
        "--envs",
        env,
        "--sb3-from",
        str(se),
        "--tuned-from",
        str(sweep),
        "--output",
        str(again),
    )
    for path in (se, again):
        curves = json.loads(path.read_text())["curves"]
        agents = sorted(c["agent"] for c in curves)
        assert agents == sorted(["sb3-ppo", "sb3-dqn", "sb3-ppo-tuned", "sb3-dqn-tuned"] * 2)
        for c in curves:
            if c["agent"].endswith("-tuned"):
                algo = c["agent"].split("-")[1]
                assert c["meta"]["variant"] == report["chosen"][env][algo]
                same = [
                    s
                    for s in report["curves"]
                    if s["meta"]["variant"] == c["meta"]["variant"]
                    and s["seed"] == c["seed"]
                    and s["agent"] == f"sb3-{algo}"
                ]
                assert [s["values"] for s in same] == [c["values"]]


@pytest.mark.heavy
def test_train_throughput_measures_this_tree_in_place_in_another_dtype(tmp_path):
    """``--commits here`` with ``--dtype``: the GPU machine's way of running issue 51's config
    (its tree has no git history to make worktrees from), here on the CPU in bfloat16."""
    out = tmp_path / "tt.json"
    printed = _run(
        "train_throughput.py", "--commits", "here", "--models", "tiny", "--modes", "score",
        "--iterations", "2", "--dtype", "bfloat16", "--output", str(out),
        "--workdir", str(tmp_path / "runs"),
    )  # fmt: skip
    report = json.loads(out.read_text())
    assert report["gemm_dtype"] == "bfloat16" and report["gemm_peak_gflop_per_s"] > 0
    (row,) = report["results"]
    assert row["commit"] == "here" and row["llmgym_file"].startswith(str(ROOT))
    assert row["settings"]["passed"] and row["summary"]["env_steps"] > 0
    assert "bfloat16 GEMM peak" in printed and "| tiny | score | here (" in report["table"]


@pytest.mark.heavy  # ~25 s: every configuration trains (make test-heavy, CI)
def test_train_throughput_quick_writes_every_configuration(tmp_path):
    out = tmp_path / "tt.json"
    _run(
        "train_throughput_configs.py",
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


SCRIPTS = sorted(p for p in BENCH.iterdir() if p.suffix in (".py", ".sh"))


@pytest.mark.parametrize("script", SCRIPTS, ids=[p.name for p in SCRIPTS])
def test_each_benchmark_script_answers_help_and_has_its_line_in_the_index(script):
    command = [sys.executable, str(script)] if script.suffix == ".py" else ["bash", str(script)]
    done = subprocess.run([*command, "--help"], capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.startswith("usage:")
    index = (BENCH / "README.md").read_text()
    assert f"| `{script.name}` |" in index, f"{script.name} has no line in benchmarks/README.md"


def test_maps_sb3_trains_on_train_maps_and_scores_the_held_out_ones(tmp_path):
    """benchmarks/maps_sb3.py: a curve of held-out and train success, resumed not rerun."""
    pytest.importorskip("stable_baselines3")
    out = tmp_path / "maps_sb3.json"
    args = ["--timesteps", "2048", "--eval-every", "2048", "--output", str(out)]
    _run("maps_sb3.py", *args)
    run = json.loads(out.read_text())["runs"][0]
    assert run["size"] == 4 and run["seed"] == 0 and run["episodes"] > 0
    assert 0.0 <= run["heldout_success"] <= 1.0 and 0.0 <= run["train_success"] <= 1.0
    assert run["curve"][-1]["heldout"] == run["heldout_success"]
    assert "| 4x4 | 2,048 |" in _run("maps_sb3.py", *args)  # resumed: the table, no new run
    assert len(json.loads(out.read_text())["runs"]) == 1


def test_maps_curve_gathers_a_runs_held_out_points_and_plots_them(tmp_path):
    """benchmarks/maps_curve.py: a run folder's evaluation points (the start one at 0
    episodes), its progress, the map-blind reference computed exactly, a table and a plot."""
    pytest.importorskip("matplotlib")
    from llmgym.rl import config_class

    run = tmp_path / "maps-head-unrecorded"  # no record of that name: not finished
    run.mkdir()
    config = config_class("ppo").build(
        {
            "seed": 0,
            "run.recipe": "frozenlake-maps-head",
            "run.total_episodes": 10000,
            "policy.action_head": True,
            "optim.train_backbone": False,
        }
    )
    (run / "run.json").write_text(json.dumps({"config": config.to_dict(), "algo": "ppo"}))
    rows = [
        {"iteration": "", "episodes": "", "env_steps": 0, "eval/mean_return": 0.0},
        {"iteration": 1, "episodes": 40, "env_steps": 900, "eval/mean_return": ""},
        {"iteration": 2, "episodes": 80, "env_steps": 1500, "eval/mean_return": 0.27},
    ]
    with (run / "metrics.csv").open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    out, png = tmp_path / "curve.json", tmp_path / "curve.png"
    table = _run("maps_curve.py", "--collect", str(run), "--output", str(out), "--plot", str(png))
    entry = json.loads(out.read_text())["runs"]["maps-head-unrecorded"]
    assert entry["policy"] == "head" and entry["backbone"] == "pretrained"
    assert (entry["episodes"], entry["updates"], entry["finished"]) == (80, 2, False)
    assert entry["points"] == [
        {"episodes": 0, "env_steps": 0, "heldout": 0.0},
        {"episodes": 80, "env_steps": 1500, "heldout": 0.27},
    ]
    blind = json.loads(out.read_text())["map_blind"]
    assert blind["value"] == pytest.approx(0.33) and sorted(blind["path"]) == list("DDDRRR")
    row = "| a head on the frozen LM, seed 0 | `frozenlake-maps-head` | 0: 0.00, 80: 0.27 |"
    assert row in table
    assert png.read_bytes().startswith(b"\x89PNG")
    done = subprocess.run(
        [sys.executable, str(BENCH / "maps_curve.py"), "--collect", str(tmp_path)],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert done.returncode == 2 and "not a training run's folder" in done.stdout
