"""The results tables of README.md and docs/ are what ``benchmarks/docs_results.py`` makes
from the committed records, so no page can drift from them."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def script():
    spec = importlib.util.spec_from_file_location(
        "docs_results", ROOT / "benchmarks" / "docs_results.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_block_is_the_scripts_output(script):
    stale = [
        str(page.relative_to(ROOT))
        for page in script.pages()
        if script.render(page.read_text()) != page.read_text()
    ]
    assert not stale, f"stale results blocks in {stale}: run python benchmarks/docs_results.py"


def test_each_block_appears_somewhere(script):
    text = "\n".join(p.read_text() for p in script.pages())
    missing = [name for name in script.MAKERS if f"<!-- results:{name}:start -->" not in text]
    assert not missing, f"no page shows the blocks {missing}"


def test_the_headline_counts_the_goals_from_the_records(script):
    table = script.headline()
    row = next(line for line in table.splitlines() if line.startswith("| Blackjack, PPO"))
    assert "-0.0686, -0.0621, -0.0690" in row and "**3 of 3**" in row
    row = next(line for line in table.splitlines() if line.startswith("| FrozenLake, slippery"))
    assert "**1 of 3**" in row  # 0.7281, 0.1282, 0.6010 against 0.70
    assert "the LM (LoRA)" in next(ln for ln in table.splitlines() if ln.startswith("| Arith"))


def test_an_unknown_block_is_refused(script):
    with pytest.raises(SystemExit, match="no results block named 'nope'"):
        script.render("<!-- results:nope:start -->\n<!-- results:nope:end -->")
