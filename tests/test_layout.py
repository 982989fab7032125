"""The layout is the architecture: each room imports only rooms below it (also inside
functions), no module imports itself back through others, no module runs over 500 lines, and
every name the README and docs import still imports."""

from __future__ import annotations

import ast
import importlib
import re
from collections import defaultdict
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[1]
PACKAGE = ROOT / "llmgym"

#: Rooms from the bottom up: a room may import its own modules and rooms of a lower rank.
RANKS = {
    "errors": 0,
    "files": 1,
    "parsing": 1,
    "config": 1,
    "resources": 1,
    "describers": 1,
    "wrappers": 2,
    "envs": 3,
    "rollout": 4,
    "baselines": 5,
    "policy": 5,
    "evaluation": 6,
    "rl": 7,
    "recipes": 8,
    "agents": 8,
    "integrations": 8,
    "bench": 9,
    "cli": 10,
    "__main__": 11,
}


def _modules() -> dict[str, Path]:
    out = {}
    for path in PACKAGE.rglob("*.py"):
        name = ".".join(path.relative_to(ROOT).with_suffix("").parts)
        out[name.removesuffix(".__init__")] = path
    return out


MODULES = _modules()


def _imports(path: Path) -> set[str]:
    """The llmgym modules ``path`` imports anywhere (functions included); ``from pkg import
    sub`` counts as the submodule."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("llmgym"):
            for alias in node.names:
                sub = f"{node.module}.{alias.name}"
                found.add(sub if sub in MODULES else node.module)
        elif isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.startswith("llmgym")}
    return found


def _room(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else None  # None: the package root (public API)


def test_every_room_has_a_rank():
    rooms = {_room(m) for m in MODULES} - {None}
    assert rooms == set(RANKS), "add the new room to RANKS (and to docs/architecture)"


@pytest.mark.parametrize("module", sorted(MODULES))
def test_imports_run_down_the_layers(module):
    room = _room(module)
    if room is None:
        return
    upward = [
        target
        for target in _imports(MODULES[module])
        if _room(target) not in (None, room) and RANKS[_room(target)] >= RANKS[room]
    ]
    assert not upward, f"{module} imports {upward}: a room of the same or a higher rank"


def test_no_module_imports_itself_back():
    edges = defaultdict(set)
    for module, path in MODULES.items():
        for target in _imports(path):
            while target and target not in MODULES:
                target = target.rpartition(".")[0]
            if target not in (module, "llmgym"):
                edges[module].add(target)
    state: dict[str, int] = {}

    def visit(node: str, trail: list[str]) -> None:
        state[node] = 1
        for nxt in edges[node]:
            assert state.get(nxt) != 1, f"import cycle: {' -> '.join(trail + [node, nxt])}"
            if nxt not in state:
                visit(nxt, trail + [node])
        state[node] = 2

    for module in MODULES:
        if module not in state:
            visit(module, [])


@pytest.mark.parametrize("module", sorted(MODULES))
def test_no_module_over_500_lines(module):
    lines = len(MODULES[module].read_text().splitlines())
    assert lines <= 500, f"{module} has {lines} lines"


def _documented_imports() -> list[str]:
    """``from llmgym... import a, b`` lines in the README's and the docs' code blocks."""
    pattern = re.compile(r"^\s*(?:>>>\s*)?from (llmgym[\w.]*) import ([\w, ()]+)$", re.M)
    found = []
    for page in [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]:
        for module, names in pattern.findall(page.read_text()):
            for name in names.strip("()").split(","):
                if name.strip():
                    found.append(f"{module}:{name.strip()}")
    return sorted(set(found))


@pytest.mark.parametrize("spec", _documented_imports())
def test_names_the_docs_import_still_import(spec):
    pytest.importorskip("torch")
    module, name = spec.split(":")
    assert hasattr(importlib.import_module(module), name) or importlib.import_module(
        f"{module}.{name}"
    )


@pytest.mark.parametrize("name", importlib.import_module("llmgym.agents").__all__)
def test_llmgym_agents_re_exports_each_name(name):
    pytest.importorskip("torch")
    assert getattr(importlib.import_module("llmgym.agents"), name) is not None


def test_import_llmgym_stays_free_of_torch():
    import subprocess
    import sys

    code = "import sys, llmgym, gymnasium as gym; gym.make('Text-CartPole-v1')"
    code += "; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
