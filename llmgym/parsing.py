"""Pure action parsers: the text a model wrote -> an action of the base environment.

Every parser tries, in order, and reports which step succeeded in ``ParseResult.method``:

1. ``json``: a JSON object anywhere in the text (bare, inside a code fence, or embedded in
   prose); the value under the first key among ``action``, ``move``, ``command``, ``choice``,
   ``answer`` (any case). A string value is matched against the valid names; an integer is
   taken as a name when it is one (``"3"`` in ``["1", "2", "3"]``), else as an index into the
   valid actions. When several objects carry an action, the last one wins.
2. ``regex``: ``Action: X`` (also ``move``/``command``/``answer``, with ``:`` or ``=``); failing
   that, mentions of valid action names as whole words, case-insensitive. **When several
   names are mentioned, the last mention wins** (models tend to reason first and answer last).
3. ``fuzzy``: a close spelling of a valid name (``"LEFFT"`` -> ``LEFT``), by difflib ratio >= 0.8.
4. ``fallback``: the documented default action (the first valid action for discrete spaces,
   zero clipped into bounds for boxes); ``ok`` is False and ``error`` says why.

Parsers never raise on any string and never evaluate text: only ``json.loads`` and regular
expressions read it, over at most the last ``MAX_SCAN_CHARS`` characters. Every regular
expression here runs in linear time (no nested or adjacent quantifiers over the same
characters), so a step costs milliseconds whatever the text.

Example:
    >>> parse_discrete('{"action": "RIGHT"}', ["LEFT", "RIGHT"]).action
    1
    >>> parse_discrete("I think hit is best. Action: stick", ["stick", "hit"]).method
    'regex'
    >>> r = parse_discrete("banana", ["stick", "hit"])
    >>> (r.ok, r.method, r.action)
    (False, 'fallback', 0)
    >>> parse_box("[3.5]", low=[-2.0], high=[2.0]).as_dict()["clipped"]
    True
"""

from __future__ import annotations

import difflib
import json
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

ACTION_KEYS = ("action", "move", "command", "choice", "answer")
MAX_SCAN_CHARS = 8_000
_MAX_JSON_STARTS = 64
_FUZZY_CUTOFF = 0.8
_NUMBER = re.compile(r"[-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?")
# One character class between the label and its value (not ``\s*[...]*\s*``): adjacent
# quantifiers over the same characters backtrack quadratically on long whitespace runs.
_LABELLED = re.compile(
    r"(?:action|move|command|answer|choice)\s*[:=][\s\"'`*\[]*([^\n\"'`*\]{}]{1,80})",
    re.IGNORECASE,
)
_WORD = re.compile(r"[A-Za-z0-9_\-]+")


@dataclass(frozen=True)
class ParseResult:
    """Outcome of one parse: what ``info["parse"]`` carries.

    ``action`` is an index into the valid actions (discrete) or a numpy array (box).
    ``clipped`` is True when a box action had to be clipped into the action bounds.
    """

    ok: bool
    method: str
    action: Any
    error: str | None = None
    clipped: bool = False

    def as_dict(self) -> dict[str, Any]:
        """The ``info["parse"]`` dictionary."""
        return {
            "ok": self.ok,
            "method": self.method,
            "action": self.action,
            "error": self.error,
            "clipped": self.clipped,
        }


def _tail(text: object) -> str:
    if not isinstance(text, str):
        text = "" if text is None else str(text)
    return text[-MAX_SCAN_CHARS:]


def json_values(text: str) -> list[Any]:
    """Action values of JSON objects found in ``text`` (in order of appearance), plus the
    whole text itself when it is a bare JSON scalar or list.

    Example:
        >>> json_values('I go {"action": "left"}, then {"move": 2}.')
        ['left', 2]
        >>> json_values("3")
        [3]
    """
    decoder = json.JSONDecoder()
    values: list[Any] = []
    stripped = text.strip().strip("`").strip()
    if stripped[:1] in '[-0123456789"':
        try:
            values.append(json.loads(stripped))
        except (ValueError, RecursionError):
            pass
    starts = [m.start() for m in re.finditer(r"\{", text)][:_MAX_JSON_STARTS]
    end_of_last = -1
    for start in starts:
        if start < end_of_last:
            continue
        try:
            obj, end = decoder.raw_decode(text, start)
        except (ValueError, RecursionError):
            continue
        end_of_last = end
        if isinstance(obj, dict):
            lowered = {str(k).lower(): v for k, v in obj.items()}
            for key in ACTION_KEYS:
                if key in lowered:
                    values.append(lowered[key])
                    break
    return values


