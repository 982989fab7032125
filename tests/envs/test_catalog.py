"""The catalog is the one table of envs: every registered Text-* id has an entry, every entry
whose library is installed is registered, and what the entries name exists."""

import importlib.util

import gymnasium as gym
import pytest

import llmgym
from llmgym.baselines.agents import EXPERTS, OPTIMAL
from llmgym.baselines.sb3 import ALGOS, HYPERPARAMS
from llmgym.bench.report import REFERENCE_RETURNS
from llmgym.bench.suites import EPISODES, SUITES
from llmgym.envs.catalog import CATALOG, entry
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


def test_experts_and_recipes_are_known():
    assert {e.expert for e in CATALOG if e.expert} <= set(EXPERTS)
    assert {algo for e in CATALOG for algo in e.sb3} <= set(ALGOS)


def test_the_tables_are_read_from_the_catalog():
    assert OPTIMAL["BlackjackEnv"] is EXPERTS[entry("Text-Blackjack-v1").expert]
    assert HYPERPARAMS[("CartPole-v1", "ppo")] is entry("Text-CartPole-v1").sb3["ppo"]
    assert EPISODES["Text-Blackjack-v1"] == entry("Text-Blackjack-v1").episodes
    assert REFERENCE_RETURNS["Text-FrozenLake-v1"] == entry("Text-FrozenLake-v1").reference
    assert {i for ids in SUITES.values() for i in ids} == {e.id for e in CATALOG if e.suites}
