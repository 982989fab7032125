"""``llmgym bench --env-kwarg KEY=VALUE`` (issue 53): every env of the bench is made with the
options, the rows and ``bench.json`` record them, another set of options counts as another
bench, and the leaderboard labels the envs with them."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

import llmgym  # noqa: F401  (registers the Text-* ids)
from llmgym.bench.ray_runner import exact_chunk, play_chunk
from llmgym.bench.report import env_label, leaderboard_stats
from llmgym.bench.request import bench_request
from llmgym.bench.runner import EXACT_FILE, load_rows, run_bench
from llmgym.cli import app

BLACKJACK = ["--envs", "Text-Blackjack-v1", "--agents", "random,optimal", "--episodes", "40"]
ALT = ["--env-kwarg", "action_names=alt"]


def bench(output, *args):
    return CliRunner().invoke(app, ["bench", *args, "--output", str(output)])


def returns(output):
    return {(r["agent"], r["seed"]): r["return"] for r in load_rows(output)}


def test_a_variant_bench_plays_as_the_base_bench_and_says_which_it_is(tmp_path):
    base, alt = tmp_path / "base", tmp_path / "alt"
    assert bench(base, *BLACKJACK).exit_code == 0
    result = bench(alt, *BLACKJACK, *ALT, "--env-kwarg", "shuffle_actions=true")
    assert result.exit_code == 0, result.output
    assert returns(alt) == returns(base)  # same seeds, same semantic actions
    kwargs = {"action_names": "alt", "shuffle_actions": True}
    rows = load_rows(alt)
    assert all(r["env_kwargs"] == kwargs and r["parse_rate"] == 1.0 for r in rows)
    assert all("env_kwargs" not in r for r in load_rows(base))  # plain rows read as before
    assert [r["env_kwargs"] for r in load_rows(alt, EXACT_FILE)] == [kwargs]
    assert json.loads((alt / "bench.json").read_text())["env_kwargs"] == kwargs
    assert "env_kwargs" not in json.loads((base / "bench.json").read_text())
    label = "Text-Blackjack-v1 [action_names=alt, shuffle_actions=true]"
    table = (alt / "leaderboard.md").read_text()
    assert f"| {label} | optimal | 40 |" in table and f"| {label} | random | 40 |" in table
    assert "--env-kwarg action_names=alt --env-kwarg shuffle_actions=true`" in table
    assert "| Text-Blackjack-v1 | optimal |" in (base / "leaderboard.md").read_text()
    assert "| 1.00 |" in table  # parse rate


def test_other_env_kwargs_are_another_bench(tmp_path):
    assert bench(tmp_path, *BLACKJACK, *ALT).exit_code == 0
    rows = (tmp_path / "episodes.jsonl").read_bytes()
    for other, held in [
        ([], "(env kwargs action_names=alt, not none)"),
        (
            ["--env-kwarg", "action_names=base"],
            "(env kwargs action_names=alt, not action_names=base)",
        ),
        (
            [*ALT, "--env-kwarg", "wording=alt"],
            "(env kwargs action_names=alt, not action_names=alt wording=alt)",
        ),
    ]:
        result = bench(tmp_path, *BLACKJACK, *other)
        assert result.exit_code == 2, result.output
        assert f"holds another bench {held}" in " ".join(result.output.split())
        assert (tmp_path / "episodes.jsonl").read_bytes() == rows
    assert bench(tmp_path, *BLACKJACK, *ALT).exit_code == 0  # the same bench resumes
    assert (tmp_path / "episodes.jsonl").read_bytes() == rows
    result = bench(tmp_path, *BLACKJACK, "--fresh")
    assert result.exit_code == 0 and all("env_kwargs" not in r for r in load_rows(tmp_path))
    refused = bench(tmp_path, *BLACKJACK, *ALT)  # and the other way round
    assert refused.exit_code == 2 and "env kwargs none, not action_names=alt" in refused.output


def test_a_folder_without_bench_json_is_judged_by_its_rows_env_kwargs(tmp_path):
    run_bench(["Text-Blackjack-v1"], ["random"], episodes=4, output=tmp_path)
    args = ["--envs", "Text-Blackjack-v1", "--agents", "random", "--episodes", "4", *ALT]
    result = bench(tmp_path, *args)
    assert result.exit_code == 2 and "with env kwargs none" in result.output


def test_the_leaderboard_counts_only_rows_made_with_its_env_kwargs(tmp_path):
    kwargs = {"action_names": "alt"}
    run_bench(["Text-Blackjack-v1"], ["optimal"], episodes=3, output=tmp_path)
    run_bench(["Text-Blackjack-v1"], ["random"], episodes=5, output=tmp_path, env_kwargs=kwargs)
    plain = leaderboard_stats(tmp_path, ["Text-Blackjack-v1"], ["optimal"])
    variant = leaderboard_stats(tmp_path, ["Text-Blackjack-v1"], ["random"], env_kwargs=kwargs)
    assert [(s.label, s.agent, s.episodes) for s in plain] == [("Text-Blackjack-v1", "optimal", 3)]
    assert [(s.label, s.agent, s.episodes) for s in variant] == [
        ("Text-Blackjack-v1 [action_names=alt]", "random", 5)
    ]
    assert env_label("Text-Taxi-v4", {}) == "Text-Taxi-v4"


def test_the_map_set_bench_has_an_optimal_row(tmp_path):
    env = "Text-FrozenLakeMaps4x4-Heldout-v0"
    result = bench(tmp_path, "--envs", env, "--agents", "random,optimal", "--episodes", "100")
    assert result.exit_code == 0, result.output
    table = (tmp_path / "leaderboard.md").read_text()
    assert f"| {env} | optimal | 100 | 1.000 | [1.000, 1.000] | 1.00 | 1.00 |" in table
    assert "| 1.0000 | 0 |" in table  # the exact mean over the set
    (exact,) = load_rows(tmp_path, EXACT_FILE)
    assert exact["maps"] == 100 and exact["exact_return"] == 1.0


def test_ray_tasks_carry_the_env_kwargs():
    """The Ray runner's tasks, called in this process (no Ray needed)."""
    kwargs = {"action_names": "alt"}
    rows = play_chunk("Text-Blackjack-v1", "optimal", [0, 1, 2], 0, 2, kwargs)["rows"]
    assert [r["env_kwargs"] for r in rows] == [kwargs] * 3
    assert all(r["parse_rate"] == 1.0 for r in rows)
    exact = exact_chunk("Text-Blackjack-v1", "optimal", 0, kwargs)["exact"]
    assert exact["env_kwargs"] == kwargs and exact["parse_rate"] == 1.0


