"""Issue 37, item 6: a full disk or a read-only target gives one sentence and exit code 2,
and leaves no partial file: every user-visible write is all-or-nothing (``llmgym.files``)."""

from __future__ import annotations

import errno
import json
import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

import llmgym  # noqa: F401
from llmgym import files
from llmgym.cli import app
from llmgym.errors import OutputError

FULL = "/dev/full"
EVAL = ["eval", "Text-Blackjack-v1", "--agent", "random", "--episodes", "2", "--no-progress"]


def _one_sentence(result) -> str:
    assert result.exit_code == 2, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: Cannot write"), result.output
    assert "Traceback" not in result.output
    return lines[0]


def _disk_fills_after(monkeypatch, limit: int) -> None:
    """Every file write through Python's file objects fails with ENOSPC once ``limit`` bytes
    of it are written (what a full disk does mid-write)."""
    real_open = open

    class Full:
        def __init__(self, f):
            self._f, self._n = f, 0

        def write(self, data):
            if self._n + len(data) > limit:
                self._f.write(data[: max(limit - self._n, 0)])
                raise OSError(errno.ENOSPC, "No space left on device")
            self._n += len(data)
            return self._f.write(data)

        def __getattr__(self, name):
            return getattr(self._f, name)

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self._f.close()

    def full_open(file, mode="r", *args, **kwargs):
        f = real_open(file, mode, *args, **kwargs)
        return Full(f) if any(m in mode for m in "wax") else f

    monkeypatch.setattr("builtins.open", full_open)
    monkeypatch.setattr(Path, "write_bytes", lambda self, data: _write(full_open, self, data))


def _write(opener, path, data):
    with opener(path, "wb") as f:
        f.write(data)


def _leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.rglob("*"))


def test_the_helper_leaves_the_old_file_or_the_new_one(tmp_path, monkeypatch):
    out = tmp_path / "a.json"
    files.write_text(out, "old")
    _disk_fills_after(monkeypatch, 2)
    with pytest.raises(OutputError, match=r"Cannot write .*a\.json \(No space left on device\)"):
        files.write_text(out, "new content")
    monkeypatch.undo()
    assert out.read_text() == "old" and _leftovers(tmp_path) == ["a.json"]


def test_eval_output_on_a_full_disk(tmp_path, monkeypatch):
    out = tmp_path / "r.json"
    _disk_fills_after(monkeypatch, 10)
    line = _one_sentence(CliRunner().invoke(app, [*EVAL, "--output", str(out)]))
    assert "No space left on device" in line
    monkeypatch.undo()
    assert _leftovers(tmp_path) == []  # no 0-byte or partial r.json, no temporary


def test_eval_output_to_dev_full():
    assert "No space left" in _one_sentence(CliRunner().invoke(app, [*EVAL, "--output", FULL]))
    assert Path(FULL).is_char_device()  # written in place, never renamed over


def test_eval_output_on_a_read_only_file_system(tmp_path, monkeypatch):
    out = tmp_path / "r.json"

    class ReadOnly:  # ``os`` as llmgym.files sees it on a file system mounted read-only
        def __getattr__(self, name):
            return getattr(os, name)

        @staticmethod
        def open(path, flags, *args):
            if flags & os.O_CREAT:
                raise OSError(errno.EROFS, "Read-only file system", str(path))
            return os.open(path, flags, *args)

    monkeypatch.setattr(files, "os", ReadOnly())
    line = _one_sentence(CliRunner().invoke(app, [*EVAL, "--output", str(out)]))
    assert "(Read-only file system); pick a writable path." in line
    assert _leftovers(tmp_path) == []


