"""The checks every config dataclass shares: each field declares its rule beside its default
and its docstring (``num_envs: int = field(default=8, metadata=rule(min=1))``), and
:func:`check_fields` checks the fields against their annotated types and their rules, refusing
a value in one sentence that names its key: a string where a number belongs, NaN or an
infinity, a number out of range, a name that is not one of the choices. ``PolicyConfig``
(``llmgym.policy.config``) and the trainers' configs (``llmgym.rl.config``) are built on it.

Example:
    >>> from dataclasses import dataclass, field
    >>> @dataclass
    ... class Tiny(Checked):
    ...     size: int = field(default=1, metadata=rule(min=1))
    >>> Tiny(size=0)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    llmgym.errors.ConfigValueError: size must be at least 1, not 0.
"""

from __future__ import annotations

import ast
import dataclasses
import functools
import inspect
import math
import numbers
import sys
import types
import typing
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

from llmgym.errors import ConfigValueError


@dataclass(frozen=True)
class Rule:
    """What a field accepts beyond its type: bounds (``min``/``max`` inclusive, ``above``/
    ``below`` exclusive), ``choices``, or a ``test`` whose accepted values ``expect`` names.
    ``hint`` is added to the sentence in parentheses."""

    min: float | None = None
    above: float | None = None
    max: float | None = None
    below: float | None = None
    choices: tuple[str, ...] = ()
    test: Callable[[Any], bool] | None = None
    expect: str = ""
    hint: str = ""

    def check(self, key: str, value: Any) -> None:
        """Raise ``ConfigValueError`` unless ``value`` (of the field's type) is accepted.

        Example:
            >>> Rule(min=0.0, below=1.0).check("decay", 1.0)
            Traceback (most recent call last):
            ...
            llmgym.errors.ConfigValueError: decay must be in [0, 1), not 1.0.
        """
        if self.choices and value not in self.choices:
            self._refuse(key, f"one of {', '.join(self.choices)}", value)
        if self.test is not None and not self.test(value):
            self._refuse(key, self.expect, value)
        if isinstance(value, numbers.Real) and not self._within(value):
            self._refuse(key, self.bounds(), value)

    def bounds(self) -> str:
        """The accepted range in words: ``at least 1``, ``above 0``, ``in (0, 1]``.

        Example:
            >>> Rule(above=0, max=1).bounds(), Rule(min=1).bounds()
            ('in (0, 1]', 'at least 1')
        """
        low = f"[{_number(self.min)}" if self.min is not None else None
        low = f"({_number(self.above)}" if self.above is not None else low
        high = f"{_number(self.max)}]" if self.max is not None else None
        high = f"{_number(self.below)})" if self.below is not None else high
        if low and high:
            return f"in {low}, {high}"
        if low:
            return f"at least {low[1:]}" if low[0] == "[" else f"above {low[1:]}"
        return f"at most {high[:-1]}" if high and high[-1] == "]" else f"below {(high or '')[:-1]}"

    def _within(self, value: float) -> bool:
        return (
            (self.min is None or value >= self.min)
            and (self.above is None or value > self.above)
            and (self.max is None or value <= self.max)
            and (self.below is None or value < self.below)
        )

    def _refuse(self, key: str, accepted: str, value: Any) -> None:
        hint = f" ({self.hint})" if self.hint else ""
        raise ConfigValueError(f"{key} must be {accepted}{hint}, not {value!r}.")


def rule(**kwargs: Any) -> dict[str, Rule]:
    """A field's ``metadata`` holding its :class:`Rule`, as in
    ``num_envs: int = field(default=8, metadata=rule(min=1))``."""
    return {"rule": Rule(**kwargs)}


def check_fields(
    config: Any,
    prefix: str = "",
    *,
    rules: dict[str, Rule] | None = None,
    skip: typing.Collection[str] = (),
) -> None:
    """Check every field of dataclass ``config`` against its annotated type and its rule (the
    field's ``metadata["rule"]``, else ``rules[name]``); a refused value raises
    ``ConfigValueError`` naming ``prefix + name``. An integral float given to a whole-number
    field becomes an int (``8.0`` -> ``8``); fields in ``skip`` are left alone.

    Example:
        >>> from llmgym.policy.config import PolicyConfig
        >>> check_fields(PolicyConfig(), "policy.")
        >>> config = PolicyConfig()
        >>> config.history = "two"
        >>> check_fields(config, "policy.")
        Traceback (most recent call last):
        ...
        llmgym.errors.ConfigValueError: policy.history must be a whole number, not 'two'.
    """
    hints = _type_hints(type(config))
    for f in dataclasses.fields(config):
        if f.name in skip:
            continue
        key = prefix + f.name
        value = _typed(key, getattr(config, f.name), hints.get(f.name, Any))
        if value is not getattr(config, f.name):
            object.__setattr__(config, f.name, value)
        if isinstance(value, numbers.Real) and not math.isfinite(value):  # NaN, +-inf
            raise ConfigValueError(f"{key} must be a finite number, not {value!r}.")
        checker = f.metadata.get("rule") or (rules or {}).get(f.name)
        if checker is not None and value is not None:
            checker.check(key, value)


