"""The bench: rows per episode, the leaderboard, resuming without redoing finished work."""

from __future__ import annotations

import json
import sys

import pytest
import typer
from typer.testing import CliRunner

import llmgym  # noqa: F401
from llmgym.bench.costs import SB3_RECORDS, TrainingCost, training_cost
from llmgym.bench.report import bootstrap_ci, summarize
from llmgym.bench.runner import load_rows, run_bench
from llmgym.cli.bench import register

TINY = ["Text-CliffWalking-v1", "Text-FrozenLake-v1"]


def _app() -> typer.Typer:
    app = typer.Typer()
    register(app)
    return app


def test_rows_table_and_rerun_skips_finished_cells(tmp_path):
    rows = run_bench(TINY, ["random", "optimal"], episodes=3, seed=10, output=tmp_path)
    assert len(rows) == 12
    assert {r["seed"] for r in rows} == {10, 11, 12}
    assert set(rows[0]) >= {"env_id", "agent", "seed", "return", "length", "parse_rate", "wall_s"}
    assert run_bench(TINY, ["random", "optimal"], episodes=3, seed=10, output=tmp_path) == []
    more = run_bench(TINY, ["random", "optimal"], episodes=4, seed=10, output=tmp_path)
    assert sorted((r["env_id"], r["agent"], r["seed"]) for r in more) == sorted(
        (e, a, 13) for e in TINY for a in ("random", "optimal")
    )
    stats = summarize(load_rows(tmp_path), TINY, ["random", "optimal"])
    assert [(s.env_id, s.agent, s.episodes) for s in stats] == [
        (e, a, 4) for e in TINY for a in ("random", "optimal")
    ]


def test_interrupted_run_resumes_where_it_stopped(tmp_path):
    seen = []

    def interrupt(row):
        seen.append(row)
        if len(seen) == 5:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run_bench(
            ["Text-FrozenLake-v1"],
            ["random"],
            episodes=8,
            output=tmp_path,
            batch_size=4,
            on_episode=interrupt,
        )
    assert len(load_rows(tmp_path)) == 5
    resumed = run_bench(["Text-FrozenLake-v1"], ["random"], episodes=8, output=tmp_path)
    assert len(resumed) == 3
    assert sorted(r["seed"] for r in load_rows(tmp_path)) == list(range(8))


def test_every_agent_sees_the_same_episodes(tmp_path):
    rows = run_bench(["Text-CartPole-v1"], ["random", "optimal"], episodes=2, output=tmp_path)
    by_agent = {
        a: sorted(r["seed"] for r in rows if r["agent"] == a) for a in ("random", "optimal")
    }
    assert by_agent["random"] == by_agent["optimal"] == [0, 1]


def test_normalized_score_and_ci():
    rows = [
        {
            "env_id": "E",
            "agent": a,
            "seed": s,
            "return": r + s % 2,
            "length": 2,
            "parse_rate": 0.5,
            "wall_s": 0.5,
        }
        for a, r in [("random", -10.0), ("optimal", 10.0), ("sb3-ppo", 0.0)]
        for s in range(10)
    ]
    stats = {s.agent: s for s in summarize(rows, ["E"], ["random", "optimal", "sb3-ppo"])}
    assert stats["random"].normalized == 0.0 and stats["optimal"].normalized == 1.0
    assert stats["sb3-ppo"].normalized == pytest.approx(0.5)
    assert stats["sb3-ppo"].parse_rate == 0.5 and stats["sb3-ppo"].steps_per_s == 4.0
    low, high = bootstrap_ci([r["return"] for r in rows if r["agent"] == "sb3-ppo"])
    assert low <= stats["sb3-ppo"].mean <= high


