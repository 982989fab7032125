"""The composed trainer config: sections, dotted keys, flat aliases, saved configs."""

import json

import pytest

from llmgym.errors import ConfigError, TrainingError
from llmgym.rl import ALGOS, config_class
from llmgym.rl.config import (
    ALGORITHM_RULES,
    FLAT_ALIASES,
    SECTIONS,
    default_value,
    field_doc,
    flat_view,
)


def test_every_field_is_defined_once_and_every_flat_name_has_one_meaning():
    from llmgym.policy import PolicyConfig

    policy_fields = set(PolicyConfig.__dataclass_fields__)
    for algo in ("ppo", "grpo", "reinforce"):
        cls = config_class(algo)
        top = set(cls.__dataclass_fields__) - set(SECTIONS)
        for name, section in SECTIONS.items():
            assert not top & set(section.__dataclass_fields__), (algo, name)
        assert not top & set(FLAT_ALIASES), algo  # no algorithm field shadows an alias
    assert len(set(FLAT_ALIASES.values())) == len(FLAT_ALIASES)  # one key per flat name
    run_and_optim = set(SECTIONS["run"].__dataclass_fields__) | set(
        SECTIONS["optim"].__dataclass_fields__
    )
    assert not run_and_optim & policy_fields - {"seed"}  # the policy's fields live in policy


def test_dotted_flat_and_sectioned_keys_build_the_same_config():
    cls = config_class("ppo")
    dotted = cls.build({"policy.temperature": 2.0, "lora.r": 4, "sft.epochs": 3, "gamma": 0.9})
    flat = cls.build({"temperature": 2.0, "lora_r": 4, "sft_epochs": 3, "gamma": 0.9})
    nested = cls.build({"policy": {"temperature": 2.0}, "lora": {"r": 4}, "sft": {"epochs": 3}})
    assert dotted == flat
    assert nested.policy == dotted.policy and nested.lora == dotted.lora
    assert cls.build({"lora": False}).lora.enabled is False  # --set lora=false
    assert cls.build({"sft": "auto"}).sft.source == "auto"  # --sft auto
    assert cls.build({"policy_kwargs": {"normalization": "token"}}).policy.normalization == "token"
    assert cls().policy.max_new_tokens == default_value(cls, "max_new_tokens") == 24


def test_saved_configs_round_trip_and_old_flat_ones_still_load():
    cls = config_class("grpo")
    config = cls.build({"group_size": 4, "eval.method": "sampled", "env_kwargs": {"a": 1}})
    saved = json.loads(json.dumps(config.to_dict()))
    assert cls.from_dict(saved) == config
    assert flat_view(saved)["eval_method"] == "sampled" and flat_view(saved)["group_size"] == 4
    old = {"env_id": "Text-FrozenLake-v1", "lora_r": 8, "policy_kwargs": {}, "removed_field": 1}
    restored = cls.from_dict(old)
    assert (restored.run.env_id, restored.lora.r) == ("Text-FrozenLake-v1", 8)


@pytest.mark.parametrize(
    "values, message",
    [
        ({"temprature": 2.0}, r"'temprature' for GRPOConfig \(did you mean policy.temperature"),
        ({"policy.nope": 1}, "Unknown config key 'policy.nope'"),
        ({"value_lr": 1e-3}, "Unknown config key 'value_lr'"),  # a PPO field, not GRPO's
        ({"policy.greedy": True}, "set by the trainer"),
        ({"optim": 3}, "optim is a section"),
    ],
)
def test_bad_keys_are_one_sentence(values, message):
    with pytest.raises(TrainingError, match=message):
        config_class("grpo").build(values)


def _fields(cls):
    """(dotted key, field, owner class) of every field of an algorithm's config."""
    import dataclasses

    for f in dataclasses.fields(cls):
        if f.name in SECTIONS:
            for g in dataclasses.fields(SECTIONS[f.name]):
                yield f"{f.name}.{g.name}", g, SECTIONS[f.name]
        else:
            yield f.name, f, cls


# Numbers any value of whose type is fine (an int seed feeds torch.Generator as it is).
UNBOUNDED = {"policy.seed", "eval.stop_at"}  # any seed; any finite return (Pendulum's are < 0)


@pytest.mark.parametrize("algo", ALGOS)
def test_every_numeric_field_has_a_rule_and_every_field_a_docstring(algo):
    import typing

    cls = config_class(algo)
    for key, f, owner in _fields(cls):
        assert field_doc(cls, key), f"{key} has no docstring (it is the option's --help)"
        hint = typing.get_type_hints(owner)[f.name]
        numeric = {int, float} & {hint, *typing.get_args(hint)}
        ruled = "rule" in f.metadata or f.name in ALGORITHM_RULES and owner is cls
        if numeric and key not in UNBOUNDED:
            assert ruled, f"{key} is a number with no rule(...): say which values it takes"


def test_values_are_checked_again_by_validate_and_whole_floats_become_ints():
    config = config_class("ppo").build({"lora_r": 8.0, "total_env_steps": 100.0})
    assert config.lora.r == 8 and type(config.lora.r) is int
    assert type(config.run.total_env_steps) is int
    config.optim.minibatch_size = 0  # set after the build: the trainer's validate() sees it
    with pytest.raises(ConfigError, match="optim.minibatch_size must be at least 1, not 0."):
        config.validate()


def test_a_policy_config_of_its_own_names_its_fields_without_the_section():
    from llmgym.policy import PolicyConfig

    with pytest.raises(ConfigError, match=r"^temperature must be above 0 \(greedy"):
        PolicyConfig(temperature=0.0)
    with pytest.raises(ConfigError, match=r"^history must be a whole number, not 'two'.$"):
        PolicyConfig(history="two")
    assert PolicyConfig(temperature=100).temperature == 100


def test_every_committed_run_config_still_loads_and_validates():
    import subprocess
    from pathlib import Path

    root = Path(__file__).parents[2]
    listed = subprocess.run(
        ["git", "ls-files", "*config.json"], cwd=root, capture_output=True, text=True
    ).stdout.split()
    runs = [root / p for p in listed if "weights/rl/" in p and (root / p).exists()]
    if not runs:
        pytest.skip("no committed runs in this checkout")
    for path in runs:
        from llmgym.rl.algorithms import legacy_algo

        # runs of PPO with q_critic=true load as qac, through the one mapping restoring uses
        algo, values = legacy_algo(
            *(lambda v: (v.get("algo") or "ppo", v))(json.loads(path.read_text()))
        )
        config = config_class(algo).from_dict(values)
        config.validate()