class Checked:
    """Base of the config dataclasses: every field is checked against its type and its rule
    when the dataclass is built and again by :meth:`validate`; a refused value is one sentence
    naming ``prefix + field`` (``run.num_envs must be at least 1, not 0.``)."""

    prefix: ClassVar[str] = ""

    def __post_init__(self) -> None:
        self.validate()

    def validate(self) -> None:
        """Refuse a value of the wrong type or out of range, in one sentence."""
        check_fields(self, self.prefix)


@functools.cache
def field_docs(cls: type) -> dict[str, str]:
    """Field name -> the docstring written under the field, on one line, in dataclass ``cls``
    and its bases (nothing where the source is not at hand).

    Example:
        >>> from llmgym.policy.config import PolicyConfig
        >>> field_docs(PolicyConfig)["history"]
        'Past (observation, answer) turns kept in the prompt; 0 for Markov envs.'
    """
    docs: dict[str, str] = {}
    for klass in reversed(cls.__mro__):
        if dataclasses.is_dataclass(klass):
            docs |= _module_field_docs(klass.__module__).get(klass.__qualname__, {})
    return docs


@functools.cache
def _module_field_docs(module: str) -> dict[str, dict[str, str]]:
    """Class name -> {field name -> docstring} for the top-level classes of ``module``."""
    try:
        tree = ast.parse(inspect.getsource(sys.modules[module]))
    except (KeyError, OSError, TypeError, SyntaxError):
        return {}
    out: dict[str, dict[str, str]] = {}
    for node in tree.body:
        if not isinstance(node, ast.ClassDef):
            continue
        docs = out.setdefault(node.name, {})
        for item, after in zip(node.body, node.body[1:]):
            if not (isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name)):
                continue
            if isinstance(after, ast.Expr) and isinstance(after.value, ast.Constant):
                if isinstance(after.value.value, str):
                    docs[item.target.id] = " ".join(after.value.value.split())
    return out


@functools.cache
def _type_hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


#: Integral floats up to this size are taken as whole numbers (exactly representable).
_WHOLE_FLOAT_LIMIT = 2**53


def _typed(key: str, value: Any, hint: Any) -> Any:
    """``value`` if it is of type ``hint`` (an integral float as an int), else a sentence."""
    args = typing.get_args(hint)
    optional = typing.get_origin(hint) in (typing.Union, types.UnionType) and type(None) in args
    if optional:
        if value is None:
            return None
        rest = [a for a in args if a is not type(None)]
        hint = rest[0] if len(rest) == 1 else Any
    ok, typed = _conforms(value, hint)
    whole = isinstance(value, numbers.Integral) and not isinstance(value, bool)
    if not ok and whole and hint is int:
        raise ConfigValueError(f"{key} must be a whole number within +-2**53, not {value!r}.")
    if not ok:
        either = " or null" if optional else ""
        raise ConfigValueError(f"{key} must be {_kind(hint)}{either}, not {value!r}.")
    return typed


def _conforms(value: Any, hint: Any) -> tuple[bool, Any]:
    origin = typing.get_origin(hint) or hint
    if origin is bool:
        return isinstance(value, bool), value
    if origin is int:
        if isinstance(value, bool):
            return False, value
        if isinstance(value, numbers.Integral):  # one past 2**53 overflows C and float uses
            return abs(value) <= _WHOLE_FLOAT_LIMIT, value
        whole = isinstance(value, float) and value.is_integer()
        if whole and abs(value) <= _WHOLE_FLOAT_LIMIT:
            return True, int(value)
        return False, value
    if origin is float:  # a whole number given for a float becomes one (10**20 -> 1e20)
        if isinstance(value, bool) or not isinstance(value, numbers.Real):
            return False, value
        if isinstance(value, numbers.Integral):
            return abs(value) < 2**1023, float(value) if abs(value) < 2**1023 else value
        return True, value
    if origin is str:
        return isinstance(value, str), value
    if origin is list:
        if not isinstance(value, (list, tuple)):
            return False, value
        item = (typing.get_args(hint) or (Any,))[0]
        checked = [_conforms(v, item) for v in value]
        if not all(ok for ok, _ in checked):
            return False, value
        items = [v for _, v in checked]
        same = all(a is b for a, b in zip(items, value))
        return True, value if same else type(value)(items)
    if origin is dict:
        return isinstance(value, dict), value
    return True, value


def _kind(hint: Any) -> str:
    """What a value of type ``hint`` is, for a sentence."""
    origin = typing.get_origin(hint) or hint
    names = {bool: "true or false", int: "a whole number", float: "a number", str: "a string"}
    if origin in names:
        return names[origin]
    if origin is list:
        item = (typing.get_args(hint) or (Any,))[0]
        plural = {int: "whole numbers", float: "numbers", str: "strings"}.get(item, "values")
        return f"a list of {plural}"
    if origin is dict:
        return "a mapping of names to values (a JSON object)"
    return getattr(origin, "__name__", str(origin))


def _number(bound: float) -> str:
    """A bound as written: ``0`` for 0.0, ``1e-05`` as is."""
    if isinstance(bound, float) and bound.is_integer() and abs(bound) < 1e15:
        return str(int(bound))
    return str(bound)


__all__ = ["Checked", "Rule", "check_fields", "field_docs", "rule"]
