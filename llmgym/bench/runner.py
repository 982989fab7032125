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

from collections.abc import Callable, Iterable, Iterator, Sequence, Sized
from pathlib import Path
from typing import Any

from llmgym.agents.registry import check_agent_name, make_agent
from llmgym.baselines.base import TextAgent
from llmgym.bench.records import EPISODES_FILE as EPISODES_FILE  # re-exported: the records
from llmgym.bench.records import EXACT_FILE as EXACT_FILE
from llmgym.bench.records import TAIL_BLOCK as TAIL_BLOCK
from llmgym.bench.records import Callback, EpisodeLog
from llmgym.bench.records import cell_key as cell_key
from llmgym.bench.records import load_rows as load_rows
from llmgym.bench.records import row_key as row_key
from llmgym.bench.suites import episodes_for
from llmgym.envs.registration import make_eval_env
from llmgym.errors import UnsupportedEnvError
from llmgym.evaluation.evaluator import evaluate
from llmgym.rollout import MAX_ENVS, Episode, check_count


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
