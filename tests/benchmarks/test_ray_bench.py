"""``llmgym bench --ray``: a local Ray cluster gives exactly the serial episodes, resumes
without duplicates, reruns the cell of a worker that died, and the CLI runs on it."""

from __future__ import annotations

import dataclasses
import os
import sys
from pathlib import Path

import gymnasium as gym
import pytest
import typer
from typer.testing import CliRunner

import llmgym  # noqa: F401
from llmgym.bench.report import summarize
from llmgym.bench.runner import EXACT_FILE, load_rows, row_key, run_bench
from llmgym.cli.bench import register

ray = pytest.importorskip("ray", reason='ray is not installed: pip install "llmgym[ray]"')
from llmgym.bench.ray_runner import run_bench_ray  # noqa: E402

ENVS = ["Text-Blackjack-v1", "Text-FrozenLake-v1"]
AGENTS = ["random", "optimal"]


CRASH_SEED = 5


class CrashOnce(gym.Wrapper):
    """Text-FrozenLake-v1 whose process dies the first time it resets on ``CRASH_SEED``
    (a marker file, named by $CRASH_MARKER, remembers that it has)."""

    def __init__(self) -> None:
        super().__init__(gym.make("Text-FrozenLake-v1"))

    def reset(self, *, seed=None, options=None):
        marker = Path(os.environ["CRASH_MARKER"])
        if seed == CRASH_SEED and not marker.exists():
            marker.touch()
            os._exit(1)
        return self.env.reset(seed=seed, options=options)


def register_crash_once() -> None:
    """Register ``Text-CrashOnce-v0`` in every Ray worker as it starts (only workers make it:
    the driver's registry, which other tests list, stays as it was)."""
    gym.register("Text-CrashOnce-v0", entry_point=CrashOnce)


@pytest.fixture(scope="module")
def local_ray(tmp_path_factory):
    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])  # workers cannot import tests
    marker = tmp_path_factory.mktemp("crash") / "crashed"
    runtime_env = {
        "worker_process_setup_hook": register_crash_once,
        "env_vars": {"CRASH_MARKER": str(marker)},
    }
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, runtime_env=runtime_env)
    yield marker
    ray.shutdown()


def _episodes(rows):
    """Rows by (env, agent, seed), without the timing column."""
    return {row_key(r): {k: v for k, v in r.items() if k != "wall_s"} for r in rows}


def _stats(output):
    return [
        dataclasses.replace(s, steps_per_s=0.0) for s in summarize(load_rows(output), ENVS, AGENTS)
    ]


def test_ray_gives_the_serial_episodes_and_resumes_without_duplicates(tmp_path, local_ray):
    serial, on_ray = tmp_path / "serial", tmp_path / "ray"
    run_bench(ENVS, AGENTS, episodes=40, seed=3, output=serial, batch_size=16)
    first = run_bench_ray(
        ENVS, AGENTS, episodes=25, seed=3, output=on_ray, batch_size=3, chunk_size=7
    )
    rest = run_bench_ray(
        ENVS, AGENTS, episodes=40, seed=3, output=on_ray, batch_size=5, chunk_size=9
    )
    assert (len(first), len(rest)) == (100, 60)
    rows = load_rows(on_ray)
    assert len(rows) == len({row_key(r) for r in rows}) == 160
    assert _episodes(rows) == _episodes(load_rows(serial))
    assert _stats(on_ray) == _stats(serial)
    assert load_rows(on_ray, EXACT_FILE) and sorted(
        load_rows(on_ray, EXACT_FILE), key=str
    ) == sorted(load_rows(serial, EXACT_FILE), key=str)
    assert run_bench_ray(ENVS, AGENTS, episodes=40, seed=3, output=on_ray) == []
    assert len(load_rows(on_ray)) == 160


def test_a_dead_workers_cell_is_rerun_and_counted_once(tmp_path, local_ray):
    rows = run_bench_ray(
        ["Text-CrashOnce-v0"], ["random"], episodes=12, output=tmp_path, batch_size=2, chunk_size=4
    )
    assert local_ray.exists()  # a worker did die
    assert sorted(r["seed"] for r in load_rows(tmp_path)) == list(range(12))
    serial = run_bench(["Text-FrozenLake-v1"], ["random"], episodes=12, output=tmp_path / "s")
    assert {k[2]: v["return"] for k, v in _episodes(rows).items()} == {
        k[2]: v["return"] for k, v in _episodes(serial).items()
    }


def test_cli_bench_on_ray_writes_the_leaderboard_and_skips_what_cannot_play(tmp_path, local_ray):
    app = typer.Typer()
    register(app)
    args = ["bench", "--envs", "Text-Pendulum-v1", "--episodes", "2"]
    args += ["--agents", "optimal,sb3-dqn", "--output", str(tmp_path), "--ray"]  # no address
    result = CliRunner().invoke(app, [*args, "--batch-size", "1"])
    assert result.exit_code == 0, result.output
    assert "skip sb3-dqn on Text-Pendulum-v1: DQN needs discrete actions" in result.output
    assert "| Text-Pendulum-v1 | optimal | 2 |" in result.output
    assert len(load_rows(tmp_path)) == 2


@pytest.mark.parametrize(
    ("ray_args", "address"),
    [
        (["--ray"], None),  # bare, last: ray.init() here
        (["--ray", "--batch-size", "4"], None),  # bare, before another option
        (["--ray", "local"], None),
        (["--ray=local"], None),
        (["--ray", "auto"], "auto"),
        (["--ray", "HEAD:6379", "--batch-size", "4"], "HEAD:6379"),
    ],
)
def test_cli_ray_address_is_optional(tmp_path, monkeypatch, ray_args, address):
    import llmgym.bench.ray_runner as ray_runner

    calls = []
    monkeypatch.setattr(ray_runner, "run_bench_ray", lambda *a, **kw: calls.append(kw) or [])
    app = typer.Typer()
    register(app)
    args = ["bench", "--envs", "Text-Blackjack-v1", "--agents", "random", "--episodes", "1"]
    result = CliRunner().invoke(app, [*args, "--output", str(tmp_path), *ray_args])
    assert result.exit_code == 0, result.output
    assert [kw["address"] for kw in calls] == [address]
