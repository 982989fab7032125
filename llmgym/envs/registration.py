"""The ``Text-*`` registry: registering the catalog's envs, ``wrap()``, the entry point
``gym.make("Text-<BaseId>")`` calls, and the eval-env helpers.

Example:
    >>> import gymnasium as gym, llmgym
    >>> env = gym.make("Text-Blackjack-v1")
    >>> obs, info = env.reset(seed=0)
    >>> _, reward, terminated, _, info = env.step('{"action": "stick"}')
    >>> info["parse"]["method"], terminated
    ('json', True)
"""

from __future__ import annotations

import dataclasses
import importlib.util
import inspect
import json
import math
import warnings
from typing import Any

import gymnasium as gym

from llmgym.describers import Describer, GenericDescriber
from llmgym.envs.catalog import CATALOG, EnvEntry
from llmgym.envs.classic import CARTPOLE_DEGREES
from llmgym.envs.maps import register_map_sets
from llmgym.envs.symmetry import Mirror
from llmgym.envs.variants import make_variant
from llmgym.errors import ConfigError
from llmgym.parsing import ParseResult
from llmgym.wrappers.history import HistoryWrapper
from llmgym.wrappers.text_action import TextAction
from llmgym.wrappers.text_observation import TextObservation

#: Curated describers, keyed by the class name of the unwrapped base env (from the catalog).
CURATED: dict[str, Describer] = {
    e.env_class: e.describer for e in CATALOG if e.env_class and e.describer is not None
}
#: ``make_text_env`` keyword arguments that configure the wrappers, not the base env.
WRAPPER_KWARGS = (
    "history",
    "on_invalid",
    "invalid_penalty",
    "describer",
    "parser",
    "actions",
    "fields",
    "wording",
    "action_names",
    "shuffle_actions",
)
#: Step cap for envs registered without a time limit (CliffWalking), in training and benches.
DEFAULT_MAX_STEPS = 200


def describer_for(env: gym.Env) -> Describer:
    """The curated describer for ``env``'s base class, else a ``GenericDescriber``."""
    return CURATED.get(type(env.unwrapped).__name__, GenericDescriber())


#: Second wordings and action synonyms (``llmgym.envs.variants``), keyed like ``CURATED``.
REWORDED: dict[str, Describer] = {e.env_class: e.reworded for e in CATALOG if e.reworded}
SYNONYMS: dict[str, tuple[str, ...]] = {e.env_class: e.synonyms for e in CATALOG if e.synonyms}

#: Mirror symmetries, keyed like ``CURATED``.
MIRRORS: dict[str, Mirror] = {e.env_class: e.mirror for e in CATALOG if e.env_class and e.mirror}


def mirror_for(env: gym.Env) -> Mirror | None:
    """The mirror symmetry of ``env``'s base class, if the catalog declares one."""
    return MIRRORS.get(type(env.unwrapped).__name__)


#: Describers by name, for ``describer="NAME"`` where no object can be passed
#: (``--env-kwarg describer=generic`` on the command line).
NAMED_DESCRIBERS: dict[str, Describer] = {
    "generic": GenericDescriber(),
    "cartpole-degrees": CARTPOLE_DEGREES,
}


def describer_named(name: str) -> Describer:
    """The describer registered as ``name`` in ``NAMED_DESCRIBERS``.

    Example:
        >>> describer_named("generic").__class__.__name__
        'GenericDescriber'
        >>> describer_named("fancy")
        Traceback (most recent call last):
        ...
        ValueError: Unknown describer 'fancy': use one of generic, cartpole-degrees.
    """
    if name not in NAMED_DESCRIBERS:
        raise ValueError(f"Unknown describer {name!r}: use one of {', '.join(NAMED_DESCRIBERS)}.")
    return NAMED_DESCRIBERS[name]


