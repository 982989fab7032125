"""What a run writes as it goes: ``metrics.jsonl`` (one JSON object per logged row, appended),
``metrics.csv`` derived from it (wide format, one row per iteration, a column per metric),
TensorBoard event files, W&B when ``WANDB_PROJECT`` is set, and the library versions saved
with every run.

``metrics.jsonl`` is the record: each ``log`` appends one whole line with a single write and a
flush, so a run's logging costs writes in proportion to its rows (rewriting the whole file every
row made it grow with their square). A line cut short by a kill or a full disk (no final
newline, or not JSON) is dropped on read, and cut off before the next append so the next row
does not glue onto it. ``metrics.csv`` is kept current for the readers of the wide table
(``llmgym plot``, ``benchmarks/*.py``): a row whose metrics are all columns already is
appended; a row that brings a new metric, ``truncate`` and a replaced row rewrite it (atomically,
from the rows), which happens at most once per distinct metric name plus once per resume.
``read_rows`` and ``write_csv`` give readers the same rows from a run directory.

Example:
    >>> import tempfile
    >>> from pathlib import Path
    >>> run = Path(tempfile.mkdtemp())
    >>> logger = MetricsLogger(run, {}, tensorboard=False)
    >>> logger.log({"charts/episodic_return": 0.123456789}, step=40)
    >>> logger.log({"eval/mean_return": 1.0}, step=80)
    >>> logger.close()
    >>> print((run / "metrics.jsonl").read_text().strip())
    {"env_steps": 40, "charts/episodic_return": 0.123457}
    {"env_steps": 80, "eval/mean_return": 1.0}
    >>> print((run / "metrics.csv").read_text().strip())
    env_steps,charts/episodic_return,eval/mean_return
    40,0.123457,
    80,,1.0
    >>> [row["env_steps"] for row in read_rows(run)]
    [40, 80]
"""

from __future__ import annotations

import csv
import io
import json
import math
import os
import platform
import warnings
from pathlib import Path
from typing import Any

from llmgym.files import atomic_path, write_bytes

JSONL = "metrics.jsonl"
CSV = "metrics.csv"


