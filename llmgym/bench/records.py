"""The bench's records: the folder a bench writes, ``episodes.jsonl`` (one row per episode,
keyed by (env, agent, seed)) and ``exact.jsonl`` (one row per cell, keyed by (env, agent)),
read back by ``load_rows`` and appended by ``EpisodeLog``, which writes each key once (under a
lock, across processes), drops torn lines and repairs a torn last line.
``llmgym.bench.runner`` plays the cells whose rows these are.

Example:
    >>> import tempfile
    >>> out = Path(tempfile.mkdtemp())
    >>> with EpisodeLog(out) as log:
    ...     log.write({"env_id": "E", "agent": "a", "seed": 0, "return": 1.0})
    True
    >>> [row_key(r) for r in load_rows(out)]
    [('E', 'a', 0)]
"""

from __future__ import annotations

import json
import os
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any, BinaryIO

from llmgym.errors import OutputError
from llmgym.files import output_error, write_bytes

try:
    import fcntl
except ImportError:  # Windows: no advisory locks; one bench per folder there
    fcntl = None  # type: ignore[assignment]

EPISODES_FILE = "episodes.jsonl"
#: Bytes read at a time when looking for the start of a torn last line.
TAIL_BLOCK = 1 << 16
EXACT_FILE = "exact.jsonl"
#: Called after each finished episode with its row (for progress bars).
Callback = Callable[[dict[str, Any]], None]


def load_rows(output: Path, name: str = EPISODES_FILE) -> list[dict[str, Any]]:
    """Every row recorded in ``output/name`` (torn lines are ignored)."""
    path = Path(output) / name
    if not path.exists():
        return []
    rows = []
    for line in path.read_bytes().splitlines():
        try:
            rows.append(json.loads(line))
        except ValueError:  # JSONDecodeError, UnicodeDecodeError
            continue
    return rows


def row_key(row: dict[str, Any]) -> tuple[str, str, int]:
    """What makes an episode row unique: (env, agent, seed)."""
    return row["env_id"], row["agent"], row["seed"]


def cell_key(row: dict[str, Any]) -> tuple[str, str]:
    """What makes an exact row unique: its cell, (env, agent)."""
    return row["env_id"], row["agent"]