def test_the_request_checks_its_env_kwargs_on_every_env():
    request = bench_request(
        envs="Text-Blackjack-v1", agents="random", env_kwargs={"wording": "alt"}
    )
    assert request.command.endswith("--env-kwarg wording=alt")
    with pytest.raises(ValueError, match="Text-CartPole-v1 takes no env kwarg 'natural'"):
        bench_request(
            envs="Text-Blackjack-v1,Text-CartPole-v1", agents="random", env_kwargs={"natural": True}
        )


@pytest.mark.parametrize(
    ("kwarg", "message"),
    [
        ("action_names", "--env-kwarg 'action_names' is not KEY=VALUE"),
        ("=alt", "is not KEY=VALUE"),
        ("wording=formal", "Unknown wording 'formal': use base or alt."),
        ("is_slippery=false", "Text-Blackjack-v1 takes no env kwarg 'is_slippery'"),
        ("shuffle_actions=-1", "shuffle_actions must be true, false or a seed"),
        ("render_mode=human", "render_mode=human opens a window"),
    ],
)
def test_bad_env_kwargs_are_one_sentence_and_exit_2(tmp_path, monkeypatch, kwarg, message):
    monkeypatch.delenv("DISPLAY", raising=False)
    monkeypatch.delenv("WAYLAND_DISPLAY", raising=False)
    out = tmp_path / "out"
    result = bench(out, *BLACKJACK, "--env-kwarg", kwarg)
    assert result.exit_code == 2, result.output
    text = " ".join(result.output.split())
    assert message in text and "Traceback" not in result.output
    assert text.count("Error:") == 1
    assert not out.exists()  # refused before the folder is claimed
