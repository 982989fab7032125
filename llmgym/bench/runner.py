"""The benchmark runner: every agent plays the same ``Text-*`` envs on the same seeds.

Episode ``i`` of every (env, agent) cell starts with ``reset(seed=seed + i)``. Episodes run in
lockstep batches (one ``act_batch`` call per step for all live episodes, which lets an LLM
policy batch its forward passes) and each finished episode is appended to
``<output>/episodes.jsonl`` at once, so an interrupted run loses nothing: rerunning the same
command skips every episode already recorded, and a cell with none left is not even loaded.
Rows are keyed by (env, agent, seed) and ``EpisodeLog`` writes each key once, whoever plays
it (this loop, or Ray workers through ``llmgym.bench.ray_runner``). The random agent is
seeded per episode (``seed_episodes``, see ``seed_rows``), so an episode's row does not depend
on which episodes share its batch: any split of the seeds gives the same rows (a sampling LLM
agent restarts its sampler per batch: the same batches give the same rows). LLM agents act
greedily (the leaderboard compares greedy policies; ``llm:NAME,greedy=false`` samples).
Where the env has a known transition model (``llmgym.evaluation.exact``) each cell also gets the
exact expected return of the agent's greedy policy, once, in ``<output>/exact.jsonl`` (not for
the random agent, which has no deterministic policy). ``env_kwargs`` (``gym.make`` options such
as a variant's ``action_names="alt"``) make every env of the bench, reach the agents as
``make_agent``'s ``env_kwargs``, and are recorded in each row (rows of the plain envs have none).

Example:
    >>> import tempfile
    >>> out = Path(tempfile.mkdtemp())
    >>> rows = run_bench(["Text-CliffWalking-v1"], ["optimal"], episodes=2, output=out)
    >>> [(r["seed"], r["return"], r["length"], r["parse_rate"]) for r in rows]
    [(0, -13.0, 13, 1.0), (1, -13.0, 13, 1.0)]
    >>> run_bench(["Text-CliffWalking-v1"], ["optimal"], episodes=2, output=out)
    []
    >>> [(r["agent"], r["exact_return"], r["horizon"]) for r in load_rows(out, EXACT_FILE)]
    [('optimal', -13.0, 200)]
"""

from __future__ import annotations

import json
import os
import warnings
from collections.abc import Callable, Iterable, Iterator, Sequence, Sized
from pathlib import Path
from typing import Any, BinaryIO

from llmgym.agents.registry import check_agent_name, make_agent
from llmgym.baselines.base import TextAgent
from llmgym.bench.suites import episodes_for
from llmgym.envs.registration import make_eval_env
from llmgym.errors import OutputError, UnsupportedEnvError
from llmgym.evaluation.evaluator import evaluate
from llmgym.files import output_error, write_bytes
from llmgym.rollout import MAX_ENVS, Episode, check_count

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


def seed_rows(agent: TextAgent, seeds: Sequence[int]) -> None:
    """Tell an agent that samples (one with a ``seed_episodes`` method, like ``random``) the
    episode seed of each row of its next ``act_batch`` call; other agents need nothing."""
    seed_episodes = getattr(agent, "seed_episodes", None)
    if seed_episodes is not None:
        seed_episodes(seeds)


class PendingSeeds:
    """The seeds ``range(start, stop)`` of one cell that ``done`` lacked when made, read
    lazily: iterating yields them one at a time and ``len`` counts them, so no list of the
    episode count asked for is ever built (only the recorded seeds are held).

    Example:
        >>> import itertools
        >>> todo = PendingSeeds("E", "a", 0, 10**9, {("E", "a", 1), ("E", "b", 2)})
        >>> len(todo), list(itertools.islice(todo, 3))
        (999999999, [0, 2, 3])
    """

    def __init__(
        self,
        env_id: str,
        agent: str,
        start: int,
        stop: int,
        done: set[tuple[str, str, int]],
    ) -> None:
        self.start, self.stop = start, stop
        self.recorded = frozenset(
            s for e, a, s in done if e == env_id and a == agent and start <= s < stop
        )

    def __iter__(self) -> Iterator[int]:
        return (s for s in range(self.start, self.stop) if s not in self.recorded)

    def __len__(self) -> int:
        return self.stop - self.start - len(self.recorded)

    def __bool__(self) -> bool:
        return len(self) > 0


def pending_seeds(
    env_ids: Sequence[str],
    agents: Sequence[str],
    episodes: int | None,
    seed: int,
    done: set[tuple[str, str, int]],
) -> dict[tuple[str, str], PendingSeeds]:
    """Seeds still to run for each (env, agent) cell, lazily (see ``PendingSeeds``); an
    ``episodes`` count above ``MAX_EPISODES`` is refused (``ConfigError``)."""
    if episodes is not None:
        check_count(episodes, "--episodes")
    return {
        (env_id, agent): PendingSeeds(
            env_id, agent, seed, seed + episodes_for(env_id, episodes), done
        )
        for env_id in env_ids
        for agent in agents
    }


def variant_fields(env_kwargs: dict[str, Any] | None) -> dict[str, Any]:
    """What a row records of the bench's env kwargs: ``{"env_kwargs": ...}``, or nothing for
    the plain envs (so their rows read as before).

    Example:
        >>> variant_fields({"action_names": "alt"}), variant_fields(None)
        ({'env_kwargs': {'action_names': 'alt'}}, {})
    """
    return {"env_kwargs": dict(env_kwargs)} if env_kwargs else {}


