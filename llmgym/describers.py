"""Describers: a base env's numeric observation -> prompt text, plus its system prompt.

A describer is a small object with three methods (see ``Describer``). Curated ones live in
``classic.py`` and ``toy_text.py``; ``GenericDescriber`` derives everything from the
observation and action spaces, so ``llmgym.wrap(any_env)`` works with no code.

Example:
    >>> import gymnasium as gym
    >>> env = gym.make("CartPole-v1")
    >>> d = GenericDescriber()
    >>> d.action_names(env)
    ['0', '1']
    >>> print(d.describe(env.reset(seed=0)[0], env))
    x[0] = 0.0137
    x[1] = -0.0230
    x[2] = -0.0459
    x[3] = -0.0483
"""

from __future__ import annotations

import string
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from llmgym.errors import ConfigError

#: Every character a describer may write; TextObservation declares this charset.
CHARSET = string.ascii_letters + string.digits + string.punctuation + " \n\t"

# The answer format names no action and no value: a small model copies whatever example the
# prompt shows (Blackjack P(hit) 0.12 when it said "stick", 0.99 when it said "hit").
_ANSWER_DISCRETE = (
    'Reply with a JSON object naming one valid action: {"action": "<one of the valid actions>"}.'
)
_ANSWER_BOX = (
    "Reply with a JSON object holding {size} number(s) within the bounds: "
    '{{"action": [<number>, ...]}}.'
)


@runtime_checkable
class Describer(Protocol):
    """What TextObservation and TextAction need from a describer."""

    def system_prompt(self, env: gym.Env) -> str:
        """Task, valid actions and answer format, as a system message."""
        ...

    def describe(self, obs: Any, env: gym.Env) -> str:
        """The observation as the text of a user message."""
        ...

    def action_names(self, env: gym.Env) -> list[str] | None:
        """Names of the discrete actions in index order, or None for non-discrete spaces."""
        ...


def fmt(x: float, digits: int = 4) -> str:
    """Format a number compactly and without ``-0``.

    Example:
        >>> fmt(-0.00001), fmt(2.5), fmt(np.float32(1 / 3), 2)
        ('0.0000', '2.5000', '0.33')
    """
    text = f"{float(x):.{digits}f}"
    return text[1:] if text.startswith("-") and float(text) == 0 else text


def answer_format(env: gym.Env, names: list[str] | None) -> str:
    """The answer-format sentence of a system prompt: JSON with placeholders, never an example
    action or value.

    Example:
        >>> print(answer_format(gym.make("CartPole-v1"), ["LEFT", "RIGHT"]))
        Reply with a JSON object naming one valid action: {"action": "<one of the valid actions>"}.
    """
    if names:
        return _ANSWER_DISCRETE
    space = env.action_space
    size = int(np.prod(space.shape)) if space.shape else 1
    return _ANSWER_BOX.format(size=size)


def _bound(x: float, integer: bool) -> str:
    if not np.isfinite(x):
        return "-inf" if x < 0 else "inf"
    return str(int(x)) if integer else fmt(x, 2)


def bounds_text(space: spaces.Box) -> str:
    """Per-dimension bounds of a box, e.g. ``[-2.00, 2.00]``; integers as integers, unbounded
    sides as ``inf``.

    Example:
        >>> bounds_text(spaces.Box(np.array([-3, 0]), np.array([3, 9]), dtype=np.int64))
        '[-3, 3], [0, 9]'
        >>> bounds_text(spaces.Box(-np.inf, 1.0, (1,)))
        '[-inf, 1.00]'
    """
    integer = bool(np.issubdtype(space.dtype, np.integer))
    low, high = space.low.ravel(), space.high.ravel()
    return ", ".join(f"[{_bound(lo, integer)}, {_bound(hi, integer)}]" for lo, hi in zip(low, high))


def build_system_prompt(task: str, env: gym.Env, actions: list[tuple[str, str]] | None) -> str:
    """Compose a system prompt: task, then valid actions with meanings, then answer format."""
    lines = [task.strip(), ""]
    if actions:
        lines.append("Valid actions:")
        lines += [f"- {name}: {meaning}" for name, meaning in actions]
        names = [name for name, _ in actions]
    else:
        names = None
        if isinstance(env.action_space, spaces.Box):
            bounds = bounds_text(env.action_space)
            lines.append(f"The action is a vector of numbers with bounds {bounds}.")
    lines += ["", answer_format(env, names)]
    return "\n".join(lines).replace("\n\n\n", "\n\n")