def test_cli_bench_writes_leaderboard_and_resumes(tmp_path):
    args = [
        "bench",
        "--envs",
        "Text-CliffWalking-v1",
        "--agents",
        "random,optimal",
        "--episodes",
        "2",
        "--output",
        str(tmp_path),
    ]
    result = CliRunner().invoke(_app(), args)
    assert result.exit_code == 0, result.output
    # no terminal here, so progress comes as lines: a cell's start and its last episode
    assert "Text-CliffWalking-v1 optimal: 2 episodes to play" in result.output
    assert "Text-CliffWalking-v1 optimal: 2/2 episodes, last return -13.0" in result.output
    table = (tmp_path / "leaderboard.md").read_text()
    assert "| Text-CliffWalking-v1 | optimal | 2 | -13.0 |" in table
    assert (tmp_path / "leaderboard.png").stat().st_size > 0
    assert (tmp_path / "leaderboard_cost.png").stat().st_size > 0
    assert "| exact | trained on (env steps) |" in table
    lines = (tmp_path / "episodes.jsonl").read_text().splitlines()
    assert len(lines) == 4 and json.loads(lines[0])["agent"] == "random"
    assert CliRunner().invoke(_app(), args).exit_code == 0
    assert len((tmp_path / "episodes.jsonl").read_text().splitlines()) == 4


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["bench", "--agents", "oracle"], "Unknown agent 'oracle'"),
        (["bench", "--suite", "nope"], "Unknown suite 'nope'"),
        (["bench", "--envs", "Text-Nope-v0"], "Unknown environment 'Text-Nope-v0'"),
        (["bench", "--agents", "random,,random"], "has an empty name (a comma too many)"),
        (["bench", "--agents", "random,"], "has an empty name (a comma too many)"),
        (["bench", "--agents", "random,random"], "names 'random' twice; name each agent once."),
        (["bench", "--agents", "llm:m,mode=generate,llm:m, mode=generate"], "twice"),
        (["baselines", "train", "CartPole-v1", "--algo", "sac"], "Unknown algorithm 'sac'"),
    ],
)
def test_cli_user_errors(tmp_path, args, message):
    result = CliRunner().invoke(
        _app(), [*args, *(["--output", str(tmp_path)] if args[0] == "bench" else [])]
    )
    assert result.exit_code == 2
    assert message in result.output
    assert "Traceback" not in result.output


def _leaderboard(output, args):
    """The leaderboard ``llmgym bench ARGS --output OUTPUT`` writes, by (env, agent): its
    episodes, mean return and CI (not the timings)."""
    result = CliRunner().invoke(_app(), ["bench", *args, "--output", str(output)])
    assert result.exit_code == 0, result.output
    lines = (output / "leaderboard.md").read_text().splitlines()
    cells = [line.strip("| ").split(" | ") for line in lines if line.startswith("| Text-")]
    return {(c[0], c[1]): (c[2], c[3], c[4]) for c in cells}


def test_a_rerun_into_a_folder_of_another_bench_is_refused_unless_fresh(tmp_path):
    """Issue 52: a rerun into one folder with another --seed or other --episodes is refused
    before anything is played (rows unchanged); the same bench resumes, other agents on the
    same seeds join it, and --fresh starts the folder over."""
    bench = ["--envs", "Text-FrozenLake-v1", "--agents", "random,optimal"]
    _leaderboard(tmp_path, [*bench, "--episodes", "6"])
    rows = (tmp_path / "episodes.jsonl").read_bytes()
    for rerun in (["--seed", "3", "--episodes", "6"], ["--episodes", "2"], ["--episodes", "8"]):
        result = CliRunner().invoke(_app(), ["bench", *bench, *rerun, "--output", str(tmp_path)])
        assert result.exit_code == 2
        assert "holds another bench" in result.output
        assert "pass another --output or --fresh" in result.output
        assert (tmp_path / "episodes.jsonl").read_bytes() == rows
    _leaderboard(tmp_path, [*bench, "--episodes", "6"])
    _leaderboard(
        tmp_path, ["--envs", "Text-FrozenLake-v1", "--agents", "llm:tiny", "--episodes", "6"]
    )
    fresh = _leaderboard(tmp_path, [*bench, "--episodes", "2", "--fresh"])
    assert fresh[("Text-FrozenLake-v1", "random")][0] == "2"
    assert len(load_rows(tmp_path)) == 2 * 2


def test_a_folder_without_bench_json_is_judged_by_its_rows(tmp_path):
    run_bench(["Text-FrozenLake-v1"], ["random"], episodes=6, output=tmp_path)
    args = ["bench", "--envs", "Text-FrozenLake-v1", "--agents", "random", "--episodes", "2"]
    result = CliRunner().invoke(_app(), [*args, "--output", str(tmp_path)])
    assert result.exit_code == 2 and "holds another bench" in result.output


def test_cli_bench_ray_without_ray_says_how_to_install_it(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)
    args = ["bench", "--envs", "Text-CliffWalking-v1", "--output", str(tmp_path), "--ray", "local"]
    result = CliRunner().invoke(_app(), args)
    assert result.exit_code == 2
    assert 'ray is not installed: pip install "llmgym[ray]".' in result.output


