"""Playing a ``BenchRequest``: serially or on Ray, with its progress shown as it goes, a bar on a
terminal and lines in a log (``LogLines``), since the bar is drawn only on a terminal.

Example:
    >>> import io, tempfile
    >>> from rich.console import Console
    >>> from llmgym.bench.request import bench_request
    >>> from llmgym.bench.records import load_rows
    >>> out = tempfile.mkdtemp()
    >>> request = bench_request(envs="Text-CliffWalking-v1", agents="optimal", episodes=2, output=out)
    >>> play(request, Console(file=io.StringIO()))
    >>> [r["return"] for r in load_rows(request.output)]
    [-13.0, -13.0]
"""  # noqa: E501

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from llmgym.bench import ray_runner
from llmgym.bench.request import RAY_LOCAL, BenchRequest
from llmgym.bench.runner import run_bench
from llmgym.errors import UnsupportedEnvError

if TYPE_CHECKING:
    from rich.console import Console
    from rich.progress import Progress


class LogLines:
    """Progress as lines where the output is not a terminal (a log file, CI): one line as each
    cell starts, and one at most every ``every`` seconds as its episodes finish.

    >>> import io
    >>> from rich.console import Console
    >>> from rich.progress import Progress
    >>> log = LogLines(Progress(console=Console(file=io.StringIO())), every=0)
    >>> log.cell("Text-CliffWalking-v1 random", 2)
    >>> log.episode({"return": -13.0})
    >>> print(log.progress.console.file.getvalue(), end="")
    Text-CliffWalking-v1 random: 2 episodes to play
    Text-CliffWalking-v1 random: 1/2 episodes, last return -13.0
    """

    def __init__(self, progress: Progress, every: float = 60.0) -> None:
        self.progress, self.every = progress, every
        self.on = not progress.console.is_terminal
        self.name, self.total, self.done, self.last = "", 0, 0, 0.0

    def cell(self, name: str, n: int) -> None:
        self.name, self.total, self.done, self.last = name, n, 0, time.monotonic()
        if self.on:
            self.progress.console.print(f"{self.name}: {n} episodes to play", highlight=False)

    def episode(self, row: dict[str, object]) -> None:
        self.done += 1
        now = time.monotonic()
        if self.on and (now - self.last >= self.every or self.done == self.total):
            self.last = now
            self.progress.console.print(
                f"{self.name}: {self.done}/{self.total} episodes, last return {row['return']}",
                highlight=False,
            )


class Shown:
    """The runners' hooks (``on_cell``, ``on_skip``, ``on_episode``) drawing on a progress bar
    of ``total`` episodes and its ``LogLines``; ``skipped`` holds why each cell was left out."""

    def __init__(self, progress: Progress, total: int) -> None:
        self.progress, self.log = progress, LogLines(progress)
        self.task = progress.add_task("bench", total=total)
        self.skipped: list[str] = []

    def start(self, name: str, n: int) -> None:
        """A part of ``n`` episodes, named ``name``, begins."""
        self.progress.update(self.task, description=name)
        self.log.cell(name, n)

    def on_cell(self, env_id: str, agent: str, n: int) -> None:
        self.start(f"{env_id} {agent}", n)

    def on_skip(self, env_id: str, agent: str, reason: str) -> None:
        self.skipped.append(reason)
        self.progress.console.print(f"skip {agent} on {env_id}: {reason}")

    def on_episode(self, row: dict[str, object]) -> None:
        self.progress.advance(self.task)
        self.log.episode(row)


def play(request: BenchRequest, console: Console | None = None) -> None:
    """Play every episode ``request`` asks for that its output lacks (serially, or on Ray
    when ``request.ray`` is set), showing progress on ``console``; rows go to the output's
    ``episodes.jsonl``. ``UnsupportedEnvError`` when no agent could play any env."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn

    total = sum(len(s) for s in request.pending().values())
    columns = ("{task.description}", BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*columns, console=console) as progress:
        shown = Shown(progress, total)
        common = dict(
            episodes=request.episodes,
            seed=request.seed,
            output=request.output,
            batch_size=request.batch_size,
            keep_rows=False,
            on_episode=shown.on_episode,
            on_skip=shown.on_skip,
            env_kwargs=request.env_kwargs or None,
        )
        if request.ray is None:
            run_bench(request.env_ids, request.agents, on_cell=shown.on_cell, **common)
        else:
            shown.start(f"bench on Ray ({request.ray})", total)
            address = None if request.ray == RAY_LOCAL else request.ray
            ray_runner.run_bench_ray(request.env_ids, request.agents, address=address, **common)
    cells = len(request.env_ids) * len(request.agents)
    if shown.skipped and len(shown.skipped) == cells:  # nothing could be played
        reason = shown.skipped[0].rstrip(".")
        raise UnsupportedEnvError(f"No agent asked for can play these envs ({reason}).")