def _name_index(value: Any, names: Sequence[str]) -> int | None:
    """Index of the valid action that ``value`` names, or None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        if str(value) in names:
            return list(names).index(str(value))
        return value if 0 <= value < len(names) else None
    if isinstance(value, float) and value.is_integer():
        return _name_index(int(value), names)
    if not isinstance(value, str):
        return None
    wanted = value.strip().strip(".!").strip().lower()
    for i, name in enumerate(names):
        if name.lower() == wanted:
            return i
    if re.fullmatch(r"\d{1,6}", wanted):
        return _name_index(int(wanted), names)
    return None


def _last_mention(text: str, names: Sequence[str]) -> int | None:
    """The valid name mentioned last as a whole word (longest name on ties)."""
    best: tuple[int, int, int] | None = None
    for i, name in enumerate(names):
        if not name or name.isdigit():
            continue
        pattern = r"(?<![A-Za-z0-9_])" + re.escape(name) + r"(?![A-Za-z0-9_])"
        for match in re.finditer(pattern, text, re.IGNORECASE):
            key = (match.end(), len(name), i)
            if best is None or key > best:
                best = key
    return None if best is None else best[2]


def _fuzzy(text: str, names: Sequence[str]) -> int | None:
    """A close spelling of a name; numbers are names only when written exactly (JSON, a label
    or the whole answer), never by resemblance."""
    lowered = {n.lower(): i for i, n in reversed(list(enumerate(names))) if not n.isdigit()}
    if not lowered:
        return None
    words = _WORD.findall(text)[-200:]
    candidates = [text.strip().lower()] + [w.lower() for w in reversed(words)]
    candidates += [f"{a} {b}".lower() for a, b in zip(words, words[1:])][::-1]
    for candidate in candidates:
        match = difflib.get_close_matches(candidate, list(lowered), n=1, cutoff=_FUZZY_CUTOFF)
        if match:
            return lowered[match[0]]
    return None


def parse_discrete(text: str, names: Sequence[str], fallback: int = 0) -> ParseResult:
    """Parse ``text`` into an index of ``names`` (JSON → regex → fuzzy → fallback).

    Example:
        >>> parse_discrete('```json\\n{"move": 1}\\n```', ["LEFT", "RIGHT"]).action
        1
        >>> parse_discrete("go left, no wait, RIGHT", ["LEFT", "RIGHT"]).action
        1
        >>> parse_discrete("lefft", ["LEFT", "RIGHT"]).method
        'fuzzy'
        >>> parse_discrete('{"action": [2, 1]}', ["0", "1", "2"]).method
        'fallback'
    """
    if not names:
        raise ValueError("parse_discrete needs at least one valid action name.")
    text = _tail(text)
    values = json_values(text)
    for value in reversed(values):
        index = _name_index(value, names)
        if index is not None:
            return ParseResult(True, "json", index)
    if values and isinstance(values[-1], (list, dict)):  # e.g. {"action": [2, 1]}
        return ParseResult(
            False,
            "fallback",
            fallback,
            f"the answer's action {_tail(json.dumps(values[-1]))[:80]} is not one of the "
            f"actions ({', '.join(names)})",
        )
    for match in reversed(list(_LABELLED.finditer(text))):
        label = match.group(1)
        index = _name_index(label, names)
        if index is None:
            index = _last_mention(label, names)
        if index is not None:
            return ParseResult(True, "regex", index)
    index = _last_mention(text, names)
    if index is not None:
        return ParseResult(True, "regex", index)
    index = _fuzzy(text, names)
    if index is not None:
        return ParseResult(True, "fuzzy", index)
    return ParseResult(
        False, "fallback", fallback, f"no valid action ({', '.join(names)}) found in the text"
    )


def _as_numbers(value: Any, size: int) -> list[float] | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        value = [value]
    if isinstance(value, str):
        value = [float(m) for m in _NUMBER.findall(value)[:size]]
    if not isinstance(value, list) or len(value) != size:
        return None
    try:
        numbers = [float(v) for v in value if not isinstance(v, bool)]
    except (TypeError, ValueError, OverflowError):
        return None
    if len(numbers) != size or not all(math.isfinite(v) for v in numbers):
        return None
    return numbers


def parse_box(
    text: str,
    low: Sequence[float] | np.ndarray,
    high: Sequence[float] | np.ndarray,
    integer: bool = False,
    dtype: Any = np.float32,
) -> ParseResult:
    """Parse ``text`` into a flat float array within ``[low, high]`` (JSON → regex → fallback).

        Numbers come from a JSON ``{"action": x}`` or ``[x, y]``, else the numbers after
        ``Action:``, else the last ``len(low)`` numbers in the text. Out-of-bounds values are
        clipped and ``clipped`` says so. ``integer=True`` rounds (MultiDiscrete, MultiBinary).
    The action has ``dtype`` (float32 unless told).

        Example:
            >>> parse_box("push with 0.5 please", low=[-1.0], high=[1.0]).action
            array([0.5], dtype=float32)
            >>> parse_box("nothing", low=[-2.0, 0.0], high=[2.0, 1.0]).action
            array([0., 0.], dtype=float32)
    """
    lo = np.asarray(low, dtype=np.float64).ravel()
    hi = np.asarray(high, dtype=np.float64).ravel()
    size = lo.size
    text = _tail(text)

    def result(numbers: list[float], method: str) -> ParseResult:
        raw = np.asarray(numbers, dtype=np.float64)
        if integer:
            raw = np.round(raw)
        action = np.clip(raw, lo, hi)
        clipped = bool(np.any(action != raw))
        error = "value clipped into the action bounds" if clipped else None
        return ParseResult(True, method, action.astype(dtype), error, clipped)

    for value in reversed(json_values(text)):
        numbers = _as_numbers(value, size)
        if numbers is not None:
            return result(numbers, "json")
    for match in reversed(list(_LABELLED.finditer(text))):
        numbers = _as_numbers(match.group(1), size)
        if numbers is not None:
            return result(numbers, "regex")
    found = _NUMBER.findall(text)
    if len(found) >= size:
        numbers = _as_numbers([float(f) for f in found[-size:]], size)
        if numbers is not None:
            return result(numbers, "regex")
    fallback = np.clip(np.zeros(size), lo, hi).astype(dtype)
    return ParseResult(False, "fallback", fallback, f"expected {size} number(s) in the answer")
