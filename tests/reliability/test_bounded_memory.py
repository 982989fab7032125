"""Issue 37, item 1: memory follows the episodes played, never the count asked for; counts
above 10^9 episodes or 10^12 timesteps are refused with one sentence and exit code 2."""

from __future__ import annotations

import itertools
import sys
import tracemalloc
import types

import gymnasium as gym
import pytest
from typer.testing import CliRunner

import llmgym  # noqa: F401
from llmgym.agents.evaluate import evaluate as evaluate_agent
from llmgym.bench import ray_runner
from llmgym.bench.runner import PendingSeeds, pending_seeds, run_bench
from llmgym.cli import app
from llmgym.errors import ConfigError
from llmgym.evaluation.evaluator import evaluate
from llmgym.rollout import MAX_EPISODES, play

HUGE = "100000000000000000000"


class Stop(Exception):
    """Ends a run that asked for more episodes than a test plays."""


@pytest.mark.parametrize(
    "args",
    [
        ["bench", "--envs", "Text-CartPole-v1", "--agents", "random", "--episodes", HUGE],
        ["bench", "--envs", "Text-CartPole-v1", "--agents", "random", "--episodes", "1000000001"],
        ["eval", "Text-CartPole-v1", "--agent", "random", "--episodes", HUGE, "--no-progress"],
        ["play", "Text-CartPole-v1", "--episodes", HUGE],
        ["eval", "Text-CartPole-v1", "--agent", "random", "--num-envs", HUGE, "--no-progress"],
        ["bench", "--envs", "Text-CartPole-v1", "--agents", "random", "--batch-size", HUGE],
        ["baselines", "train", "CartPole-v1", "--timesteps", HUGE],
        ["baselines", "train", "CartPole-v1", "--timesteps", "1000000000001"],
    ],
)
def test_huge_counts_are_refused_in_one_sentence(args, tmp_path):
    if args[0] == "bench":
        args = [*args, "--output", str(tmp_path / "b")]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 2, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)
    assert "Traceback" not in result.output and len(result.output.strip().splitlines()) == 1
    assert "above the limit" in result.output
    assert not (tmp_path / "b" / "episodes.jsonl").exists()


def test_the_library_refuses_them_too(tmp_path):
    with pytest.raises(ConfigError, match="above the limit"):
        run_bench(["Text-CartPole-v1"], ["random"], episodes=MAX_EPISODES + 1, output=tmp_path)
    with pytest.raises(ConfigError, match="above the limit"):
        evaluate_agent("Text-CartPole-v1", "random", episodes=MAX_EPISODES + 1, progress=False)


def test_pending_seeds_are_lazy():
    done = {("E", "a", 3), ("E", "a", 10**9 + 5), ("F", "a", 4)}
    tracemalloc.start()
    todo = pending_seeds(["E", "F"], ["a"], MAX_EPISODES, 0, done)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 100_000  # a list of 10^9 seeds would be gigabytes
    assert isinstance(todo["E", "a"], PendingSeeds)
    assert len(todo["E", "a"]) == MAX_EPISODES - 1
    assert list(itertools.islice(todo["E", "a"], 4)) == [0, 1, 2, 4]


def _drawn(seeds, record):
    for s in seeds:
        record.append(s)
        yield s


def test_play_and_evaluate_read_seeds_as_envs_free_up():
    envs = [gym.make("Text-CliffWalking-v1") for _ in range(3)]
    drawn: list[int] = []
    ended: list[int] = []

    def up(observations, infos):
        assert len(drawn) <= len(ended) + len(envs)  # never reads ahead of the free envs
        return ['{"action": "UP"}'] * len(observations)

    def on_end(_slot, episode):
        ended.append(episode.seed)
        if len(ended) == 10:
            raise Stop  # a count of 10^18 would never end: stop it here

    for batch_size in (None, 2):
        drawn.clear(), ended.clear()
        with pytest.raises(Stop):
            evaluate(
                up,
                envs,
                _drawn(itertools.count(), drawn),
                max_steps=2,
                on_end=on_end,
                batch_size=batch_size,
            )
        assert len(drawn) <= 10 + len(envs)
    assert play(up, envs, _drawn(range(5), []), max_steps=1, keep=False) == []


