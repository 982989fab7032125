"""The bench on Ray: every (env, agent, chunk of seeds) is a Ray task.

``run_bench_ray`` splits each cell's pending seeds into chunks of ``chunk_size`` (default
``batch_size``) and submits one task per chunk; a worker plays its chunk with the serial
runner's ``run_episodes`` and returns the rows. Only the driver writes: rows go through the
same ``EpisodeLog`` as the serial bench, as tasks finish, so ``episodes.jsonl`` resumes the
same way and an episode is recorded once even if a retried task plays it again. A task whose
worker dies is retried (``MAX_RETRIES``); an error the agent raises is not.

Each worker process keeps the agents it built (``cached_agent``): an LLM agent, which plays
any env, is built once per spec and worker, so its model is loaded once; a reference agent
once per (spec, env). Agents that sample are seeded per episode (see
``llmgym.bench.runner``), so the rows equal the serial run's, timing aside, whatever the
chunks; a sampling LLM agent restarts its sampler per batch, so its rows equal the serial
run's when ``chunk_size`` is a multiple of ``batch_size`` (the default) on a fresh output.

Ray is optional (``pip install "llmgym[ray]"``); this module imports it only when called. On
a cluster, every node needs llmgym (and the agents' models) installed.

Example:
    >>> list(chunks(range(5), 2))
    [[0, 1], [2, 3], [4]]
"""

from __future__ import annotations

import itertools
import json
import socket
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

from llmgym.agents.registry import TextAgent, check_agent_name
from llmgym.bench.records import Callback, EpisodeLog
from llmgym.bench.runner import (
    bench_agent,
    exact_row,
    pending_seeds,
    run_episodes,
    wants_exact,
)
from llmgym.errors import RayBenchError, UnsupportedEnvError
from llmgym.rollout import MAX_ENVS, MAX_EPISODES, check_count

#: Tasks submitted and not yet collected, at most: the rest are submitted as these finish, so
#: the driver's memory does not grow with the episode count asked for.
MAX_IN_FLIGHT = 256
#: How often Ray reruns a task whose worker process died (killed, out of memory, node lost).
MAX_RETRIES = 3
#: Seconds a cluster's head (``HOST:PORT``) has to answer before the bench gives up on it:
#: ``ray.init`` itself retries an address that does not answer for as long as it runs.
CONNECT_TIMEOUT_S = 10.0
#: The client preface of HTTP/2 and an empty SETTINGS frame: a gRPC server (a Ray head's GCS)
#: answers with a SETTINGS frame of its own.
_H2_HELLO = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + bytes([0, 0, 0, 4, 0, 0, 0, 0, 0])
#: A worker's agents, by (name, env or None for LLM agents, seed); see ``cached_agent``.
_AGENTS: dict[tuple[str, str | None, int], TextAgent] = {}


def chunks(seeds: Iterable[int], size: int) -> Iterator[list[int]]:
    """``seeds`` in consecutive pieces of ``size``, read lazily."""
    upcoming = iter(seeds)
    while piece := list(itertools.islice(upcoming, size)):
        yield piece


def check_head(address: str | None, timeout: float = CONNECT_TIMEOUT_S) -> None:
    """Raise ``RayBenchError`` in one sentence unless ``address`` (``HOST:PORT``) answers as a
    gRPC server, as a Ray head's GCS does, within ``timeout`` seconds; ``None``, ``auto``,
    ``local`` and ``ray://`` addresses are left to Ray.

    Example:
        >>> try:
        ...     check_head("127.0.0.1:9", timeout=1)
        ... except RayBenchError as error:
        ...     print(str(error)[:42])
        No Ray cluster answers at 127.0.0.1:9 (Con
    """
    if address is None or address in ("auto", "local") or "://" in address:
        return
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise RayBenchError(f"Ray address {address!r} is not HOST:PORT, auto or local.")
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout) as conn:
            conn.settimeout(timeout)
            conn.sendall(_H2_HELLO)
            answer = conn.recv(9)
    except OSError as error:
        why = error.strerror or type(error).__name__
        if isinstance(error, TimeoutError):
            why = f"nothing within {timeout:g} s"
        raise RayBenchError(
            f"No Ray cluster answers at {address} ({why}); start one there with `ray start "
            "--head`, or check the address."
        ) from None
    if len(answer) < 9 or answer[3] != 4:  # not a SETTINGS frame: not gRPC
        raise RayBenchError(
            f"{address} answers, but not as a Ray cluster's head (its GCS port, 6379 by "
            "default); check the address."
        )


def cached_agent(
    name: str, env_id: str, seed: int, env_kwargs: dict[str, Any] | None = None
) -> TextAgent:
    """This process's agent for a cell, built on first use. LLM agents do not depend on the
    env, so one per spec serves every env (one loaded model per worker); a baseline is built
    per env and env kwargs (``bench_agent``)."""
    env_key = None if name.partition(":")[0] == "llm" else env_id
    key = (name, env_key, seed, json.dumps(env_kwargs or {}, sort_keys=True))
    if key not in _AGENTS:
        _AGENTS[key] = bench_agent(name, env_id, seed, env_kwargs)
    return _AGENTS[key]