def wrap(
    env: gym.Env,
    describer: Describer | str | None = None,
    *,
    history: int = 0,
    on_invalid: str = "fallback",
    invalid_penalty: float | None = None,
    parser: Any | None = None,
    actions: Any = None,
    fields: Any = None,
    wording: str = "base",
    action_names: str = "base",
    shuffle_actions: bool | int = False,
) -> gym.Env:
    """Turn any Gymnasium env into a text env: ``str`` observations, ``str`` actions.

    The describer is the curated one for known envs and is otherwise derived from the spaces;
    pass your own object, or the name of one in ``NAMED_DESCRIBERS``. Without one, ``actions``
    names a Discrete action space's actions (a list, or a dict name -> meaning) and ``fields``
    names a flat Box observation's entries or describes a Dict observation's keys (see
    ``GenericDescriber``).
    ``history=k`` adds ``info["messages"]`` with the last k turns; ``on_invalid`` and
    ``invalid_penalty`` set what an unparseable answer does (see ``TextAction``); ``parser``
    replaces the action parser for action spaces llmgym cannot parse itself.
    ``wording="alt"``, ``action_names="alt"`` and ``shuffle_actions=True`` (or a seed) make a
    held-out variant of a curated env's text (``llmgym.envs.variants``).

    Example:
        >>> import gymnasium as gym
        >>> env = wrap(gym.make("Pendulum-v1"))
        >>> obs, info = env.reset(seed=0)
        >>> info["valid_actions"]
        []
        >>> *_, info = env.step('{"action": [5.0]}')
        >>> info["parse"]["action"], info["parse"]["clipped"]
        (array([2.], dtype=float32), True)
        >>> env = wrap(gym.make("CartPole-v1"), actions=["LEFT", "RIGHT"])
        >>> env.reset(seed=0)[1]["valid_actions"]
        ['LEFT', 'RIGHT']
    """
    if (actions is not None or fields is not None) and describer is not None:
        raise ConfigError(
            "Pass either a describer or actions/fields (which shape the generic describer)."
        )
    if isinstance(describer, str):
        describer = describer_named(describer)
    if actions is not None or fields is not None:
        describer = GenericDescriber(actions=actions, fields=fields)
    if wording != "base" and describer is not None:
        raise ConfigError("wording=alt replaces the curated describer; drop describer.")
    describer = describer or describer_for(env)
    env_class, spec = type(env.unwrapped).__name__, env.unwrapped.spec
    describer = make_variant(
        describer,
        spec.id if spec is not None else env_class,
        reworded=REWORDED.get(env_class),
        synonyms=SYNONYMS.get(env_class),
        wording=wording,
        action_names=action_names,
        shuffle_actions=shuffle_actions,
    )
    text_env: gym.Env = TextObservation(env, describer)
    text_env = TextAction.from_describer(
        text_env, describer, on_invalid=on_invalid, invalid_penalty=invalid_penalty, parser=parser
    )
    return HistoryWrapper(text_env, history) if history else text_env


def make_text_env(base_id: str, **kwargs: Any) -> gym.Env:
    """Entry point of ``Text-<base_id>``: keyword arguments named like ``wrap``'s go to the
    wrappers, all others to the base env (``gym.make("Text-FrozenLake-v1", is_slippery=False)``).
    The time limit is applied once, by the text env's own registration."""
    wrapper_kwargs = {k: kwargs.pop(k) for k in WRAPPER_KWARGS if k in kwargs}
    spec = dataclasses.replace(gym.spec(base_id), max_episode_steps=None)
    base = gym.make(spec, disable_env_checker=True, **kwargs)
    return wrap(base, **wrapper_kwargs)


def register_envs() -> list[str]:
    """Register every catalog env whose library is installed (found, not imported); return
    their ids."""
    register_map_sets()
    ids = []
    for e in CATALOG:
        if e.requires is not None and importlib.util.find_spec(e.requires) is None:
            continue
        if e.id not in gym.registry:
            gym.register(e.id, **_registration(e))
        ids.append(e.id)
    return ids


def _registration(e: EnvEntry) -> dict[str, Any]:
    """``gym.register``'s arguments for an entry: a wrapped env keeps its base env's step cap
    and reward threshold; a language-native one is its entry point (a string: cheap)."""
    if e.base is None:
        return dict(
            entry_point=e.entry_point, kwargs=dict(e.kwargs), max_episode_steps=e.max_episode_steps
        )
    base = gym.spec(e.base)
    return dict(
        entry_point="llmgym.envs.registration:make_text_env",
        kwargs={"base_id": e.base},
        max_episode_steps=base.max_episode_steps,
        reward_threshold=base.reward_threshold,
    )


def base_env_id(env_id: str) -> str:
    """The base env id of a ``Text-*`` id (other ids are returned unchanged).

    Example:
        >>> base_env_id("Text-CartPole-v1"), base_env_id("CartPole-v1")
        ('CartPole-v1', 'CartPole-v1')
    """
    return env_id.removeprefix("Text-")


def make_eval_env(env_id: str, **kwargs: Any) -> gym.Env:
    """``gym.make(env_id)`` with a ``DEFAULT_MAX_STEPS`` cap where the registry has no time
    limit, so that no agent can loop forever (CliffWalking).

    Example:
        >>> make_eval_env("Text-CliffWalking-v1").spec.max_episode_steps
        200
    """
    if gym.spec(env_id).max_episode_steps is None and "max_episode_steps" not in kwargs:
        kwargs["max_episode_steps"] = DEFAULT_MAX_STEPS
    return gym.make(env_id, **kwargs)


def check_env_id(env_id: str) -> None:
    """Refuse, in one sentence (``ConfigError``), an env id that is not registered: the one
    check every command and API entry makes.

    Example:
        >>> check_env_id("Text-Blackjack-v1")
        >>> check_env_id("Text-Nope-v0")  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        llmgym.errors.ConfigError: Unknown environment 'Text-Nope-v0'; run `llmgym envs` to ...
    """
    if env_id not in gym.registry:
        raise ConfigError(
            f"Unknown environment {env_id!r}; run `llmgym envs` to list the text envs."
        )