def test_bench_modules_stay_light():
    import subprocess

    code = (
        "import sys, llmgym.cli.bench, llmgym.bench.runner, llmgym.bench.report,"
        " llmgym.bench.ray_runner; heavy = ('torch', 'stable_baselines3', 'matplotlib', 'ray');"
        "print(sorted(m for m in heavy if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_episodes_do_not_depend_on_how_the_seeds_are_batched(tmp_path):
    def episodes(batch_size):
        rows = run_bench(
            ["Text-FrozenLake-v1"],
            ["random"],
            episodes=12,
            output=tmp_path / str(batch_size),
            batch_size=batch_size,
        )
        return sorted((r["seed"], r["return"], r["length"]) for r in rows)

    assert episodes(1) == episodes(5) == episodes(12)


def test_training_cost_of_each_kind_of_agent(tmp_path):
    sb3 = [{"env_id": "Blackjack-v1", "algo": "dqn", "timesteps": 50000, "train_seconds": 334.1}]
    (tmp_path / SB3_RECORDS).write_text(json.dumps(sb3))
    run = tmp_path / "run"
    run.mkdir()
    (run / "result.json").write_text(json.dumps({"env_steps": 2906, "wall_s": 600.0}))
    policy = tmp_path / "policy"
    policy.mkdir()
    (policy / "trainer_state.json").write_text(json.dumps({"env_steps": 21193}))

    def cost(agent):
        return training_cost(agent, "Text-Blackjack-v1", tmp_path)

    assert cost("sb3-dqn") == TrainingCost(50000, 334.1)
    assert cost("optimal") == cost("llm:smollm2-135m") == TrainingCost(0, 0.0)
    assert cost(f"llm:smollm2-135m@{run},mode=generate") == TrainingCost(2906, 600.0)
    assert cost(f"llm:smollm2-135m@{policy}") == TrainingCost(21193, None)
    assert cost(f"llm:smollm2-135m@{tmp_path / 'missing'}") is None


def test_llm_agents_play_greedily_and_score_each_distinct_prompt_once(tmp_path, monkeypatch):
    """The bench's LLM agents act greedily (``greedy=false`` opts out) and memoise candidate
    scores per prompt: FrozenLake's 16 cells cost at most 16 scored prompts however many
    steps the episodes take."""
    pytest.importorskip("torch")
    from llmgym.bench.runner import bench_agent
    from llmgym.policy import LLMPolicy, models
    from llmgym.policy.testing import tiny_model

    monkeypatch.setattr(models, "load_model", lambda *args, **kwargs: tiny_model(0))
    agent = bench_agent("llm:tiny", "Text-FrozenLake-v1", 0)
    assert agent.policy.config.greedy and agent.policy.memoize
    assert not bench_agent("llm:tiny,greedy=false", "Text-FrozenLake-v1", 0).policy.config.greedy
    scored: list[int] = []
    forward = LLMPolicy._forward_features

    def counting(self, prompts, *args):
        scored.append(len(prompts))
        return forward(self, prompts, *args)

    monkeypatch.setattr(LLMPolicy, "_forward_features", counting)
    rows = run_bench(["Text-FrozenLake-v1"], ["llm:tiny"], episodes=4, output=tmp_path / "a")
    steps = sum(r["length"] for r in rows)
    assert sum(scored) <= 16 < steps  # the exact evaluation's states included


def test_two_bench_runs_on_one_folder_record_each_episode_once(tmp_path):
    """Two processes playing the same cell into one folder (a second run started by mistake):
    each writes under a lock after reading what the other appended, so every (env, agent,
    seed) is recorded once; exact rows likewise."""
    import subprocess

    code = (
        "import sys; from pathlib import Path; from llmgym.bench.runner import run_bench; "
        "run_bench(['Text-FrozenLake-v1'], ['random', 'optimal'], episodes=40, "
        "output=Path(sys.argv[1]), batch_size=2)"
    )
    runs = [
        subprocess.Popen([sys.executable, "-c", code, str(tmp_path)], stderr=subprocess.PIPE)
        for _ in range(2)
    ]
    for run in runs:
        assert run.wait(timeout=300) == 0, run.stderr.read().decode()[-2000:]
    rows = load_rows(tmp_path)
    keys = [(r["agent"], r["seed"]) for r in rows]
    assert len(keys) == len(set(keys)) == 80
    exact = load_rows(tmp_path, "exact.jsonl")
    assert [r["agent"] for r in exact] == ["optimal"]


def test_greedy_generate_mode_answers_each_distinct_prompt_once(tmp_path, monkeypatch):
    """Generate mode in the bench is greedy and memoised too: a prompt seen again (a state
    revisited, another episode from the same start) is not generated again, so the grid
    cells' 30 episodes cost one generation per distinct state."""
    pytest.importorskip("torch")
    from llmgym.bench.runner import bench_agent
    from llmgym.policy import models
    from llmgym.policy.testing import tiny_model

    monkeypatch.setattr(models, "load_model", lambda *args, **kwargs: tiny_model(0))
    agent = bench_agent("llm:tiny,mode=generate,max_new_tokens=4", "Text-CliffWalking-v1", 0)
    assert agent.policy.config.greedy and agent.policy.memoize
    generated: list[tuple[int, ...]] = []
    generate = agent.policy.backend.generate

    def counting(prompts, *args):
        generated.extend(tuple(p) for p in prompts)
        return generate(prompts, *args)

    monkeypatch.setattr(agent.policy.backend, "generate", counting)
    monkeypatch.setattr("llmgym.bench.runner.bench_agent", lambda *args: agent)
    name = "llm:tiny,mode=generate,max_new_tokens=4"
    rows = run_bench(["Text-CliffWalking-v1"], [name], episodes=3, output=tmp_path)
    assert len(generated) == len(set(generated)) <= 48  # CliffWalking has 48 cells
    assert sum(r["length"] for r in rows) > len(generated)


def test_cli_bench_default_output_is_outside_the_committed_results(tmp_path, monkeypatch):
    """Without --output the rows go to runs/bench (git-ignored), never into
    benchmarks/results/; the "Made by" line is the command run: --envs, not the suite."""
    monkeypatch.chdir(tmp_path)
    args = ["bench", "--envs", "Text-CliffWalking-v1", "--agents", "optimal", "--episodes", "1"]
    result = CliRunner().invoke(_app(), args)
    assert result.exit_code == 0, result.output
    assert not (tmp_path / "benchmarks").exists()
    made_by = (tmp_path / "runs" / "bench" / "leaderboard.md").read_text().splitlines()[2]
    assert made_by == (
        "Made by `llmgym bench --envs Text-CliffWalking-v1 --agents optimal --seed 0 "
        "--episodes 1 --output runs/bench`."
    )


def test_bench_help_shows_how_to_add_a_trained_policy():
    result = CliRunner().invoke(_app(), ["bench", "--help"], terminal_width=100)
    assert result.exit_code == 0
    assert "llm:MODEL@RUN_DIR" in result.output
    assert "--agents random,llm:smollm2-135m@RUN_DIR" in result.output


def test_committed_scripts_name_their_bench_output():
    """The scripts that write the committed leaderboard pass --output (the default is
    runs/bench, outside the committed results)."""
    from pathlib import Path

    bench = Path(__file__).resolve().parents[2] / "benchmarks"
    for script in ["classic_leaderboard.sh", "classic_leaderboard_gpu.sh"]:
        text = (bench / script).read_text()
        calls = [line for line in text.splitlines() if "llmgym bench" in line]
        assert calls and all("--output" in line for line in calls), script


def test_the_leaderboard_chart_shows_every_cell_and_keeps_its_title(tmp_path, monkeypatch):
    """Random's normalized score is 0 by definition: its cells are drawn as markers, not
    only as bars of height 0; the chart is saved with a tight box, so neither the title nor
    the legend (under the axes) is cut off."""
    pytest.importorskip("matplotlib")
    from llmgym.bench import charts, report

    rows = [
        {"env_id": e, "agent": a, "seed": s, "return": r, "length": 1, "parse_rate": 1.0,
         "wall_s": 0.001}
        for e in ["Text-A-v0", "Text-B-v0"]
        for a, r in [("random", 0.0), ("optimal", 1.0)]
        for s in range(3)
    ]  # fmt: skip
    stats = summarize(rows, ["Text-A-v0", "Text-B-v0"], ["random", "optimal"])
    saved = {}
    monkeypatch.setattr(charts, "_save", lambda fig, path, **kw: saved.update(fig=fig, **kw))
    report.plot(stats, tmp_path / "chart.png")
    fig = saved["fig"]
    assert saved["bbox_inches"] == "tight"
    ax = fig.axes[0]
    dots = [line for line in ax.get_lines() if line.get_marker() == "o"]
    random_dots = [d for d in dots if list(d.get_ydata()) == [0.0, 0.0]]
    assert random_dots, "random's cells are not marked"
    assert "random" in [t.get_text() for t in ax.get_legend().get_texts()]
    renderer = fig.canvas.get_renderer()
    box = fig.get_tightbbox(renderer)
    title = ax.title.get_window_extent(renderer).transformed(fig.dpi_scale_trans.inverted())
    assert box.x0 <= title.x0 and title.x1 <= box.x1