class MetricsLogger:
    """Appends one row per ``log`` to ``metrics.jsonl`` and keeps ``metrics.csv`` (wide format,
    columns grow as new metrics appear) in step with it; TensorBoard event files, and W&B when
    ``WANDB_PROJECT`` is set.

    A run directory with only a ``metrics.csv`` (written before ``metrics.jsonl`` existed) is
    carried over: its rows become the first lines of ``metrics.jsonl``.

    Example (a row cut by a kill is dropped, and the next row starts on a line of its own):
        >>> import tempfile
        >>> run = Path(tempfile.mkdtemp())
        >>> logger = MetricsLogger(run, {}, tensorboard=False)
        >>> logger.log({"loss": 0.5}, step=1)
        >>> with (run / "metrics.jsonl").open("a") as f:
        ...     _ = f.write('{"env_steps": 2, "lo')  # killed mid-write
        >>> [row["env_steps"] for row in read_rows(run)]
        [1]
        >>> logger = MetricsLogger(run, {}, tensorboard=False)  # the resumed run
        >>> logger.log({"loss": 0.25, "kl": 0.1}, step=2)
        >>> print((run / "metrics.jsonl").read_text().strip())
        {"env_steps": 1, "loss": 0.5}
        {"env_steps": 2, "loss": 0.25, "kl": 0.1}
    """

    def __init__(self, run_dir: Path, config: dict[str, Any], tensorboard: bool = True):
        run_dir = Path(run_dir)
        self.jsonl = run_dir / JSONL
        self.path = run_dir / CSV
        self.rows: list[dict[str, Any]] = []
        self._columns: list[str] = []  # the header of metrics.csv as it is on disk
        self._csv_current = False  # metrics.csv holds exactly self.rows under self._columns
        if self.jsonl.exists():
            _repair_tail(self.jsonl)
            self.rows = _read_jsonl(self.jsonl)
        elif self.path.exists():  # a run logged before metrics.jsonl: carry its rows over
            with self.path.open(newline="") as f:
                self.rows = [_from_csv(raw) for raw in csv.DictReader(f)]
            _write_lines_atomic(self.jsonl, self.rows)
        if self.rows or self.path.exists():
            self._rewrite_csv()  # a row or header the last process could not finish
        self.tb = None
        if tensorboard:
            try:
                from torch.utils.tensorboard import SummaryWriter

                self.tb = SummaryWriter(str(run_dir / "tb"))
            except ImportError:  # tensorboard not installed: CSV only
                self.tb = None
        self.wandb = None
        if os.environ.get("WANDB_PROJECT"):
            try:
                import wandb

                self.wandb = wandb.init(
                    project=os.environ["WANDB_PROJECT"], config=config, dir=str(run_dir)
                )
            except ImportError:
                warnings.warn("WANDB_PROJECT is set but wandb is not installed", stacklevel=2)

    def truncate(self, env_steps: int) -> None:
        """Drop rows logged after ``env_steps`` (resuming from an earlier checkpoint); the files
        are rewritten only when a row goes."""
        kept = [r for r in self.rows if _step(r) <= env_steps]
        if len(kept) != len(self.rows):
            self.rows = kept
            _write_lines_atomic(self.jsonl, self.rows)
            self._rewrite_csv()

    def log(self, metrics: dict[str, Any], step: int, *, replaces: int | None = None) -> None:
        """Record one row. ``replaces=i`` drops ``self.rows[i]`` in the same atomic rewrite that
        adds this row (``checkpoints.log_once``); otherwise the row is appended."""
        row = {"env_steps": step} | {k: _scalar(v) for k, v in metrics.items()}
        if replaces is None:
            _append(self.jsonl, _json_line(row).encode())
            self.rows.append(row)
            self._append_csv(row)
        else:
            rows = self.rows[:replaces] + self.rows[replaces + 1 :] + [row]
            _write_lines_atomic(self.jsonl, rows)
            self.rows = rows
            self._rewrite_csv()
        if self.tb is not None:
            for k, v in row.items():
                if k != "env_steps" and isinstance(v, (int, float)) and math.isfinite(v):
                    self.tb.add_scalar(k, v, step)
            self.tb.flush()
        if self.wandb is not None:
            self.wandb.log(row, step=step)

    def _append_csv(self, row: dict[str, Any]) -> None:
        if not (self._csv_current and set(row) <= set(self._columns)):
            self._rewrite_csv()  # a new metric: the header grows
            return
        self._csv_current = False  # until the line is whole
        buffer = io.StringIO()
        csv.DictWriter(buffer, fieldnames=self._columns).writerow(row)
        if _append(self.path, buffer.getvalue().encode(), repair=False):
            self._csv_current = True
        else:  # metrics.csv was cut short behind our back: derive it again
            self._rewrite_csv()

    def _rewrite_csv(self) -> None:
        self._csv_current = False
        self._columns = _write_csv_atomic(self.path, self.rows)
        self._csv_current = True

    def close(self) -> None:
        if not self._csv_current:
            self._rewrite_csv()
        if self.tb is not None:
            self.tb.close()
        if self.wandb is not None:
            self.wandb.finish()


def read_rows(run_dir: str | Path) -> list[dict[str, Any]]:
    """A run's logged rows, oldest first: from ``metrics.jsonl`` (a torn or unparsable line is
    left out), else from ``metrics.csv`` (a run logged before ``metrics.jsonl``; blank cells
    left out, numbers as numbers). Raises ``FileNotFoundError`` when the run has neither."""
    run_dir = Path(run_dir)
    if (run_dir / JSONL).exists():
        return _read_jsonl(run_dir / JSONL)
    with (run_dir / CSV).open(newline="") as f:
        return [_from_csv(raw) for raw in csv.DictReader(f)]


def write_csv(run_dir: str | Path) -> Path:
    """Derive ``metrics.csv`` from the run's ``metrics.jsonl`` (atomically) and return its path:
    for a run whose logger never closed."""
    path = Path(run_dir) / CSV
    _write_csv_atomic(path, read_rows(run_dir))
    return path