def check_env_kwargs(env_id: str, env_kwargs: dict[str, Any]) -> None:
    """Refuse, in one sentence (``ConfigError``), keyword arguments that ``env_id`` cannot be
    made with: a value of another type than the keyword's default (``is_slippery=maybe``), a
    count that is not a positive whole number (``max_episode_steps=-1``), NaN or an infinity,
    or anything that fails to make the env and reset it once (``map_name=9x9``, a map with
    no start, a dataset config its generator refuses), numeric warnings included.

    Example:
        >>> check_env_kwargs("Text-FrozenLake-v1", {"is_slippery": False})
        >>> check_env_kwargs("Text-FrozenLake-v1", {"is_slippery": "maybe"})
        Traceback (most recent call last):
        ...
        llmgym.errors.ConfigError: Env kwarg is_slippery must be true or false, not 'maybe'.
    """
    check_env_id(env_id)
    references, open_ended = _kwarg_references(env_id)
    for key, value in env_kwargs.items():
        if not open_ended and key not in references and key not in _MAKE_KWARGS:
            names = ", ".join(sorted(k for k in references if k != "render_mode"))
            raise ConfigError(f"{env_id} takes no env kwarg {key!r}; it takes {names}.")
        expect = _expectation(key, value, references.get(key))
        if expect:
            raise ConfigError(f"Env kwarg {key} must be {expect}, not {value!r}.")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", RuntimeWarning)  # NaN from a map with no start
            env = gym.make(env_id, **env_kwargs)
            try:
                env.reset(seed=0)
            finally:
                env.close()
    except ConfigError:
        raise  # already one sentence
    except Exception as error:  # noqa: BLE001 - whatever the env raises is the user's input
        shown = ", ".join(f"{k}={json.dumps(v, default=str)}" for k, v in env_kwargs.items())
        why = (str(error).splitlines() or [""])[0][:160].rstrip(".") or type(error).__name__
        raise ConfigError(
            f"{env_id} cannot be made with {shown or 'its defaults'} "
            f"({type(error).__name__}: {why})."
        ) from None


#: What ``gym.make`` itself takes besides the env's keywords.
_MAKE_KWARGS = ("max_episode_steps", "disable_env_checker", "autoreset")
#: Keywords every text env takes whose values are counts (at least the number given).
_COUNTS = {"max_episode_steps": 1, "history": 0}


def _expectation(key: str, value: Any, reference: Any) -> str:
    """What ``value`` should have been, or "" where it may be right (the env decides)."""
    if key in _COUNTS:
        if isinstance(value, bool) or not isinstance(value, int) or value < _COUNTS[key]:
            return f"a whole number of at least {_COUNTS[key]}"
        return ""
    if isinstance(value, float) and not math.isfinite(value):
        return "a finite number"
    if isinstance(reference, bool):
        return "" if isinstance(value, bool) else "true or false"
    if isinstance(reference, int) and (isinstance(value, bool) or not isinstance(value, int)):
        return "a whole number"
    number = isinstance(value, (int, float)) and not isinstance(value, bool)
    if isinstance(reference, float) and not number:
        return "a number"
    if isinstance(reference, str) and not isinstance(value, str):
        return "a string"
    return ""


def _kwarg_references(env_id: str) -> tuple[dict[str, Any], bool]:
    """(keyword -> its registered value or default, whether the env takes other keywords too)
    for ``env_id``: a wrapped env's base env's keywords and the wrappers'."""
    spec = gym.spec(env_id)
    wrapped = spec.entry_point == "llmgym.envs.registration:make_text_env"
    if wrapped:
        spec = gym.spec(spec.kwargs["base_id"])
    found = {k: None for k in WRAPPER_KWARGS} if wrapped else {}
    try:
        creator = gym.envs.registration.load_env_creator(spec.entry_point)
        params = inspect.signature(creator).parameters.values()
    except (AttributeError, ImportError, ValueError, TypeError):
        return found | dict(spec.kwargs), True
    found |= {p.name: p.default for p in params if p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL)}
    found = {k: None if v is inspect.Parameter.empty else v for k, v in found.items()}
    open_ended = any(p.kind == p.VAR_KEYWORD for p in params)
    return found | dict(spec.kwargs), open_ended


def text_env_ids() -> list[str]:
    """Every registered ``Text-*`` id, in registration order."""
    return [k for k in gym.registry if k.startswith("Text-")]


__all__ = [
    "DEFAULT_MAX_STEPS",
    "NAMED_DESCRIBERS",
    "WRAPPER_KWARGS",
    "ParseResult",
    "base_env_id",
    "check_env_kwargs",
    "describer_for",
    "describer_named",
    "make_eval_env",
    "make_text_env",
    "mirror_for",
    "register_envs",
    "text_env_ids",
    "wrap",
]
