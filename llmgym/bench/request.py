"""What one ``llmgym bench`` asks for, checked before anything is played: its agents and envs,
seeds, counts and output folder, and the command line that makes it again.

A folder holds one bench: one ``--seed`` for every cell (env, agent), one episode count per
cell and one set of ``--env-kwarg`` options for every env, recorded in ``bench.json``. A rerun
resumes it, and may add cells (other envs or agents on the same seed and env kwargs); a rerun
that would play a cell on other seeds (another ``--seed``, more or fewer ``--episodes``) or
other env kwargs (a variant, e.g. ``action_names=alt``, after the plain envs) is refused by
``claim_folder`` before anything is played, unless ``fresh`` clears the folder's bench files
first, so the rows of two benches never mix.

Example:
    >>> request = bench_request(envs="Text-Taxi-v4", agents="random,optimal", episodes=3)
    >>> request.env_ids, request.agents, request.seeds("Text-Taxi-v4")
    (['Text-Taxi-v4'], ['random', 'optimal'], range(0, 3))
    >>> request.command
    'llmgym bench --envs Text-Taxi-v4 --agents random,optimal --seed 0 --episodes 3 --output runs/bench'
"""  # noqa: E501

from __future__ import annotations

import importlib.util
import json
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from llmgym.agents.registry import check_agent_name, split_agent_names
from llmgym.bench.records import EPISODES_FILE, EXACT_FILE, load_rows, row_key
from llmgym.bench.runner import PendingSeeds, pending_seeds
from llmgym.bench.suites import episodes_for, suite_envs
from llmgym.envs.registration import check_env_id, check_env_kwargs
from llmgym.errors import ConfigError, OutputError
from llmgym.files import output_error, write_text
from llmgym.rollout import MAX_ENVS, check_count

#: What a bare ``--ray`` means: the Ray session ``ray.init()`` finds or starts on this machine.
RAY_LOCAL = "local"
#: Where ``llmgym bench`` writes without ``--output``: outside the repository's committed
#: results (``runs/`` is git-ignored); the committed leaderboard's scripts name theirs.
DEFAULT_OUTPUT = "runs/bench"
#: The folder's bench: its seed and the episode count of each cell, ``{env: {agent: n}}``.
BENCH_FILE = "bench.json"
#: What ``--fresh`` removes: the files a bench writes in its folder (nothing else).
BENCH_FILES = (
    EPISODES_FILE,
    EXACT_FILE,
    BENCH_FILE,
    "leaderboard.md",
    "leaderboard.png",
    "leaderboard_cost.png",
)


def agent_names(text: str) -> list[str]:
    """The agents ``--agents`` names, each well formed (``AgentError`` otherwise, loading
    nothing); ``ConfigError`` for none, an empty name or a name given twice.

    Example:
        >>> agent_names("random, llm:smollm2-135m,mode=generate")
        ['random', 'llm:smollm2-135m,mode=generate']
        >>> agent_names("random,random")
        Traceback (most recent call last):
        ...
        llmgym.errors.ConfigError: --agents 'random,random' names 'random' twice; name each agent once.
    """  # noqa: E501
    names = split_agent_names(text)
    if not names:
        raise ConfigError(f"--agents {text!r} names no agent; pass e.g. --agents random,optimal.")
    if any(not part.strip() for part in text.split(",")):
        raise ConfigError(
            f"--agents {text!r} has an empty name (a comma too many); "
            "pass e.g. --agents random,optimal."
        )
    twice = next((name for i, name in enumerate(names) if name in names[:i]), None)
    if twice is not None:
        raise ConfigError(f"--agents {text!r} names {twice!r} twice; name each agent once.")
    for name in names:
        check_agent_name(name)  # an llm: agent's options and run too (loads nothing)
    return names


def env_names(envs: str | None, suite: str) -> list[str]:
    """The env ids of ``--envs`` (comma-separated), else of ``--suite``; ``ConfigError`` for
    none, an unknown suite or an env id that is not registered.

    Example:
        >>> env_names(" Text-Taxi-v4, ", "classic"), env_names(None, "classic")[:1]
        (['Text-Taxi-v4'], ['Text-CartPole-v1'])
    """

    env_ids = [e.strip() for e in envs.split(",") if e.strip()] if envs else []
    if envs is not None and not env_ids:
        raise ConfigError(f"--envs {envs!r} names no env; pass e.g. --envs Text-Blackjack-v1.")
    env_ids = env_ids or suite_envs(suite)
    if not env_ids:
        raise ConfigError(f"Suite {suite!r} has no envs yet; pass --envs or another --suite.")
    for env_id in env_ids:
        check_env_id(env_id)
    return env_ids


