"""The memory estimator (llmgym.resources), with the memory available patched."""

from __future__ import annotations

import pytest

import llmgym.resources as resources
from llmgym.errors import ConfigError
from llmgym.resources import ModelShape, RunSize

SMOLLM2 = ModelShape(49152, 576, 30, 1536, 9, 3, 64, 8192, True)


def test_the_parameter_count_is_the_models():
    from llmgym.policy.testing import tiny_model

    model, _ = tiny_model()
    shape = ModelShape.from_config(model.config.to_dict())
    assert shape.parameters() == sum(p.numel() for p in model.parameters())
    assert 134e6 < SMOLLM2.parameters() < 135e6  # SmolLM2-135M


def test_lora_parameters_are_r_times_the_target_dims():
    from peft import LoraConfig, get_peft_model

    from llmgym.policy.testing import tiny_model

    model, _ = tiny_model()
    shape = ModelShape.from_config(model.config.to_dict())
    peft = get_peft_model(model, LoraConfig(r=4, target_modules=["q_proj", "v_proj"]))
    trained = sum(p.numel() for p in peft.parameters() if p.requires_grad)
    assert shape.lora_parameters(4, ["q_proj", "v_proj"]) == trained
    assert shape.lora_parameters(4, ["q_proj", "v_proj"], layers=1) == trained // 2


@pytest.mark.parametrize(
    "change, says",
    [
        ({"hidden_size": -5}, "x/config.json sets hidden_size to -5"),
        ({"num_hidden_layers": "2"}, "sets num_hidden_layers to '2'"),
        ({"vocab_size": None}, "x/config.json names no vocab_size"),
    ],
)
def test_a_damaged_config_is_named(change, says):
    config = {"hidden_size": 64, "num_hidden_layers": 2, "vocab_size": 10} | change
    with pytest.raises(ConfigError, match=says):
        ModelShape.from_config(config, "x/config.json")


def test_a_multimodal_config_is_read_from_its_text_part():
    config = {"text_config": {"hidden_size": 64, "num_hidden_layers": 2, "vocab_size": 10}}
    assert ModelShape.from_config(config).num_hidden_layers == 2


def test_the_memory_available_is_patched_in_every_check(monkeypatch):
    monkeypatch.setattr(resources, "available_memory", lambda: 2 * 10**9)
    resources.check_training(SMOLLM2, RunSize(lora_layers=8))
    with pytest.raises(
        ConfigError,
        match=r"about 4\.1 GB of memory \(the rollout 3\.2 GB.* but 2\.0 GB is available",
    ):
        resources.check_training(SMOLLM2, RunSize(lora_layers=8, episodes=10**6))
    monkeypatch.setattr(resources, "available_memory", lambda: None)  # unknown: nothing refused
    resources.check_training(SMOLLM2, RunSize(lora_layers=8, episodes=10**6))


def test_a_lora_rank_above_the_smallest_target_dim_is_refused():
    assert SMOLLM2.smallest_dim(["q_proj", "v_proj"]) == 192  # 3 kv heads x 64
    assert SMOLLM2.smallest_dim("all-linear") == 192
    resources.check_training(SMOLLM2, RunSize(lora_r=192), available=10**12)
    with pytest.raises(ConfigError, match="lora.r is 193 .* use lora.r of at most 192"):
        resources.check_training(SMOLLM2, RunSize(lora_r=193, lora_targets=["v_proj"]), 10**12)


def test_largest_batch_grows_with_the_memory_and_is_0_when_nothing_fits(monkeypatch):
    size = RunSize(lora_layers=8)
    sizes = [resources.largest_batch(SMOLLM2, size, available=n * 10**9) for n in (1, 2, 4)]
    assert 0 < sizes[0] < sizes[1] < sizes[2]
    assert resources.largest_batch(SMOLLM2, size, available=10**8) == 0  # not even the weights
    monkeypatch.setattr(resources, "available_memory", lambda: None)
    assert resources.largest_batch(SMOLLM2, size, limit=64) == 64
    # what it sizes fits, one more does not
    fits = sizes[1]
    resources.check_fits(resources.training_memory(SMOLLM2, _envs(size, fits)), 2 * 10**9)
    with pytest.raises(ConfigError):
        resources.check_fits(resources.training_memory(SMOLLM2, _envs(size, fits + 1)), 2 * 10**9)


def _envs(size: RunSize, n: int) -> RunSize:
    from dataclasses import replace

    return replace(size, num_envs=n)


def test_the_available_memory_is_read_from_the_system():
    available = resources.available_memory()
    assert available is None or available > 0
    assert all(n > 0 for n in resources._meminfo())


def test_a_long_prompt_counts_at_most_the_context():
    short = ModelShape(10, 8, 1, 16, 1, 1, 8, 100)
    assert RunSize(prompt_tokens=10**9, new_tokens=5).tokens(short) == 100


def test_the_plan_refuses_what_does_not_fit(monkeypatch):
    from llmgym.rl.plan import TrainRequest, plan_run

    request = TrainRequest("Text-Blackjack-v1", given={"policy.model": "tiny"})
    monkeypatch.setattr(resources, "available_memory", lambda: 10**5)
    with pytest.raises(ConfigError, match="but 0 MB is available"):
        plan_run(request)
    monkeypatch.setattr(resources, "available_memory", lambda: 10**10)
    assert plan_run(request).config.policy.model == "tiny"


def test_a_trainer_built_from_python_checks_the_memory_before_its_model_loads(monkeypatch):
    """``Trainer(config)`` and ``make_trainer`` (no CLI plan) refuse what cannot fit in one
    sentence, as ``llmgym train`` does, before loading anything."""
    pytest.importorskip("peft")
    from llmgym.rl import make_trainer, trainer

    def no_loading(*args, **kwargs):
        raise AssertionError("the model loaded before the memory check")

    monkeypatch.setattr(resources, "available_memory", lambda: 10**6)  # 1 MB
    monkeypatch.setattr(trainer, "load_model_for", no_loading)
    with pytest.raises(ConfigError, match="memory"):
        make_trainer("ppo", model="tiny", output_dir="unused")
