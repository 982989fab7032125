"""A griffe extension for the API reference: doctest lines render as code.

llmgym's docstrings put their doctests under ``Example:`` (singular), a heading griffe's
Google parser reads as an admonition, not as an examples section, so ``>>> x["ok"]`` would be
Markdown text (a block quote, and ``[...]`` a link). This fences every run of doctest lines
(``>>>``, ``...`` and the output up to a blank line) as a ``pycon`` code block before the
docstring is parsed. Only the rendered copy changes; the sources stay as they are.
"""

from __future__ import annotations

import re
from typing import Any

import griffe

PROMPT = re.compile(r"^(\s*)>>>( |$)")


def fence_doctests(text: str) -> str:
    r"""``text`` with each doctest run inside a fenced ``pycon`` block.

    Example:
        >>> fence_doctests("Sum:\n>>> 1 + 1\n2\n\nEnd.").splitlines()
        ['Sum:', '```pycon', '>>> 1 + 1', '2', '```', '', 'End.']
    """
    lines = text.splitlines()
    out: list[str] = []
    i = 0
    while i < len(lines):
        m = PROMPT.match(lines[i])
        if not m:
            out.append(lines[i])
            i += 1
            continue
        indent = m.group(1)
        out.append(f"{indent}```pycon")
        while i < len(lines) and lines[i].strip():
            line = lines[i]
            out.append(indent + line[len(indent) :] if line.startswith(indent) else line)
            i += 1
        out.append(f"{indent}```")
    return "\n".join(out)


class FenceDoctests(griffe.Extension):
    """Fences the doctests of every docstring griffe loads."""

    def on_instance(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        if obj.docstring is not None and ">>>" in obj.docstring.value:
            obj.docstring.value = fence_doctests(obj.docstring.value)
