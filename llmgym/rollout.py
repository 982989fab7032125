"""The one episode loop: K text envs played in lockstep, one episode per explicit seed.

Training (every trainer), ``llmgym eval``, ``llmgym bench``, SFT demo collection and the
reference returns all play through :func:`play`. An *actor* is any callable
``act(observations, infos) -> answers`` over the live episodes of a turn; an answer is the text
the env parses, or an object whose ``text`` is (an ``LLMPolicy`` sample, which the trainers
keep for the update). Episode ``i`` is reset with ``seeds[i]`` whatever the number of envs,
so results depend on the seeds, not on how episodes share the envs.

Example:
    >>> import gymnasium as gym, llmgym
    >>> envs = [gym.make("Text-CliffWalking-v1") for _ in range(2)]
    >>> def always_up(observations, infos):
    ...     return ['{"action": "UP"}' for _ in observations]
    >>> episodes = play(always_up, envs, seeds=[0, 1, 2], max_steps=3)
    >>> [(e.seed, e.length, e.ret, e.capped) for e in episodes]
    [(0, 3, -3.0, True), (1, 3, -3.0, True), (2, 3, -3.0, True)]
    >>> episodes[0].steps[0].action, episodes[0].steps[0].num_actions
    ('UP', 4)
    >>> [(e.seed, e.length, e.capped) for e in play(always_up, envs, [0, 1, 2], max_total_steps=5)]
    [(0, 3, True), (1, 2, True)]
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym
import numpy as np

from llmgym.errors import ConfigError

#: The most episodes one command may ask for, and the most env steps (timesteps) one training
#: may: larger counts are refused with one sentence (``check_count``), not queued.
MAX_EPISODES = 10**9
MAX_TIMESTEPS = 10**12
#: The most envs played at once (``--num-envs``, ``--batch-size``): each holds its own state.
MAX_ENVS = 4096

#: ``act(observations, infos)`` -> one answer (text, or an object with ``.text``) per live env.
Actor = Callable[[list[str], list[dict[str, Any]]], Sequence[Any]]


@dataclass
class Step:
    """One turn: what the actor answered (``sample``: its text, or an object whose ``text`` the
    env saw) to ``observation``, and what followed (``info``: the env's info after the step,
    with its ``parse`` result). A record of the rollout: trainers read it and build their own
    batch (advantages, returns, values) from it."""

    sample: Any
    reward: float
    terminated: bool
    truncated: bool
    parse_ok: bool
    action: str = ""
    num_actions: int = 0
    observation: str = ""
    info: dict[str, Any] = field(default_factory=dict)
    raw_observation: Any = None
    """The base env's observation the answer was to (``info["raw_obs"]`` when acting)."""

    @property
    def done(self) -> bool:
        return self.terminated or self.truncated


@dataclass
class Episode:
    """An episode: its env seed, its turns, its group (GRPO), where it ended, whether
    ``max_steps`` cut it (``capped``; its last step is then marked truncated) and its share of
    the wall time of the turns it took part in."""

    index: int
    seed: int
    steps: list[Step] = field(default_factory=list)
    group: int = -1
    final_observation: str = ""
    final_info: dict[str, Any] = field(default_factory=dict)
    capped: bool = False
    wall_s: float = 0.0

    @property
    def ret(self) -> float:
        return float(sum(s.reward for s in self.steps))

    @property
    def length(self) -> int:
        return len(self.steps)

    @property
    def truncated(self) -> bool:
        return bool(self.steps) and self.steps[-1].truncated and not self.steps[-1].terminated

    @property
    def parse_rate(self) -> float:
        return float(np.mean([s.parse_ok for s in self.steps])) if self.steps else float("nan")


def check_count(value: int, what: str = "episodes", limit: int = MAX_EPISODES) -> None:
    """Raise ``ConfigError`` unless ``1 <= value <= limit``: a count a user typed.

    Example:
        >>> check_count(20)
        >>> try:
        ...     check_count(10**20, "--episodes")
        ... except ConfigError as error:
        ...     print(error)
        --episodes 100000000000000000000 is above the limit of 1,000,000,000; ask for fewer.
    """
    if value < 1:
        raise ConfigError(f"{what} must be at least 1, not {value}.")
    if value > limit:
        raise ConfigError(f"{what} {value} is above the limit of {limit:,}; ask for fewer.")


def answer_text(answer: Any) -> str:
    """The text of an actor's answer (a string, or an object with ``text``).

    Example:
        >>> answer_text('{"action": "LEFT"}')
        '{"action": "LEFT"}'
    """
    return answer if isinstance(answer, str) else answer.text