def test_plot_out_on_a_full_disk_names_the_png_not_metrics_csv(tmp_path, monkeypatch):
    from llmgym.rl.logger import MetricsLogger

    run = tmp_path / "run"
    run.mkdir()
    logger = MetricsLogger(run, {}, tensorboard=False)
    for i in range(3):
        logger.log({"eval/mean_return": i / 10, "charts/episodic_return": i}, step=16 * i)
    logger.close()
    line = _one_sentence(CliRunner().invoke(app, ["plot", str(run), "--out", FULL]))
    assert "metrics.csv" not in line and FULL in line
    _disk_fills_after(monkeypatch, 100)
    line = _one_sentence(CliRunner().invoke(app, ["plot", str(run), "--out", str(run / "c.png")]))
    monkeypatch.undo()
    assert "c.png" in line and "metrics.csv" not in line
    assert _leftovers(run) == ["metrics.csv", "metrics.jsonl"]


def test_bench_report_on_a_full_disk(tmp_path, monkeypatch):
    from llmgym.bench import charts

    real = charts.write_figure

    def full(fig, path, **kwargs):
        if Path(path).name == "leaderboard.png":
            raise files.output_error(path, OSError(errno.ENOSPC, "No space left on device"))
        return real(fig, path, **kwargs)

    monkeypatch.setattr(charts, "write_figure", full)
    args = ["bench", "--envs", "Text-Blackjack-v1", "--agents", "random", "--episodes", "2"]
    line = _one_sentence(CliRunner().invoke(app, [*args, "--output", str(tmp_path)]))
    assert "leaderboard.png" in line
    assert "leaderboard.png" not in _leftovers(tmp_path)


@pytest.fixture(scope="module")
def trainer(tmp_path_factory):
    pytest.importorskip("torch")
    from llmgym.rl import make_trainer

    run = tmp_path_factory.mktemp("run")
    return make_trainer(
        "reinforce",
        model="tiny",
        env_id="Text-Blackjack-v1",
        num_envs=2,
        episodes_per_update=2,
        eval_every=0,
        checkpoint_every=0,
        progress=False,
        output_dir=str(run),
        action_head=False,
    )


def test_a_checkpoint_on_a_full_disk_leaves_no_partial_folder(trainer, monkeypatch):
    import torch

    real_save = torch.save

    def save_cut_short(obj, f, *args, **kwargs):  # torch's zip writer on a full disk
        real_save(obj, f, *args, **kwargs)
        Path(f).write_bytes(Path(f).read_bytes()[:64])
        raise RuntimeError("[enforce fail at inline_container.cc:672] . unexpected pos 64 vs 0")

    monkeypatch.setattr(torch, "save", save_cut_short)
    with pytest.raises(OutputError, match=r"Cannot write .*iter_\d+ \(the write stopped short"):
        trainer.checkpointer.save_checkpoint()
    monkeypatch.undo()
    assert (
        not (trainer.run_dir / "checkpoints").exists()
        or _leftovers(trainer.run_dir / "checkpoints") == []
    )
    path = trainer.checkpointer.save_checkpoint()  # space again: it works
    assert (path / "trainer_state.json").exists()


def test_a_policy_on_a_full_disk_leaves_the_old_one(trainer, tmp_path, monkeypatch):
    import safetensors.torch

    out = tmp_path / "policy"
    trainer.save_policy(out)
    before = {p.name: p.read_bytes() for p in out.iterdir()}

    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(safetensors.torch, "save_file", full)
    with pytest.raises(OutputError, match="No space left"):
        trainer.save_policy(out)
    monkeypatch.undo()
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["policy"]  # no temporary left


def test_export_on_a_full_disk_leaves_no_partial_adapter(trainer, tmp_path, monkeypatch):
    import safetensors.torch

    from llmgym.rl.export import export_run

    run = tmp_path / "policy"
    trainer.save_policy(run)
    out = tmp_path / "exported"

    def full(*args, **kwargs):  # adapter_config.json is written first, then the weights fail
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(safetensors.torch, "save_file", full)
    with pytest.raises(OutputError, match=r"Cannot write \S*/exported/?\S* \(No space left") as e:
        export_run(run, out)
    assert ".tmp" not in str(e.value)  # the user's path, not the temporary's
    monkeypatch.undo()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["policy"]
    export_run(run, out)
    assert json.loads((out / "adapter_config.json").read_text())["r"] > 0
