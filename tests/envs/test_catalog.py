"""The catalog is the one table of envs: every registered Text-* id has an entry, every entry
whose library is installed is registered, and what the entries name exists. The tables other
packages keep per env (experts, SB3 recipes, suites, episode counts, reference returns) name
catalog envs only, and ``llmgym.envs`` imports none of those packages."""

import ast
import importlib.util
from pathlib import Path

import gymnasium as gym
import pytest

import llmgym
from llmgym.baselines.agents import EXPERTS, OPTIMAL
from llmgym.baselines.sb3 import ALGOS, HYPERPARAMS
from llmgym.baselines.sb3_recipes import RECIPES
from llmgym.bench.report import REFERENCE_RETURNS
from llmgym.bench.suites import EPISODES, SUITES
from llmgym.envs.catalog import CATALOG, base_id, entry, text_id
from llmgym.envs.registration import describer_for

INSTALLED = [e for e in CATALOG if e.requires is None or importlib.util.find_spec(e.requires)]


def test_every_registered_text_id_has_a_catalog_entry():
    missing = [i for i in llmgym.text_env_ids() if entry(i) is None]
    assert not missing, f"registered without a catalog entry: {missing}"


def test_every_installed_catalog_entry_is_registered():
    registered = set(llmgym.text_env_ids())
    assert [e.id for e in INSTALLED if e.id not in registered] == []


def test_ids_are_unique():
    ids = [e.id for e in CATALOG]
    assert len(ids) == len(set(ids))


@pytest.mark.parametrize("e", [e for e in CATALOG if e.base], ids=lambda e: e.id)
def test_wrapped_entries_name_their_base_env_and_describer(e):
    assert e.id == f"Text-{e.base}" and e.base in gym.registry
    if e.requires is None or importlib.util.find_spec(e.requires):
        base = gym.make(e.base)
        assert type(base.unwrapped).__name__ == e.env_class
        assert describer_for(base) is e.describer


def test_the_per_env_tables_name_catalog_envs():
    ids = {e.id for e in CATALOG}
    assert set(OPTIMAL) <= {e.env_class for e in CATALOG} and set(OPTIMAL.values()) <= set(
        EXPERTS.values()
    )
    assert set(RECIPES) <= {e.base for e in CATALOG if e.base}
    assert {algo for recipes in RECIPES.values() for algo in recipes} <= set(ALGOS)
    assert {i for ids_ in SUITES.values() for i in ids_} <= ids
    assert list(EPISODES) == [e.id for e in CATALOG]
    assert set(REFERENCE_RETURNS) <= ids


def test_the_tables_keep_their_values():
    assert OPTIMAL["BlackjackEnv"] is EXPERTS["blackjack"]
    assert OPTIMAL["FrozenLakeEnv"] is OPTIMAL["TaxiEnv"] is EXPERTS["tabular"]
    assert HYPERPARAMS[("CartPole-v1", "ppo")] is RECIPES["CartPole-v1"]["ppo"]
    assert HYPERPARAMS[(base_id("Taxi"), "dqn")].n_timesteps == 500_000
    assert EPISODES["Text-Blackjack-v1"] == 2000 and EPISODES[text_id("Taxi")] == 200
    assert REFERENCE_RETURNS["Text-FrozenLake-v1"] == (0.0139, 0.744)
    assert SUITES["classic"][0] == "Text-CartPole-v1" and "Text-GSM-v0" in SUITES["language"]
    assert not any(text_id("LunarLander") in ids_ for ids_ in SUITES.values())


def test_unknown_names_have_no_base_id():
    with pytest.raises(KeyError):
        base_id("NoSuchEnv")


def test_imports_run_one_way():
    """Imports run one way: envs <- baselines <- evaluation <- bench (also inside functions)."""
    root = Path(llmgym.__file__).parent
    later = {"envs": ("baselines", "evaluation", "bench"), "baselines": ("evaluation", "bench")}
    later["evaluation"] = ("bench",)
    found = []
    for package, forbidden in later.items():
        for path in (root / package).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text())):
                names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
                if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                    names = [node.module, *(f"{node.module}.{a.name}" for a in node.names)]
                found += [
                    f"{path.relative_to(root)}: {name}"
                    for name in names
                    if name.split(".")[:2] in [["llmgym", f] for f in forbidden]
                ]
    assert found == []