@dataclass(frozen=True)
class BenchRequest:
    """A checked bench: ``agents`` play ``env_ids`` on seeds ``seed, seed + 1, ...``
    (``episodes`` per env, else the suite's count), ``batch_size`` at a time, into ``output``;
    ``ray`` is the Ray address (``RAY_LOCAL``: here) or ``None`` (serial). ``envs`` is the
    ``--envs`` text (``None``: the suite named them) for ``command``. ``env_kwargs`` (the
    ``--env-kwarg`` options) make every env of the bench."""

    env_ids: list[str]
    agents: list[str]
    seed: int = 0
    episodes: int | None = None
    output: Path = Path(DEFAULT_OUTPUT)
    batch_size: int = 32
    ray: str | None = None
    envs: str | None = None
    suite: str = "classic"
    env_kwargs: dict[str, Any] = field(default_factory=dict)

    def seeds(self, env_id: str) -> range:
        """The seeds this request plays on ``env_id``, the only ones its leaderboard counts."""
        return range(self.seed, self.seed + episodes_for(env_id, self.episodes))

    @property
    def command(self) -> str:
        """The ``llmgym bench`` command line (the leaderboard's "Made by" line): ``--envs``
        where it replaced the suite, options at their defaults left out.

        Example:
            >>> BenchRequest(["Text-Taxi-v4"], ["optimal"], 1, None, Path("o"), 10, "local").command
            'llmgym bench --suite classic --agents optimal --seed 1 --output o --batch-size 10 --ray'
        """  # noqa: E501
        where = f"--envs {shlex.quote(self.envs)}" if self.envs else f"--suite {self.suite}"
        parts = ["llmgym bench", where, f"--agents {shlex.quote(','.join(self.agents))}"]
        parts.append(f"--seed {self.seed}")
        if self.episodes is not None:
            parts.append(f"--episodes {self.episodes}")
        parts.append(f"--output {shlex.quote(str(self.output))}")
        if self.batch_size != 32:
            parts.append(f"--batch-size {self.batch_size}")
        if self.ray is not None:
            parts.append("--ray" if self.ray == RAY_LOCAL else f"--ray {shlex.quote(self.ray)}")
        for key, value in self.env_kwargs.items():
            text = value if isinstance(value, str) else json.dumps(value)
            parts.append(f"--env-kwarg {shlex.quote(f'{key}={text}')}")
        return " ".join(parts)

    def cells(self) -> dict[str, dict[str, int]]:
        """The episode count of each cell this request plays, ``{env: {agent: n}}``."""
        return {e: dict.fromkeys(self.agents, episodes_for(e, self.episodes)) for e in self.env_ids}

    def other_bench(self) -> str | None:
        """How the bench ``output`` holds differs from this one (a phrase), or None when it
        holds none, this one (to resume) or one this one only adds cells to. A folder written
        before ``bench.json`` is judged by its rows."""
        held = _read_bench(self.output / BENCH_FILE)
        if held is not None and held.get("seed") != self.seed:
            return f"seed {held.get('seed')}, not {self.seed}"
        if held is not None and held.get("env_kwargs", {}) != self.env_kwargs:
            return f"env kwargs {_kwargs_text(held.get('env_kwargs', {}))}, not " + _kwargs_text(
                self.env_kwargs
            )
        counts = held.get("episodes", {}) if held is not None else {}
        for env_id, agents in self.cells().items():
            for agent, n in agents.items():
                had = counts.get(env_id, {}).get(agent, n)
                if had != n:
                    return f"{had} episodes of {agent} on {env_id}, not {n}"
        for row in load_rows(self.output):
            if not isinstance(row, dict) or not isinstance(row.get("seed"), int):
                continue  # not a row llmgym wrote: pending() refuses the file
            seed, env_id, agent = row["seed"], row.get("env_id"), row.get("agent")
            if row.get("env_kwargs", {}) != self.env_kwargs:
                kwargs = _kwargs_text(row.get("env_kwargs", {}))
                return f"{agent} on {env_id} with env kwargs {kwargs}"
            mine = env_id in self.env_ids and agent in self.agents
            if seed not in self.seeds(env_id) if mine else seed < self.seed:
                return f"seed {seed} of {agent} on {env_id}, outside this bench's seeds"
        return None

    def claim_folder(self, fresh: bool = False) -> None:
        """Make ``output`` this bench's folder: with ``fresh``, remove the bench files it holds
        first; else ``ConfigError`` when it holds another bench (``other_bench``). Then record
        this bench's cells in ``bench.json`` (``OutputError`` naming the path on a disk error)."""
        try:
            self.output.mkdir(parents=True, exist_ok=True)
            for name in BENCH_FILES if fresh else ():
                (self.output / name).unlink(missing_ok=True)
        except OSError as error:
            raise output_error(self.output, error) from None
        why = self.other_bench()
        if why is not None:
            raise ConfigError(
                f"This folder ({self.output}) holds another bench ({why}): pass another "
                "--output or --fresh."
            )
        counts = (_read_bench(self.output / BENCH_FILE) or {}).get("episodes", {})
        for env_id, agents in self.cells().items():
            counts[env_id] = {**counts.get(env_id, {}), **agents}
        held = {"seed": self.seed, "episodes": counts}
        if self.env_kwargs:  # a plain bench's file reads as before
            held["env_kwargs"] = self.env_kwargs
        text = json.dumps(held, indent=1) + "\n"
        write_text(self.output / BENCH_FILE, text)

    def pending(self) -> dict[tuple[str, str], PendingSeeds]:
        """The seeds each (env, agent) cell has still to play, after the rows ``output``
        holds; ``OutputError`` when its ``episodes.jsonl`` has rows llmgym did not write."""
        try:
            done = {row_key(r) for r in load_rows(self.output)}
        except (KeyError, TypeError):
            raise OutputError(
                f"{self.output / 'episodes.jsonl'} has rows llmgym did not write; move it."
            ) from None
        return pending_seeds(self.env_ids, self.agents, self.episodes, self.seed, done)