def _read_jsonl(path: Path) -> list[dict[str, Any]]:
    data = path.read_bytes()
    rows = []
    for line in data.split(b"\n")[:-1]:  # the piece after the last newline is a torn row
        try:
            row = json.loads(line)
        except ValueError:  # a line a kill or a full disk cut short (or bad UTF-8)
            continue
        if isinstance(row, dict):
            rows.append(row)
    return rows


def _append(path: Path, data: bytes, repair: bool = True) -> bool:
    """Append ``data`` (whole lines) with one write and a flush. A tail without its final
    newline is first cut back to the last newline (``repair``), or left alone and ``False``
    returned."""
    with open(path, "a+b") as f:
        end = f.seek(0, os.SEEK_END)
        if end:
            f.seek(end - 1)
            if f.read(1) != b"\n":
                if not repair:
                    return False
                f.truncate(_after_last_newline(f, end))
        f.write(data)
        f.flush()
    return True


def _repair_tail(path: Path) -> None:
    """Cut a row that a kill or a full disk left without its newline."""
    with open(path, "r+b") as f:
        end = f.seek(0, os.SEEK_END)
        if end:
            f.seek(end - 1)
            if f.read(1) != b"\n":
                f.truncate(_after_last_newline(f, end))


def _after_last_newline(f: Any, end: int, chunk: int = 1 << 16) -> int:
    pos = end
    while pos > 0:
        start = max(0, pos - chunk)
        f.seek(start)
        block = f.read(pos - start)
        cut = block.rfind(b"\n")
        if cut >= 0:
            return start + cut + 1
        pos = start
    return 0


def _write_lines_atomic(path: Path, rows: list[dict[str, Any]]) -> None:
    write_bytes(path, "".join(_json_line(r) for r in rows).encode())


def _write_csv_atomic(path: Path, rows: list[dict[str, Any]]) -> list[str]:
    columns: dict[str, None] = {}
    for row in rows:
        columns |= dict.fromkeys(row)
    with atomic_path(path) as tmp, open(tmp, "w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=list(columns))
        writer.writeheader()
        writer.writerows(rows)
    return list(columns)


def _json_line(row: dict[str, Any]) -> str:
    return json.dumps(row, default=str) + "\n"


def _from_csv(raw: dict[str, Any]) -> dict[str, Any]:
    """A ``metrics.csv`` row as ``log`` would have recorded it: blank cells left out, numbers
    as numbers."""
    row: dict[str, Any] = {}
    for k, v in raw.items():
        if k is None or v in ("", None):
            continue
        for kind in (int, float):
            try:
                v = kind(v)
                break
            except ValueError:
                pass
        row[k] = v
    return row


def _step(row: dict[str, Any]) -> float:
    try:
        return float(row.get("env_steps", 0))
    except (TypeError, ValueError):
        return 0.0


def _scalar(v: Any) -> Any:
    if hasattr(v, "item"):
        v = v.item()
    if isinstance(v, float):
        return round(v, 6)
    return v


def library_versions() -> dict[str, str]:
    """Versions of the libraries a run depends on (saved with every run)."""
    from importlib.metadata import PackageNotFoundError, version

    out = {"python": platform.python_version(), "platform": platform.platform()}
    for name in ("llmgym", "torch", "transformers", "peft", "gymnasium", "numpy"):
        try:
            out[name] = version(name)
        except PackageNotFoundError:
            out[name] = "not installed"
    return out


def machine_description(device: Any = None) -> str:
    """What a run's wall time was measured on: CPU architecture and cores, and the GPU when
    ``device`` is a CUDA device.

    Example:
        >>> "CPU" in machine_description()
        True
    """
    text = f"{platform.machine()} CPU, {os.cpu_count()} cores"
    if device is not None and str(device).startswith("cuda"):
        import torch

        text += f", {torch.cuda.get_device_name(device)}"
    return text


__all__ = ["MetricsLogger", "library_versions", "machine_description", "read_rows", "write_csv"]
