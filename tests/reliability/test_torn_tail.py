"""Issue 37, item 2: a torn last line of ``episodes.jsonl`` (a kill or a full disk mid-write)
is repaired before the next append, and every episode is recorded exactly once."""

from __future__ import annotations

import errno
import json

import pytest
import typer
from typer.testing import CliRunner

import llmgym  # noqa: F401
from llmgym.bench import records
from llmgym.bench.runner import EPISODES_FILE, EpisodeLog, load_rows, row_key, run_bench
from llmgym.cli.bench import register

FROZEN = ["bench", "--envs", "Text-FrozenLake-v1", "--agents", "optimal", "--episodes", "60"]


def _app() -> typer.Typer:
    app = typer.Typer()
    register(app)
    return app


def _check(out):
    lines = (out / EPISODES_FILE).read_bytes().split(b"\n")
    assert lines[-1] == b""  # ends with its newline
    rows = [json.loads(line) for line in lines[:-1]]  # every line parses: no garbage
    assert len(rows) == len({row_key(r) for r in rows}) == 60
    assert round(sum(r["return"] for r in rows) / 60, 3) == 0.767


def test_a_cut_last_line_is_repaired_on_rerun(tmp_path):
    out = tmp_path / "b"
    first = CliRunner().invoke(_app(), [*FROZEN, "--output", str(out)])
    assert first.exit_code == 0, first.output
    _check(out)
    path = out / EPISODES_FILE
    data = path.read_bytes()
    last = data[:-1].rfind(b"\n") + 1
    path.write_bytes(data[: last + (len(data) - last) // 2])  # the last row cut in half
    for _ in range(2):  # a rerun repairs it; a second one changes nothing
        again = CliRunner().invoke(_app(), [*FROZEN, "--output", str(out)])
        assert again.exit_code == 0, again.output
        assert "| 60 | 0.767 |" in again.output
        _check(out)


def test_a_complete_row_without_its_newline_is_kept_once(tmp_path):
    rows = run_bench(["Text-FrozenLake-v1"], ["optimal"], episodes=60, output=tmp_path)
    assert len(rows) == 60
    path = tmp_path / EPISODES_FILE
    path.write_bytes(path.read_bytes()[:-1])  # only the final newline lost
    assert run_bench(["Text-FrozenLake-v1"], ["optimal"], episodes=60, output=tmp_path) == []
    _check(tmp_path)
    # the repair happens under the lock, before the next append
    log = EpisodeLog(tmp_path)
    path.write_bytes(path.read_bytes() + b'{"env_id": "Text-Froz')
    assert log.write({**rows[0], "seed": 1000})
    assert load_rows(tmp_path)[-1]["seed"] == 1000
    assert path.read_bytes().count(b"Froz\n") == 0


def test_a_full_disk_mid_append_takes_the_fragment_back(tmp_path, monkeypatch):
    log = EpisodeLog(tmp_path)
    row = {"env_id": "E", "agent": "a", "seed": 0, "return": 1.0}
    assert log.write(row)
    before = (tmp_path / EPISODES_FILE).read_bytes()

    def half_then_full(sink, data):
        sink.write(data[: len(data) // 2])
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(records, "_write_all", half_then_full)
    with pytest.raises(OSError):
        log.write({**row, "seed": 1})
    assert (tmp_path / EPISODES_FILE).read_bytes() == before