def _discrete_names(space: spaces.Discrete) -> list[str]:
    return [str(int(space.start) + i) for i in range(int(space.n))]


def _describe_value(space: spaces.Space, value: Any, label: str) -> list[str]:
    if isinstance(space, spaces.Dict):
        return [
            line
            for key, sub in space.spaces.items()
            for line in _describe_value(sub, value[key], f"{label}.{key}" if label else str(key))
        ]
    if isinstance(space, spaces.Tuple):
        return [
            line
            for i, sub in enumerate(space.spaces)
            for line in _describe_value(sub, value[i], f"{label}[{i}]" if label else f"item {i}")
        ]
    name = label or "x"
    if isinstance(space, spaces.Discrete):
        return [f"{name} = {int(value)}"]
    array = np.asarray(value).ravel()
    if array.size == 1 and not isinstance(space, spaces.Box):
        return [f"{name} = {array[0]}"]
    if isinstance(space, spaces.Box) and np.issubdtype(space.dtype, np.floating):
        return [f"{name}[{i}] = {fmt(v)}" for i, v in enumerate(array)]
    return [f"{name} = [{', '.join(str(v) for v in array.tolist())}]"]


def _space_summary(space: spaces.Space, label: str = "") -> list[str]:
    name = label or "x"
    if isinstance(space, spaces.Dict):
        return [
            line
            for key, sub in space.spaces.items()
            for line in _space_summary(sub, f"{label}.{key}" if label else str(key))
        ]
    if isinstance(space, spaces.Tuple):
        return [
            line
            for i, sub in enumerate(space.spaces)
            for line in _space_summary(sub, f"{label}[{i}]" if label else f"item {i}")
        ]
    if isinstance(space, spaces.Discrete):
        first = int(space.start)
        return [f"- {name}: an integer from {first} to {first + int(space.n) - 1}"]
    if isinstance(space, spaces.Box):
        return [f"- {name}: {space.shape} numbers with bounds {bounds_text(space)}"]
    if isinstance(space, spaces.MultiDiscrete):
        start, nvec = np.asarray(space.start).ravel(), space.nvec.ravel()
        ranges = ", ".join(f"[{a}, {a + n - 1}]" for a, n in zip(start.tolist(), nvec.tolist()))
        return [f"- {name}: {nvec.size} integers within {ranges}"]
    if isinstance(space, spaces.MultiBinary):
        return [f"- {name}: {int(np.prod(space.shape))} bits (0 or 1)"]
    return [f"- {name}: {type(space).__name__}"]