def play(
    act: Actor,
    envs: Sequence[gym.Env],
    seeds: Iterable[int],
    *,
    first_index: int = 0,
    groups: Sequence[int] | None = None,
    max_steps: int | None = None,
    max_total_steps: int | None = None,
    starts: Sequence[tuple[str, dict[str, Any]]] | None = None,
    before_act: Callable[[list[Episode]], None] | None = None,
    on_end: Callable[[int, Episode], None] | None = None,
    keep: bool = True,
) -> list[Episode]:
    """Play one episode per seed with up to ``len(envs)`` episodes in flight, one ``act`` call
    per lockstep turn over the live episodes (in env order). Returns the episodes in seed order.

    ``starts``: one (observation, info) per env, for envs already positioned (e.g. copies of
    an env mid-episode); they are not reset, and there must be as many seeds as envs.
    ``max_steps`` cuts an episode after that many turns (``capped``, unless the env ended it
    on that turn). ``max_total_steps`` is a budget for all episodes together: once it is spent
    the live episodes are cut like ``max_steps`` cuts them, and episodes not yet started are
    left out of the result (an env-step budget that is never exceeded). ``before_act(live)`` is
    called with the live episodes before each turn, ``on_end(env_index, episode)`` when an
    episode ends (before its env starts the next one).

    ``seeds`` is read lazily, one seed as an env frees up (a ``range`` or a generator of any
    length is fine), and ``keep=False`` returns nothing and drops each episode after its
    ``on_end``: memory then follows the ``len(envs)`` live episodes, not the seeds.
    """
    if starts is not None and not (len(starts) == len(seeds) == len(envs)):  # type: ignore[arg-type]
        raise ValueError("starts needs one (observation, info) per env and one seed per env.")
    upcoming: Iterator[tuple[int, int]] = enumerate(seeds)
    kept: list[Episode] = []
    live: dict[int, tuple[Episode, str, dict[str, Any]]] = {}  # env -> (episode, obs, info)

    def start(slot: int) -> None:
        i, seed = next(upcoming, (-1, 0))
        if i < 0:
            return
        episode = Episode(first_index + i, int(seed), group=groups[i] if groups is not None else -1)
        if keep:
            kept.append(episode)
        if starts is not None:
            live[slot] = (episode, *starts[slot])
        else:
            live[slot] = (episode, *envs[slot].reset(seed=episode.seed))

    def cut(slot: int) -> None:
        """End a live episode where it stands (the step budget is spent)."""
        episode, observation, info = live.pop(slot)
        if episode.steps:
            episode.steps[-1].truncated = episode.capped = True
            episode.final_observation, episode.final_info = observation, info
            if on_end is not None:
                on_end(slot, episode)

    for slot in range(len(envs)):
        start(slot)
    total = 0
    while live:
        tick = time.perf_counter()
        if max_total_steps is not None and total + len(live) > max_total_steps:
            upcoming = iter(())
            for slot in sorted(live)[max(max_total_steps - total, 0) :]:
                cut(slot)
            if not live:
                break
        slots = sorted(live)
        total += len(slots)
        if before_act is not None:
            before_act([live[s][0] for s in slots])
        answers = act([live[s][1] for s in slots], [live[s][2] for s in slots])
        ended = []
        for slot, answer in zip(slots, answers, strict=True):
            episode, observation, info = live[slot]
            obs, reward, terminated, truncated, next_info = envs[slot].step(answer_text(answer))
            capped = max_steps is not None and episode.length + 1 >= max_steps
            episode.capped = capped and not (terminated or truncated)
            episode.steps.append(
                _step(answer, observation, info, reward, terminated, truncated or capped, next_info)
            )
            if episode.steps[-1].done:
                episode.final_observation, episode.final_info = obs, next_info
                ended.append(slot)
            else:
                live[slot] = (episode, obs, next_info)
        share = (time.perf_counter() - tick) / len(slots)
        for slot in slots:
            live[slot][0].wall_s += share
        for slot in ended:
            episode = live.pop(slot)[0]
            if on_end is not None:
                on_end(slot, episode)
            start(slot)
    return [e for e in kept if e.steps]


def cached(act: Actor, cache: dict[tuple[str, str], Any]) -> Actor:
    """``act`` memoised per (system prompt, observation): for a deterministic actor with a
    Markov prompt (greedy evaluation), a repeated state costs no model call.

    Example:
        >>> calls = []
        >>> def act(observations, infos):
        ...     calls.append(len(observations))
        ...     return [o.upper() for o in observations]
        >>> memo = cached(act, {})
        >>> memo(["a", "b", "a"], [{}] * 3), memo(["b", "c"], [{}] * 2), calls
        (['A', 'B', 'A'], ['B', 'C'], [2, 1])
    """

    def act_cached(observations: list[str], infos: list[dict[str, Any]]) -> list[Any]:
        keys = [(i.get("system_prompt", ""), o) for o, i in zip(observations, infos)]
        new_states = dict.fromkeys(k for k in keys if k not in cache)  # each new state once
        todo = [keys.index(k) for k in new_states]
        if todo:
            fresh = act([observations[j] for j in todo], [infos[j] for j in todo])
            for j, answer in zip(todo, fresh, strict=True):
                cache[keys[j]] = answer
        return [cache[k] for k in keys]

    return act_cached


def _step(
    answer: Any,
    observation: str,
    info: dict[str, Any],
    reward: float,
    terminated: bool,
    truncated: bool,
    next_info: dict[str, Any],
) -> Step:
    parse = next_info.get("parse", {}) or {}
    valid = list(info.get("valid_actions") or [])
    action = parse.get("action")
    if valid and isinstance(action, (int, np.integer)) and 0 <= int(action) < len(valid):
        name = str(valid[int(action)])
    else:
        name = str(action) if action is not None else answer_text(answer)[:32]
    return Step(
        answer,
        float(reward),
        bool(terminated),
        bool(truncated),
        bool(parse.get("ok", True)),
        name,
        len(valid),
        observation,
        next_info,
        raw_observation=info.get("raw_obs"),
    )


__all__ = [
    "MAX_ENVS",
    "MAX_EPISODES",
    "MAX_TIMESTEPS",
    "Actor",
    "Episode",
    "Step",
    "answer_text",
    "cached",
    "check_count",
    "play",
]
