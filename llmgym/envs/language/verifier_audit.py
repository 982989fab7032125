"""Which reasoning-gym verifiers could evaluate a model's text (used to build and re-check
``math_env.SAFE_DATASETS``).

``audit(name)`` walks the code a dataset's ``score_answer`` can reach: its own methods
through ``self.``, and the functions and classes of reasoning-gym it calls by name, module
attribute or class, transitively. A dataset is unsafe when that code calls ``eval``,
``exec``, ``compile``, ``parse_expr``, ``sympify``, ``parse_latex`` or ``__import__``, or
calls into sympy, math_verify or latex2sympy at all (their parsers sympify strings); the
source of every reachable function is also scanned for those names. A call through an
instance attribute (``self.datasets[k].score_answer``) cannot be resolved and is not
followed, which is why ``composite`` is left out by hand.

Example:
    >>> import pytest; _ = pytest.importorskip("reasoning_gym")
    >>> "parse_expr" in audit("intermediate_integration")
    True
    >>> audit("gsm_symbolic")
    []
"""

from __future__ import annotations

import ast
import builtins
import inspect
import re
import textwrap
import types
from typing import Any

DANGEROUS_CALLS = ("eval", "exec", "compile", "parse_expr", "sympify", "parse_latex", "__import__")
DANGEROUS_MODULES = ("sympy", "math_verify", "latex2sympy", "latex2sympy2")
_TOKEN = re.compile(r"\b(" + "|".join(DANGEROUS_CALLS + DANGEROUS_MODULES) + r")\b")


def _module_of(obj: Any) -> str:
    return getattr(obj, "__module__", None) or getattr(obj, "__name__", "") or ""


def _resolve(node: ast.expr, glb: dict[str, Any], cls: type | None) -> Any:
    """The object a call target names, or None."""
    if isinstance(node, ast.Name):
        return glb.get(node.id, getattr(builtins, node.id, None))
    if isinstance(node, ast.Attribute):
        if isinstance(node.value, ast.Name) and node.value.id in ("self", "cls") and cls:
            return getattr(cls, node.attr, None)
        base = _resolve(node.value, glb, cls)
        return getattr(base, node.attr, None) if base is not None else None
    return None


def _is_rg(obj: Any) -> bool:
    return _module_of(obj).split(".")[0] == "reasoning_gym"


def audit(name: str) -> list[str]:
    """The dangerous names that ``name``'s verifier can reach (empty when it is safe)."""
    from reasoning_gym.factory import DATASETS

    cls = DATASETS[name][0]
    found: list[str] = []
    seen: set[Any] = set()
    todo: list[tuple[Any, type | None]] = [(cls.score_answer, cls)]
    while todo:
        func, owner = todo.pop()
        func = inspect.unwrap(getattr(func, "__func__", func))
        if func in seen or not isinstance(func, (types.FunctionType, type)):
            continue
        seen.add(func)
        if isinstance(func, type):  # a class called: its __init__ and __call__
            todo += [(getattr(func, m), func) for m in ("__init__", "__call__") if m in vars(func)]
            continue
        try:
            source = textwrap.dedent(inspect.getsource(func))
        except (OSError, TypeError):
            continue
        found += [m.group(1) for m in _TOKEN.finditer(source)]
        glb = func.__globals__
        for node in ast.walk(ast.parse(source)):
            targets = [node.func] if isinstance(node, ast.Call) else []
            targets += [node] if isinstance(node, ast.Attribute) else []
            for target in targets:
                obj = _resolve(target, glb, owner)
                if obj is None:
                    continue
                if _module_of(obj).split(".")[0] in DANGEROUS_MODULES:
                    found.append(_module_of(obj).split(".")[0])
                elif getattr(obj, "__name__", None) in DANGEROUS_CALLS:
                    found.append(obj.__name__)
                elif _is_rg(obj):
                    todo.append((obj, obj if isinstance(obj, type) else owner))
    return sorted(set(found))


def audit_all() -> dict[str, list[str]]:
    """``audit`` of every reasoning-gym dataset, by name."""
    from reasoning_gym.factory import DATASETS

    return {name: audit(name) for name in sorted(DATASETS)}