def run_episodes(
    env_id: str,
    agent: TextAgent,
    seeds: Iterable[int],
    write: Callback,
    batch_size: int = 32,
    env_kwargs: dict[str, Any] | None = None,
) -> None:
    """Play one episode per seed, ``batch_size`` at a time, on ``make_eval_env(env_id,
    **env_kwargs)``, and ``write`` each row as its episode ends. Wall time of a batched step
    is shared equally by the live episodes. ``seeds`` is read lazily; nothing is kept once
    written."""
    count = len(seeds) if isinstance(seeds, Sized) else batch_size
    envs = [make_eval_env(env_id, **(env_kwargs or {})) for _ in range(min(batch_size, count))]
    reset = getattr(agent, "reset", None)

    def write_row(_slot: int, episode: Episode) -> None:
        write(
            {
                "env_id": env_id,
                "agent": agent.name,
                "seed": episode.seed,
                "return": episode.ret,
                "length": episode.length,
                "parse_rate": episode.parse_rate,
                "wall_s": round(episode.wall_s, 6),
                "truncated": episode.truncated,
                **variant_fields(env_kwargs),
            }
        )

    evaluate(
        agent.act_batch,
        envs,
        seeds,
        batch_size=batch_size,
        # a new batch: fresh state, and a sampler reseeded by seed_rows
        before_batch=(lambda: reset(None)) if reset is not None else None,
        before_act=lambda live: seed_rows(agent, [e.seed for e in live]),
        on_end=write_row,
        keep_returns=False,
    )


def exact_row(
    env_id: str, agent_name: str, agent: TextAgent, env_kwargs: dict[str, Any] | None = None
) -> dict[str, Any]:
    """The exact expected return of ``agent``'s greedy policy on ``env_id`` (made with
    ``env_kwargs``) as a row; on a FrozenLake map set, the mean over its ``maps``."""
    from llmgym.evaluation.exact import agent_act, exact_value

    result = exact_value(env_id, agent_act(agent), env_kwargs)
    return {
        "env_id": env_id,
        "agent": agent_name,
        "exact_return": result.value,
        "states": result.states,
        "parse_rate": result.parse_rate,
        "horizon": result.horizon,
        **({"maps": result.maps} if result.maps > 1 else {}),
        **variant_fields(env_kwargs),
    }


def wants_exact(
    env_id: str,
    agent_name: str,
    done: set[tuple[str, str]],
    env_kwargs: dict[str, Any] | None = None,
) -> bool:
    """Whether the cell needs an exact row: the env (made with ``env_kwargs``) has a
    transition model, the agent a greedy policy (not ``random``), and ``done`` lacks it."""
    from llmgym.evaluation.exact import supports_exact

    if agent_name == "random" or (env_id, agent_name) in done:
        return False
    return supports_exact(env_id, env_kwargs)


def bench_agent(
    name: str, env_id: str, seed: int, env_kwargs: dict[str, Any] | None = None
) -> TextAgent:
    """The agent ``name`` as the bench plays it: an LLM greedily unless its name says
    ``greedy=false`` (other agents ignore the option); ``env_kwargs`` are the bench's env
    options (a baseline plans on the base env they make and answers in the variant's names)."""
    if env_kwargs:
        return make_agent(name, env_id, seed=seed, greedy=True, env_kwargs=dict(env_kwargs))
    return make_agent(name, env_id, seed=seed, greedy=True)


def run_bench(
    env_ids: Sequence[str],
    agents: Sequence[str],
    *,
    episodes: int | None = None,
    seed: int = 0,
    output: Path = Path("benchmarks/results"),
    batch_size: int = 32,
    on_episode: Callback | None = None,
    on_cell: Callable[[str, str, int], None] | None = None,
    on_skip: Callable[[str, str, str], None] | None = None,
    keep_rows: bool = True,
    env_kwargs: dict[str, Any] | None = None,
) -> list[dict[str, Any]]:
    """Run every (env, agent) cell on seeds ``seed, seed + 1, ...`` and return the new rows;
    ``env_kwargs`` go to ``gym.make`` of every env (and to the agents, see ``bench_agent``).

    ``episodes`` overrides the per-env counts of ``llmgym.bench.suites.EPISODES``. Hooks:
    ``on_cell(env, agent, n)`` before a cell runs n episodes, ``on_episode(row)`` after each
    episode, ``on_skip(env, agent, reason)`` when an agent cannot play an env (DQN on
    continuous actions, no heuristic for it: ``UnsupportedEnvError``); such cells are left
    out, the others run. An agent that cannot be built at all (a broken name, a missing run)
    raises its ``AgentError``.
    ``keep_rows=False`` returns no rows (they are in ``episodes.jsonl``), so memory does not
    grow with the rows written; seeds are read lazily, never listed.
    """
    for name in agents:
        check_agent_name(name)
    check_count(batch_size, "--batch-size", MAX_ENVS)
    with EpisodeLog(output, on_episode, keep_rows=keep_rows) as log:
        todo = pending_seeds(env_ids, agents, episodes, seed, log.done)
        for (env_id, agent_name), seeds in todo.items():
            exact = wants_exact(env_id, agent_name, log.exact_done, env_kwargs)
            if not seeds and not exact:
                continue
            try:
                agent = bench_agent(agent_name, env_id, seed, env_kwargs)
            except UnsupportedEnvError as err:  # any other AgentError stops the bench
                if on_skip is None:
                    raise
                on_skip(env_id, agent_name, str(err))
                continue
            if on_cell is not None:
                on_cell(env_id, agent_name, len(seeds))
            run_episodes(env_id, agent, seeds, log.write, batch_size, env_kwargs)
            if exact:
                log.write_exact(exact_row(env_id, agent_name, agent, env_kwargs))
    return log.new_rows