def play_chunk(
    env_id: str,
    agent_name: str,
    seeds: Sequence[int],
    seed: int,
    batch_size: int,
    env_kwargs: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A task: ``{"rows": [...]}`` for the episodes ``seeds``, or ``{"skip": reason}`` when
    the agent cannot play the env."""
    try:
        agent = cached_agent(agent_name, env_id, seed, env_kwargs)
    except UnsupportedEnvError as err:
        return {"skip": str(err)}
    rows: list[dict[str, Any]] = []
    run_episodes(env_id, agent, seeds, rows.append, batch_size, env_kwargs)
    return {"rows": rows}


def exact_chunk(
    env_id: str, agent_name: str, seed: int, env_kwargs: dict[str, Any] | None = None
) -> dict[str, Any]:
    """A task: ``{"exact": exact_row}`` for a cell, or ``{"skip": reason}``."""
    try:
        agent = cached_agent(agent_name, env_id, seed, env_kwargs)
    except UnsupportedEnvError as err:
        return {"skip": str(err)}
    return {"exact": exact_row(env_id, agent_name, agent, env_kwargs)}


def _cache_sb3(
    agent_name: str, env_id: str, seed: int, env_kwargs: dict[str, Any] | None = None
) -> None:
    """Train (or load) an SB3 agent's model once on the driver, so its file is cached before
    the workers build the agent; a cell the agent cannot play is left to the task to skip."""
    try:
        bench_agent(agent_name, env_id, seed, env_kwargs)
    except UnsupportedEnvError:
        pass


def _result(ray: Any, ref: Any, cell: tuple[str, str]) -> dict[str, Any]:
    """A task's result; the agent's own error is raised as itself, a dead worker as one
    sentence."""
    try:
        return ray.get(ref)
    except ray.exceptions.RayTaskError as err:
        cause = getattr(err, "cause", None)
        raise cause if isinstance(cause, Exception) else RayBenchError(str(err)) from None
    except ray.exceptions.RayError as err:
        raise RayBenchError(
            f"The Ray task for {cell[1]} on {cell[0]} failed after {MAX_RETRIES} retries "
            f"({type(err).__name__}); rerun to resume."
        ) from None


def run_bench_ray(
    env_ids: Sequence[str],
    agents: Sequence[str],
    *,
    episodes: int | None = None,
    seed: int = 0,
    output: Path = Path("benchmarks/results"),
    batch_size: int = 32,
    chunk_size: int | None = None,
    address: str | None = None,
    on_episode: Callback | None = None,
    on_skip: Callable[[str, str, str], None] | None = None,
    keep_rows: bool = True,
    env_kwargs: dict[str, Any] | None = None,
) -> list[dict[str, Any]]:
    """``llmgym.bench.runner.run_bench`` with the cells' chunks as Ray tasks; the new rows.
    ``env_kwargs`` make every env, as in ``run_bench``.

    Uses the Ray session already started in this process, else ``ray.init(address=address)``
    (``None``: the cluster ``RAY_ADDRESS`` names, else the one this machine runs, else a new
    local one; ``"local"``: always a new local one; ``"auto"``: the cluster this machine
    joined; ``"HOST:6379"``: a cluster's head), shut down again at the end. The CLI's
    bare ``--ray`` (or ``--ray local``) passes ``None``, so it joins a running cluster when
    there is one.
    ``on_skip(env, agent, reason)`` is called once per cell an agent cannot play. At most
    ``MAX_IN_FLIGHT`` tasks are submitted at a time; ``keep_rows=False`` returns no rows
    (memory then does not grow with the episodes played, beyond their keys).

    SB3 agents whose model is not cached yet are trained once here, on the driver, before any
    task starts: the workers then only load the cached file (instead of every chunk of a
    cell training the same model at once).
    """
    import ray

    for name in agents:
        check_agent_name(name)
    check_count(batch_size, "--batch-size", MAX_ENVS)
    check_count(chunk_size or batch_size, "chunk_size", MAX_EPISODES)
    started = not ray.is_initialized()
    if started:
        check_head(address)
        try:
            ray.init(address=address, include_dashboard=False, log_to_driver=False)
        except (ConnectionError, RuntimeError, ValueError) as error:
            why = (str(error).splitlines() or [type(error).__name__])[0][:200]
            raise RayBenchError(
                f"Ray could not join or start a cluster at {address or 'this machine'} ({why})."
            ) from None
    options = {"max_retries": MAX_RETRIES, "retry_exceptions": False}
    play = ray.remote(**options)(play_chunk)
    exact = ray.remote(**options)(exact_chunk)
    pending: dict[Any, tuple[str, str]] = {}
    try:
        with EpisodeLog(output, on_episode, keep_rows=keep_rows) as log:
            todo = pending_seeds(env_ids, agents, episodes, seed, log.done)
            for env_id, agent_name in todo:
                if agent_name.startswith("sb3"):
                    _cache_sb3(agent_name, env_id, seed, env_kwargs)

            def tasks() -> Iterator[tuple[Any, tuple[str, str]]]:
                for (env_id, agent_name), seeds in todo.items():
                    cell = (env_id, agent_name)
                    for part in chunks(seeds, chunk_size or batch_size):
                        args = (env_id, agent_name, part, seed, batch_size, env_kwargs)
                        yield play.remote(*args), cell
                    if wants_exact(env_id, agent_name, log.exact_done, env_kwargs):
                        yield exact.remote(env_id, agent_name, seed, env_kwargs), cell

            submit = tasks()
            pending.update(itertools.islice(submit, MAX_IN_FLIGHT))
            skipped: set[tuple[str, str]] = set()
            while pending:
                (ref,), _ = ray.wait(list(pending), num_returns=1)
                cell = pending.pop(ref)
                result = _result(ray, ref, cell)
                pending.update(itertools.islice(submit, 1))
                if "skip" in result and cell not in skipped:
                    skipped.add(cell)
                    if on_skip is None:
                        raise UnsupportedEnvError(result["skip"])
                    on_skip(*cell, result["skip"])
                for row in result.get("rows", []):
                    log.write(row)
                if "exact" in result:
                    log.write_exact(result["exact"])
        return log.new_rows
    finally:
        for ref in pending:
            ray.cancel(ref, force=True)
        if started:
            ray.shutdown()