def _kwargs_text(env_kwargs: dict[str, Any]) -> str:
    """Env kwargs as a phrase: ``KEY=VALUE`` pairs, or ``none``.

    Example:
        >>> _kwargs_text({"action_names": "alt", "is_slippery": False}), _kwargs_text({})
        ('action_names=alt is_slippery=false', 'none')
    """
    pairs = [f"{k}={v if isinstance(v, str) else json.dumps(v)}" for k, v in env_kwargs.items()]
    return " ".join(pairs) or "none"


def _read_bench(path: Path) -> dict | None:
    """The bench ``path`` records, or None (no file, or not one llmgym wrote)."""
    try:
        held = json.loads(path.read_bytes())
    except (OSError, ValueError):
        return None
    if not isinstance(held, dict) or not isinstance(held.get("episodes"), dict):
        return None
    return held if all(isinstance(v, dict) for v in held["episodes"].values()) else None


def bench_request(
    *,
    envs: str | None = None,
    suite: str = "classic",
    agents: str = "random,optimal",
    seed: int = 0,
    episodes: int | None = None,
    output: str | Path | None = None,
    batch_size: int = 32,
    ray: str | None = None,
    env_kwargs: dict[str, Any] | None = None,
) -> BenchRequest:
    """The ``BenchRequest`` of ``llmgym bench``'s options, checked (``AgentError`` or
    ``ConfigError`` in one sentence); ``output=None`` is ``DEFAULT_OUTPUT``. ``env_kwargs``
    must make every env (``check_env_kwargs``, which makes each once)."""
    names = agent_names(agents)
    env_ids = env_names(envs, suite)
    if episodes is not None:
        check_count(episodes, "--episodes")
    check_count(batch_size, "--batch-size", MAX_ENVS)
    if ray is not None and importlib.util.find_spec("ray") is None:
        raise ConfigError('ray is not installed: pip install "llmgym[ray]".')
    kwargs = dict(env_kwargs or {})
    if kwargs:
        for env_id in env_ids:
            check_env_kwargs(env_id, kwargs)
    out = Path(output) if output else Path(DEFAULT_OUTPUT)
    return BenchRequest(env_ids, names, seed, episodes, out, batch_size, ray, envs, suite, kwargs)
