"""Held-out variants (llmgym.envs.variants): a second wording, renamed actions and a shuffled
action list step exactly as their base env given the same semantic action (issue 53)."""

from __future__ import annotations

import importlib.util
import json
import re

import gymnasium as gym
import numpy as np
import pytest
from typer.testing import CliRunner

import llmgym  # noqa: F401  (registers the Text-* ids)
from llmgym.cli import app
from llmgym.envs.catalog import CATALOG
from llmgym.envs.registration import check_env_kwargs
from llmgym.errors import ConfigError

SEEDS = range(20)
STEPS = 25
WRAPPED = [
    e.id
    for e in CATALOG
    if e.base and e.reworded and (e.requires is None or importlib.util.find_spec(e.requires))
]
NAMED = [e.id for e in CATALOG if e.id in WRAPPED and e.synonyms]
VARIANTS = [
    {"wording": "alt"},
    {"action_names": "alt"},
    {"wording": "alt", "action_names": "alt", "shuffle_actions": 3},
]


def _answers(names: list[str] | None, action: int, step: int) -> str:
    """The answer for action id ``action`` in the env whose names are ``names``: JSON on even
    steps, a name in prose (the regex layer) on odd ones; a number for continuous actions."""
    if not names:
        return json.dumps({"action": [0.3 if step % 2 else -0.7]})
    name = names[action]
    return json.dumps({"action": name}) if step % 2 == 0 else f"I will go with {name}."


def _trace(env_id: str, kwargs: dict, seed: int) -> tuple[list, list[str]]:
    """What the base env did (raw observations, rewards, ends, parsed actions) under a seeded
    sequence of action ids, and the observation texts."""
    env = gym.make(env_id, **kwargs)
    obs, info = env.reset(seed=seed)
    rng = np.random.default_rng(seed)
    names = info["valid_actions"]
    facts, texts = [repr(info["raw_obs"])], [obs]
    for step in range(STEPS):
        action = int(rng.integers(len(names))) if names else 0
        obs, reward, terminated, truncated, info = env.step(_answers(names, action, step))
        parse = info["parse"]
        facts.append((repr(info["raw_obs"]), float(reward), terminated, truncated))
        facts.append((parse["ok"], repr(parse["action"]), action if names else None))
        texts.append(obs)
        if terminated or truncated:
            break
    env.close()
    return facts, texts


@pytest.mark.parametrize(
    "kwargs", VARIANTS, ids=lambda k: ",".join(f"{a}={b}" for a, b in k.items())
)
@pytest.mark.parametrize("env_id", WRAPPED)
def test_variant_steps_as_its_base_env(env_id, kwargs):
    if "action_names" in kwargs and env_id not in NAMED:
        kwargs = {"wording": "alt"}  # continuous actions have no names
    for seed in SEEDS:
        base_facts, base_texts = _trace(env_id, {}, seed)
        facts, texts = _trace(env_id, kwargs, seed)
        assert facts == base_facts, (env_id, seed)
        if "wording" in kwargs:
            assert texts[0] != base_texts[0]


@pytest.mark.parametrize("env_id", NAMED)
def test_renamed_actions_replace_the_names(env_id):
    entry = next(e for e in CATALOG if e.id == env_id)
    _, base = gym.make(env_id).reset(seed=0)
    _, info = gym.make(env_id, action_names="alt").reset(seed=0)
    assert info["valid_actions"] == list(entry.synonyms)
    assert not set(entry.synonyms) & set(base["valid_actions"])
    listed = [line.split(":")[0] for line in info["system_prompt"].splitlines() if line[:2] == "- "]
    assert listed == [f"- {name}" for name in entry.synonyms]


def test_a_base_name_does_not_parse_in_the_renamed_env():
    env = gym.make("Text-Blackjack-v1", action_names="alt")
    env.reset(seed=0)
    *_, info = env.step('{"action": "hit"}')
    assert info["parse"]["ok"] is False


@pytest.mark.parametrize("env_id", NAMED)
def test_shuffle_reorders_only_the_listed_actions(env_id):
    def listed(info):
        return [line for line in info["system_prompt"].splitlines() if line.startswith("- ")]

    _, base = gym.make(env_id).reset(seed=0)
    for shuffle in (True, 1, 2):
        _, info = gym.make(env_id, shuffle_actions=shuffle).reset(seed=0)
        assert info["valid_actions"] == base["valid_actions"]  # action ids keep their meaning
        assert sorted(listed(info)) == sorted(listed(base)) and listed(info) != listed(base)
        rest = [line for line in info["system_prompt"].splitlines() if line not in listed(info)]
        assert rest == [
            line for line in base["system_prompt"].splitlines() if line not in listed(base)
        ]


@pytest.mark.parametrize(
    ("env_id", "kwargs", "message"),
    [
        ("Text-Blackjack-v1", {"wording": "formal"}, "Unknown wording 'formal': use base or alt."),
        ("Text-Blackjack-v1", {"action_names": "x"}, "Unknown action_names 'x': use base or alt."),
        ("Text-Taxi-v4", {"shuffle_actions": -1}, "shuffle_actions must be true, false or a seed"),
        ("Text-Pendulum-v1", {"action_names": "alt"}, "Pendulum-v1 has no curated action names"),
        ("Text-CartPole-v1", {"wording": "alt", "describer": "generic"}, "drop describer"),
    ],
)
def test_bad_variant_options_are_one_sentence(env_id, kwargs, message):
    with pytest.raises(ConfigError, match=re.escape(message)):
        check_env_kwargs(env_id, kwargs)


def test_eval_takes_a_variant_and_refuses_a_bad_one_with_exit_2():
    runner = CliRunner()
    ok = runner.invoke(
        app,
        [
            "eval",
            "Text-Blackjack-v1",
            "--agent",
            "random",
            "--episodes",
            "5",
            "--no-progress",
            "--env-kwarg",
            "wording=alt",
            "--env-kwarg",
            "shuffle_actions=true",
        ],
    )
    assert ok.exit_code == 0 and "parse rate 100.0%" in ok.output
    bad = runner.invoke(
        app, ["eval", "Text-Blackjack-v1", "--agent", "random", "--env-kwarg", "wording=formal"]
    )
    assert bad.exit_code == 2 and "Unknown wording 'formal'" in bad.output
