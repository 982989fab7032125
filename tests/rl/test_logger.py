"""MetricsLogger appends instead of rewriting, and survives a torn last row (issue 34, item 7)."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from llmgym.rl import checkpoints
from llmgym.rl import logger as logger_module
from llmgym.rl.logger import MetricsLogger, read_rows, write_csv

ROW = {"charts/episodic_return": 0.5, "losses/kl": 0.01, "charts/entropy": 1.2}


def _csv(run: Path) -> list[dict[str, str]]:
    with (run / "metrics.csv").open() as f:
        return list(csv.DictReader(f))


class _Counting:
    """A file object that counts the bytes written through it."""

    def __init__(self, f, tally: dict):
        self._f, self._tally = f, tally

    def write(self, data):
        self._tally["bytes"] += len(data)
        return self._f.write(data)

    def __enter__(self):
        self._f.__enter__()
        return self

    def __exit__(self, *exc):
        return self._f.__exit__(*exc)

    def __getattr__(self, name):
        return getattr(self._f, name)


@pytest.fixture
def opened(monkeypatch):
    """Every file the logger opens: (name, mode), and the bytes written through them."""
    tally = {"bytes": 0, "opens": []}

    def counting_open(path, mode="r", *args, **kwargs):
        tally["opens"].append((Path(path).name, mode))
        return _Counting(open(path, mode, *args, **kwargs), tally)

    monkeypatch.setattr(logger_module, "open", counting_open, raising=False)
    return tally


def test_appending_n_rows_writes_bytes_in_proportion_to_n(tmp_path, opened):
    log = MetricsLogger(tmp_path, {}, tensorboard=False)
    log.log({"eval/mean_return": 0.0}, step=0)  # iteration 0: eval only
    n = 300
    for i in range(1, n + 1):
        log.log(ROW, step=16 * i)
    log.close()
    on_disk = sum((tmp_path / name).stat().st_size for name in ("metrics.jsonl", "metrics.csv"))
    # Whole-file rewrites would write ~n/2 times what ends up on disk; appends write it once,
    # plus one rewrite of metrics.csv when the header grew at row 2.
    assert opened["bytes"] <= 2 * on_disk
    jsonl_modes = {mode for name, mode in opened["opens"] if name == "metrics.jsonl"}
    assert jsonl_modes == {"a+b"}
    csv_opens = [mode for name, mode in opened["opens"] if name == "metrics.csv"]
    assert csv_opens.count("a+b") == n - 1  # every row after the header settled
    assert len(read_rows(tmp_path)) == n + 1 and len(_csv(tmp_path)) == n + 1


def test_each_row_is_one_write_of_whole_lines(tmp_path, monkeypatch):
    log = MetricsLogger(tmp_path, {}, tensorboard=False)
    log.log(ROW, step=16)
    writes = []
    real_open = open

    def spying_open(path, mode="r", *args, **kwargs):
        f = real_open(path, mode, *args, **kwargs)
        if Path(path).name == "metrics.jsonl":
            real_write = f.write
            f.write = lambda data: writes.append(data) or real_write(data)
        return f

    monkeypatch.setattr(logger_module, "open", spying_open, raising=False)
    log.log(ROW | {"extra": "text, with a comma"}, step=32)
    assert len(writes) == 1 and writes[0].endswith(b"\n") and writes[0].count(b"\n") == 1
    assert json.loads(writes[0]) == {"env_steps": 32} | ROW | {"extra": "text, with a comma"}


@pytest.mark.parametrize("fragment", ['{"env_steps": 48, "charts/episodic_return": 0.', "\x00\xff"])
def test_a_torn_last_row_is_dropped_and_cut_before_the_next_append(tmp_path, fragment):
    log = MetricsLogger(tmp_path, {}, tensorboard=False)
    log.log(ROW, step=16)
    log.log(ROW, step=32)
    log.close()
    with (tmp_path / "metrics.jsonl").open("ab") as f:  # a kill (or full disk) mid-write
        f.write(fragment.encode("latin-1"))
    assert [r["env_steps"] for r in read_rows(tmp_path)] == [16, 32]

    resumed = MetricsLogger(tmp_path, {}, tensorboard=False)
    resumed.truncate(32)
    resumed.log(ROW, step=48)
    resumed.close()
    lines = (tmp_path / "metrics.jsonl").read_bytes().split(b"\n")
    assert lines[-1] == b"" and [json.loads(x)["env_steps"] for x in lines[:-1]] == [16, 32, 48]
    assert [r["env_steps"] for r in _csv(tmp_path)] == ["16", "32", "48"]


def test_a_torn_tail_is_repaired_even_when_it_appears_while_logging(tmp_path):
    log = MetricsLogger(tmp_path, {}, tensorboard=False)
    log.log(ROW, step=16)
    with (tmp_path / "metrics.jsonl").open("ab") as f:  # e.g. a write cut by a full disk
        f.write(b'{"env_steps": 3')
    with (tmp_path / "metrics.csv").open("ab") as f:
        f.write(b"32,0.")
    log.log(ROW, step=32)
    assert [r["env_steps"] for r in read_rows(tmp_path)] == [16, 32]
    assert [r["env_steps"] for r in _csv(tmp_path)] == ["16", "32"]
    assert _csv(tmp_path)[1]["charts/episodic_return"] == "0.5"


def test_an_unparsable_complete_last_line_is_dropped(tmp_path):
    (tmp_path / "metrics.jsonl").write_bytes(b'{"env_steps": 1, "a": 1}\n{"env_steps": 2, "a\n')
    assert read_rows(tmp_path) == [{"env_steps": 1, "a": 1}]
    log = MetricsLogger(tmp_path, {}, tensorboard=False)
    log.log({"a": 3}, step=3)
    assert [r["env_steps"] for r in read_rows(tmp_path)] == [1, 3]


def test_a_metric_first_seen_at_row_3_is_in_the_csv(tmp_path):
    log = MetricsLogger(tmp_path, {}, tensorboard=False)
    log.log({"a": 1.0}, step=1)
    log.log({"a": 2.0}, step=2)
    log.log({"a": 3.0, "late": 0.25}, step=3)
    log.log({"a": 4.0}, step=4)
    rows = _csv(tmp_path)  # current while the run goes on, not only at close
    assert list(rows[0]) == ["env_steps", "a", "late"]
    assert [r["late"] for r in rows] == ["", "", "0.25", ""]
    log.close()
    (tmp_path / "metrics.csv").unlink()
    write_csv(tmp_path)  # derived again from metrics.jsonl
    assert _csv(tmp_path) == rows


def test_truncate_on_resume_keeps_rows_up_to_the_step(tmp_path):
    log = MetricsLogger(tmp_path, {}, tensorboard=False)
    for step in (0, 16, 32, 48, 64):
        log.log(ROW, step=step)
    log.close()
    resumed = MetricsLogger(tmp_path, {}, tensorboard=False)
    resumed.truncate(32)  # the checkpoint was at 32: rows 48 and 64 are logged again
    for step in (48, 64):
        resumed.log(ROW, step=step)
    resumed.close()
    assert [r["env_steps"] for r in read_rows(tmp_path)] == [0, 16, 32, 48, 64]
    assert [r["env_steps"] for r in _csv(tmp_path)] == ["0", "16", "32", "48", "64"]


def test_log_once_replaces_the_final_row_exactly_once(tmp_path):
    final = {"eval/mean_return": 0.9, "iteration": 4}
    log = MetricsLogger(tmp_path, {}, tensorboard=False)
    log.log(ROW, step=64)
    checkpoints.log_once(log, final, 64)
    log.close()
    resumed = MetricsLogger(tmp_path, {}, tensorboard=False)  # resumed after it finished
    resumed.truncate(64)
    checkpoints.log_once(resumed, final | {"eval/mean_return": 0.8}, 64)
    checkpoints.log_once(resumed, {"final_eval/mean_return": 0.7}, 64)  # llmgym train's row
    resumed.close()
    rows = read_rows(tmp_path)
    assert rows == [
        {"env_steps": 64} | ROW,
        {"env_steps": 64, "eval/mean_return": 0.8, "iteration": 4},
        {"env_steps": 64, "final_eval/mean_return": 0.7},
    ]
    assert len(_csv(tmp_path)) == 3


def test_a_fresh_run_starts_new_metrics_files(tmp_path):
    log = MetricsLogger(tmp_path, {}, tensorboard=False)
    log.log(ROW, step=16)
    log.close()
    checkpoints.start_fresh(tmp_path)
    assert not (tmp_path / "metrics.jsonl").exists() and not (tmp_path / "metrics.csv").exists()


def test_a_run_logged_before_metrics_jsonl_is_carried_over(tmp_path):
    (tmp_path / "metrics.csv").write_text(
        "env_steps,charts/episodic_return,eval/mean_return,diagnostics/top_action\n"
        "16,0.5,,hit\n32,0.75,1.0,stand\n"
    )
    log = MetricsLogger(tmp_path, {}, tensorboard=False)
    log.truncate(16)
    log.log({"charts/episodic_return": 0.25}, step=32)
    log.close()
    assert read_rows(tmp_path) == [
        {"env_steps": 16, "charts/episodic_return": 0.5, "diagnostics/top_action": "hit"},
        {"env_steps": 32, "charts/episodic_return": 0.25},
    ]
    assert [r["charts/episodic_return"] for r in _csv(tmp_path)] == ["0.5", "0.25"]


def test_plotting_reads_the_appended_log(tmp_path):
    pytest.importorskip("matplotlib")
    from llmgym.rl.plotting import plot_run, read_metrics

    log = MetricsLogger(tmp_path, {}, tensorboard=False)
    log.log({"eval/mean_return": 0.1, "eval/ci95": 0.05}, step=0)
    for i in range(1, 6):
        log.log(ROW | {"llmgym/parse_rate": 1.0}, step=16 * i)
    log.log({"final_eval/mean_return": 0.6, "final_eval/ci95": 0.02}, step=80)
    with (tmp_path / "metrics.jsonl").open("ab") as f:
        f.write(b'{"env_steps": 96, "charts/epi')  # killed mid-row; never resumed
    rows = read_metrics(tmp_path)
    assert [r["env_steps"] for r in rows] == [0, 16, 32, 48, 64, 80, 80]
    png = plot_run(tmp_path)
    assert png.exists() and png.stat().st_size > 0
