"""The composed trainer config: sections, dotted keys, flat aliases, saved configs."""

import json

import pytest

from llmgym.errors import TrainingError
from llmgym.rl import config_class
from llmgym.rl.config import FLAT_ALIASES, SECTIONS, default_value, flat_view


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
        ({"temprature": 2.0}, "Unknown config key 'temprature'"),
        ({"policy.nope": 1}, "Unknown config key 'policy.nope'"),
        ({"value_lr": 1e-3}, "Unknown config key 'value_lr'"),  # a PPO field, not GRPO's
        ({"policy.greedy": True}, "set by the trainer"),
        ({"optim": 3}, "optim is a section"),
    ],
)
def test_bad_keys_are_one_sentence(values, message):
    with pytest.raises(TrainingError, match=message):
        config_class("grpo").build(values)