class EpisodeLog:
    """Appends episode rows to ``output/episodes.jsonl`` (and exact rows to ``exact.jsonl``),
    each (env, agent, seed) once: rows already recorded, or written twice, are dropped.
    ``new_rows`` holds what this log wrote (unless ``keep_rows=False``); ``on_episode(row)``
    is called for each. Each write
    holds an exclusive lock on the file and first reads what other processes appended since,
    so two bench runs on one folder never record an episode twice (POSIX; elsewhere unlocked).

    Example:
        >>> import tempfile
        >>> row = {"env_id": "E", "agent": "a", "seed": 0, "return": 1.0}
        >>> with EpisodeLog(Path(tempfile.mkdtemp())) as log:
        ...     log.write(row), log.write(dict(row)), len(log.new_rows)
        (True, False, 1)
    """

    def __init__(
        self, output: Path, on_episode: Callback | None = None, keep_rows: bool = True
    ) -> None:
        self.output = Path(output)
        try:
            self.output.mkdir(parents=True, exist_ok=True)
        except OSError as error:
            raise output_error(self.output, error) from None
        self.done: set[tuple[str, str, int]] = set()
        self.exact_done: set[tuple[str, str]] = set()
        #: Per file: its rows' key, the keys recorded, and how many bytes of it were read.
        self._files = {EPISODES_FILE: (row_key, self.done), EXACT_FILE: (cell_key, self.exact_done)}
        self._read = dict.fromkeys(self._files, 0)
        for name in self._files:
            self._drop_torn(name)
            self._catch_up(name)
        self.new_rows: list[dict[str, Any]] = []
        self.keep_rows = keep_rows
        self.on_episode = on_episode

    def __enter__(self) -> EpisodeLog:
        return self

    def __exit__(self, *exc: object) -> None:
        pass

    def _catch_up(self, name: str) -> None:
        """Record the complete rows appended to ``name`` since this log last read it."""
        path = self.output / name
        if not path.exists():
            return
        with path.open("rb") as f:
            f.seek(self._read[name])
            data = f.read()
        complete = data[: data.rfind(b"\n") + 1]
        self._read[name] += len(complete)
        for line in complete.decode().splitlines():
            try:
                row = json.loads(line)
            except json.JSONDecodeError:
                continue
            key, done = self._files[name]
            done.add(key(row))

    def _drop_torn(self, name: str) -> None:
        """Under the lock: drop the complete lines of ``name`` that are not JSON (a write torn
        in the middle of the file, e.g. by an older version or a copy), with a warning, so
        that their episodes are played again; the file is rewritten all-or-nothing."""
        path = self.output / name
        if not path.is_file():
            return
        try:
            with path.open("ab") as lock:
                if fcntl is not None:
                    fcntl.flock(lock, fcntl.LOCK_EX)
                data = path.read_bytes()
                end = data.rfind(b"\n") + 1  # a torn last line is _repair_tail's
                lines = data[:end].splitlines(keepends=True)
                kept = [line for line in lines if _is_json(line)]
                if len(kept) == len(lines):
                    return
                write_bytes(path, b"".join(kept) + data[end:])
        except OutputError:
            raise
        except OSError as error:
            raise output_error(path, error) from None
        warnings.warn(
            f"llmgym: dropped {len(lines) - len(kept)} torn line(s) from {path}; "
            "their episodes are played again.",
            RuntimeWarning,
            stacklevel=3,
        )

    def _append(self, name: str, row: dict[str, Any]) -> bool:
        """Append ``row`` to ``name`` under an exclusive lock unless its key is recorded, also
        by another process meanwhile (read first, under the lock); whether it was written."""
        key_of, done = self._files[name]
        key = key_of(row)
        if key in done:
            return False
        try:
            with (self.output / name).open("ab", buffering=0) as sink:
                if fcntl is not None:
                    fcntl.flock(sink, fcntl.LOCK_EX)  # released when the file closes
                self._repair_tail(name, sink)
                self._catch_up(name)
                if key in done:
                    return False
                text = (json.dumps(row) + "\n").encode()
                end = sink.seek(0, os.SEEK_END)
                try:
                    _write_all(sink, text)
                except OSError:  # a full disk: take back what got through, then say so
                    _truncate(sink, end)
                    raise
                self._read[name] += len(text)
        except OSError as error:  # read-only, full: one sentence naming the file
            raise output_error(self.output / name, error) from None
        done.add(key)
        return True

    def _repair_tail(self, name: str, sink: BinaryIO) -> None:
        """Under the lock, before appending: a last line without its newline is a write cut
        short (a kill, a full disk). A complete row there gets its newline; a fragment is cut
        off, so the next row starts on a line of its own and the fragment's episode, never
        recorded, is played again. Either way each episode ends up recorded exactly once."""
        end = sink.seek(0, os.SEEK_END)
        start = end
        with (self.output / name).open("rb") as f:
            while start > 0:
                step = min(start, TAIL_BLOCK)
                f.seek(start - step)
                block = f.read(step)
                cut = block.rfind(b"\n")
                if cut >= 0:
                    start = start - step + cut + 1
                    break
                start -= step
            if start == end:
                return
            f.seek(start)
            fragment = f.read(end - start)
        try:
            row = json.loads(fragment)
            self._files[name][0](row)
        except (ValueError, KeyError, TypeError, IndexError):
            _truncate(sink, start)
            return
        _write_all(sink, b"\n")

    def write(self, row: dict[str, Any]) -> bool:
        """Append ``row`` unless its episode is recorded already; whether it was written."""
        if not self._append(EPISODES_FILE, row):
            return False
        if self.keep_rows:
            self.new_rows.append(row)
        if self.on_episode is not None:
            self.on_episode(row)
        return True

    def write_exact(self, row: dict[str, Any]) -> None:
        """Append an ``exact_row`` unless its cell has one."""
        self._append(EXACT_FILE, row)


def _is_json(line: bytes) -> bool:
    """Whether ``line`` is JSON (a row, or a blank line)."""
    try:
        line.strip() and json.loads(line)
    except ValueError:  # JSONDecodeError, UnicodeDecodeError
        return False
    return True


def _write_all(sink: BinaryIO, data: bytes) -> None:
    """Write ``data`` to the unbuffered ``sink`` (which may take it in pieces)."""
    view = memoryview(data)
    while view:
        view = view[sink.write(view) or 0 :]


def _truncate(sink: BinaryIO, size: int) -> None:
    """Cut the file ``sink`` writes (unbuffered) back to ``size`` bytes."""
    os.truncate(sink.fileno(), size)
