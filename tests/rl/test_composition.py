"""The engine is composed, not mixed: no class in ``llmgym/rl/`` takes its base from another
``rl/`` module (configs and Protocols are exempt), so each part gets what it uses through its
constructor (``llmgym.rl.trainer``'s docstring names them)."""

from __future__ import annotations

import ast
from pathlib import Path

import llmgym.rl

RL = Path(llmgym.rl.__file__).parent
EXEMPT_BASES = {"Protocol"}
CONFIGS = ("Config", "Section")  # a config class may extend another (QACConfig(PPOConfig))


def _module_name(path: Path) -> str:
    parts = path.relative_to(RL.parent.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imported_names(tree: ast.Module) -> dict[str, str]:
    """name -> the module it was imported from (``from M import name``)."""
    return {
        alias.asname or alias.name: node.module or ""
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom)
        for alias in node.names
    }


def cross_module_bases() -> list[str]:
    """``module.Class(Base)`` for each class whose base is defined in another ``rl/`` module."""
    found = []
    for path in sorted(RL.rglob("*.py")):
        module = _module_name(path)
        tree = ast.parse(path.read_text())
        imported = _imported_names(tree)
        for node in ast.walk(tree):
            if not isinstance(node, ast.ClassDef) or node.name.endswith(CONFIGS):
                continue
            for base in node.bases:
                name = base.id if isinstance(base, ast.Name) else getattr(base, "attr", "")
                source = imported.get(name, "")
                if name in EXEMPT_BASES:
                    continue
                if source.startswith("llmgym.rl") and source != module:
                    found.append(f"{module}.{node.name}({name} from {source})")
    return found


def test_no_rl_class_inherits_from_another_rl_module():
    assert cross_module_bases() == []


def test_the_check_catches_a_mixin(tmp_path, monkeypatch):
    package = tmp_path / "llmgym" / "rl"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "parts.py").write_text("class Part:\n    pass\n")
    (package / "loop.py").write_text(
        "from llmgym.rl.parts import Part\n\nclass Loop(Part):\n    pass\n"
    )
    (package / "config.py").write_text(
        "from llmgym.rl.parts import Part\n\nclass PPOConfig(Part):\n    pass\n"
    )
    monkeypatch.setattr(f"{__name__}.RL", package)
    assert cross_module_bases() == ["llmgym.rl.loop.Loop(Part from llmgym.rl.parts)"]