def _peak(run) -> int:
    tracemalloc.start()
    try:
        run()
    except Stop:
        pass
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return peak


def test_eval_memory_does_not_follow_the_count_asked_for():
    class Stopper:
        """A random-like agent that stops the evaluation after 40 episodes."""

        def __init__(self):
            self.ended = 0

        def act_batch(self, observations, infos):
            return ['{"action": 0}'] * len(observations)

        def reset(self, indices=None):
            if indices is not None:
                self.ended += len(indices)
                if self.ended >= 40:
                    raise Stop

    def run(episodes):
        return lambda: evaluate_agent(
            "Text-CartPole-v1", Stopper(), episodes=episodes, num_envs=4, progress=False
        )

    small, huge = _peak(run(40)), _peak(run(MAX_EPISODES))
    assert huge < 2 * small + 500_000, (small, huge)


def test_bench_memory_does_not_follow_the_count_asked_for(tmp_path):
    def run(episodes, out):
        def stop(row):
            if row["seed"] >= 39:
                raise Stop

        return lambda: run_bench(
            ["Text-CliffWalking-v1"],
            ["random"],
            episodes=episodes,
            output=tmp_path / out,
            batch_size=8,
            on_episode=stop,
            keep_rows=False,
        )

    small, huge = _peak(run(40, "s")), _peak(run(MAX_EPISODES, "h"))
    assert huge < 2 * small + 500_000, (small, huge)


class _Ref:
    def __init__(self, fn, args):
        self.fn, self.args = fn, args


class _FakeRay(types.ModuleType):
    """Ray's calls that run_bench_ray makes, run in process; counts tasks in flight."""

    class exceptions:  # noqa: N801
        RayError = RuntimeError
        RayTaskError = RuntimeError

    def __init__(self):
        super().__init__("ray")
        self.in_flight = self.most = 0

    def is_initialized(self):
        return True

    def remote(self, **_options):
        def wrap(fn):
            def submit(*args):
                self.in_flight += 1
                self.most = max(self.most, self.in_flight)
                return _Ref(fn, args)

            return types.SimpleNamespace(remote=submit)

        return wrap

    def wait(self, refs, num_returns):
        return refs[:num_returns], refs[num_returns:]

    def get(self, ref):
        self.in_flight -= 1
        return ref.fn(*ref.args)

    def cancel(self, ref, force=False):
        pass


def test_ray_bench_keeps_few_tasks_in_flight(tmp_path, monkeypatch):
    fake = _FakeRay()
    monkeypatch.setitem(sys.modules, "ray", fake)
    monkeypatch.setattr(ray_runner, "MAX_IN_FLIGHT", 4)
    rows = []

    def stop(row):
        rows.append(row)
        if len(rows) >= 30:
            raise Stop

    with pytest.raises(Stop):
        ray_runner.run_bench_ray(
            ["Text-CliffWalking-v1"],
            ["random"],
            episodes=MAX_EPISODES,
            output=tmp_path,
            batch_size=2,
            on_episode=stop,
            keep_rows=False,
        )
    assert fake.most <= 4
    assert len({r["seed"] for r in rows}) == 30


def test_eval_without_output_keeps_no_returns():
    result = evaluate_agent(
        "Text-CliffWalking-v1", "random", episodes=6, num_envs=2, progress=False, keep_returns=False
    )
    assert result["returns"] == [] and result["episodes"] == 6
    kept = evaluate_agent("Text-CliffWalking-v1", "random", episodes=6, num_envs=2, progress=False)
    same = ("mean_return", "env_steps", "parse_rate", "mean_length")
    assert {k: result[k] for k in same} == pytest.approx({k: kept[k] for k in same})
    assert result["ci95"] == pytest.approx(kept["ci95"]) and len(kept["returns"]) == 6
