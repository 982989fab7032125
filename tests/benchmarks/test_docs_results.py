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


# Inline fields: prose that repeats a figure of the headline is made by the same script.
def test_an_inline_field_is_rewritten_from_the_records(script):
    stale = "seed 1 ended at <!-- r:final-s1:blackjack-ppo -->-0.5<!-- /r --> (9 of 9)"
    fresh = script.render(stale)
    assert fresh.startswith("seed 1 ended at <!-- r:final-s1:blackjack-ppo -->-0.0621<!-- /r -->")
    text = (
        "<!-- r:reached:blackjack-lm-ppo -->x<!-- /r -->, "
        "<!-- r:control:blackjack-ppo -->x<!-- /r -->"
    )
    assert script.render(text) == (
        "<!-- r:reached:blackjack-lm-ppo -->2 of 3<!-- /r -->, "
        "<!-- r:control:blackjack-ppo -->-0.1037, -0.0822, -0.0860<!-- /r -->"
    )
    assert script.field("control-s2:cartpole-ppo-layer8g") == "351.25 ± 43.62"
    assert script.field("start:cartpole-ppo-layer8g") == "9.35"


@pytest.mark.parametrize(
    "key, says",
    [
        ("finals:nope", "no headline recipe 'nope'"),
        ("bogus:blackjack-ppo", "no field 'bogus'"),
        ("final-s7:blackjack-ppo", "no record blackjack-ppo-s7"),
        ("control:cartpole-lm-ppo", "no records"),
    ],
)
def test_an_unknown_inline_field_is_refused(script, key, says):
    with pytest.raises(SystemExit, match=says):
        script.render(f"<!-- r:{key} -->?<!-- /r -->")


def test_every_inline_field_is_whole_on_one_line(script):
    """A field broken across lines would not be matched, so would go stale unseen."""
    for page in script.pages():
        text = page.read_text()
        opened = text.count("<!-- r:")
        assert opened == len(script.FIELD.findall(text)) == text.count("<!-- /r -->"), (
            f"{page.relative_to(ROOT)}: an inline field <!-- r:... --> is not closed by "
            "<!-- /r --> on its line"
        )


def test_the_pages_of_issue_52_take_their_figures_from_the_records(script):
    """docs/index.md and the RL-from-scratch page once said other seed counts than their tables."""
    for name, at_least in [
        ("docs/index.md", 6),
        ("docs/results/rl-from-scratch.md", 20),
        ("docs/results/index.md", 3),
        ("docs/results/sample-efficiency.md", 20),  # its prose restates its table's steps
    ]:
        fields = script.FIELD.findall((ROOT / name).read_text())
        assert len(fields) >= at_least, f"{name}: {len(fields)} inline fields"
    index = (ROOT / "docs/index.md").read_text()
    for recipe in ("blackjack-lm-ppo", "blackjack-lm-ppo-ema", "blackjack-lm-gen"):
        assert f"<!-- r:reached:{recipe} -->{script.field('reached:' + recipe)}<!-- /r -->" in index