@dataclass(frozen=True)
class GenericDescriber:
    """Derives prompt text from the spaces: Box (with bounds), Discrete, MultiDiscrete,
    MultiBinary, Tuple and Dict (with field names). ``actions`` names a ``Discrete`` action
    space's actions (a list, or a dict name -> meaning); ``fields`` names the entries of a
    flat ``Box`` observation (a list, or a dict name -> description), or describes a ``Dict``
    observation's keys (a dict key -> description). ``llmgym.wrap(env, actions=..., fields=...)``
    passes them.

    Example:
        >>> import gymnasium as gym
        >>> env = gym.make("CartPole-v1")
        >>> d = GenericDescriber(actions={"LEFT": "push left", "RIGHT": "push right"},
        ...                      fields=["position", "velocity", "angle", "spin"])
        >>> d.action_names(env)
        ['LEFT', 'RIGHT']
        >>> print(d.describe(env.reset(seed=0)[0], env).splitlines()[0])
        position = 0.0137
    """

    actions: Any = None
    fields: Any = None

    def __post_init__(self) -> None:
        for name in ("actions", "fields"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, str) or not hasattr(value, "__iter__")):
                raise ConfigError(
                    f"{name} must be a list of names or a dict of name -> description, "
                    f"not {value!r}."
                )

    def action_names(self, env: gym.Env) -> list[str] | None:
        space = env.action_space
        if not isinstance(space, spaces.Discrete):
            if self.actions:
                raise ConfigError(
                    f"actions names the choices of a Discrete action space, not of "
                    f"{type(space).__name__}; drop it."
                )
            return None
        if not self.actions:
            return _discrete_names(space)
        names = [str(name) for name in self.actions]
        if len(names) != int(space.n) or len(set(names)) != len(names):
            raise ConfigError(
                f"actions must give {int(space.n)} different names, one per action of "
                f"{space}, not {names}."
            )
        return names

    def system_prompt(self, env: gym.Env) -> str:
        env_id = env.spec.id if env.spec is not None else type(env.unwrapped).__name__
        task = "\n".join(
            [
                f"You control an agent in the reinforcement-learning environment {env_id}.",
                "Choose actions that maximize the total reward.",
                "Each observation has these fields:",
                *self._summary(env.observation_space),
            ]
        )
        names = self.action_names(env)
        meanings = self.actions if isinstance(self.actions, dict) else {}
        actions = [(n, str(meanings.get(n, f"action {n}"))) for n in names] if names else None
        if not names and not isinstance(env.action_space, spaces.Box):
            task += "\nThe action is: " + _space_summary(env.action_space, "action")[0][2:]
        return build_system_prompt(task, env, actions)

    def describe(self, obs: Any, env: gym.Env) -> str:
        labels = self._labels(env.observation_space)
        if labels is not None:
            values = np.asarray(obs).ravel()
            return "\n".join(f"{name} = {fmt(v)}" for name, v in zip(labels, values))
        return "\n".join(_describe_value(env.observation_space, obs, ""))

    def _labels(self, space: spaces.Space) -> list[str] | None:
        """The names of a flat Box observation's entries, when ``fields`` gives them."""
        if not self.fields or isinstance(space, spaces.Dict):
            return None
        names = [str(name) for name in self.fields]
        if not isinstance(space, spaces.Box):
            raise ConfigError(
                f"fields names the entries of a flat Box observation or describes a Dict "
                f"observation's keys; this observation is {space}."
            )
        size = int(np.prod(space.shape))
        if len(names) != size:
            raise ConfigError(
                f"fields must name the {size} entries of a flat Box observation, not {names}."
            )
        return names

    def _summary(self, space: spaces.Space) -> list[str]:
        notes = self.fields if isinstance(self.fields, dict) else {}
        labels = self._labels(space)
        if labels is not None:
            low, high = np.asarray(space.low).ravel(), np.asarray(space.high).ravel()
            return [
                f"- {name}: {notes[name] + ', ' if name in notes else ''}"
                f"from {_bound(lo, False)} to {_bound(hi, False)}"
                for name, lo, hi in zip(labels, low, high)
            ]
        lines = _space_summary(space)
        if isinstance(space, spaces.Dict) and notes:
            unknown = set(notes) - set(space.spaces)
            if unknown:
                raise ConfigError(
                    f"fields describes keys the observation lacks ({', '.join(sorted(unknown))}); "
                    f"its keys are {', '.join(space.spaces)}."
                )
            lines = [
                line + (f" ({notes[key]})" if key in notes else "")
                for line, key in zip(lines, _flat_keys(space))
            ]
        return lines


def _flat_keys(space: spaces.Dict) -> list[str]:
    """The top-level key of each line ``_space_summary`` writes for a Dict space."""
    return [key for key, sub in space.spaces.items() for _ in _space_summary(sub, key)]


@dataclass(frozen=True)
class CuratedDescriber:
    """A hand-written describer: a task text (or a function of the env), named actions with
    their meanings (None for continuous actions), and a render function for observations.
    ``order`` lists the actions in the system prompt in another order (indices); the action
    ids and ``action_names`` keep index order."""

    task: str | Callable[[gym.Env], str]
    actions: list[tuple[str, str]] | None
    render: Callable[[Any, gym.Env], str]
    order: tuple[int, ...] | None = None

    def action_names(self, env: gym.Env) -> list[str] | None:
        return [name for name, _ in self.actions] if self.actions else None

    def system_prompt(self, env: gym.Env) -> str:
        task = self.task(env) if callable(self.task) else self.task
        actions = self.actions
        if actions and self.order is not None:
            actions = [actions[i] for i in self.order]
        return build_system_prompt(task, env, actions)

    def describe(self, obs: Any, env: gym.Env) -> str:
        return self.render(obs, env)
