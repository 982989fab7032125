"""Model loading: registry, local directories, clear errors."""

from __future__ import annotations

import pytest

from llmgym.policy.models import (
    MODEL_REGISTRY,
    ModelNotFoundError,
    get_model_defaults,
    load_model,
    resolve_dtype,
)

HUB_IDS = [
    "Qwen/Qwen2.5-0.5B-Instruct",
    "HuggingFaceTB/SmolLM2-360M-Instruct",
    "TinyLlama/TinyLlama-1.1B-Chat-v1.0",
    "Qwen/Qwen2-1.5B-Instruct",
    "microsoft/Phi-3-mini-4k-instruct",
    "meta-llama/Llama-3.2-1B-Instruct",
]


@pytest.mark.parametrize("hub_id", HUB_IDS)
def test_hub_ids_are_registered(hub_id):
    defaults = get_model_defaults(hub_id)
    assert defaults.hub_id == hub_id and defaults.gguf is None
    assert defaults.lora_target_modules != "all-linear"
    assert any(d.hub_id == hub_id for d in MODEL_REGISTRY.values())


def test_local_directory_loads(tmp_path):
    import torch

    from llmgym.policy.testing import tiny_model

    model, tokenizer = tiny_model(2)
    model.save_pretrained(tmp_path, safe_serialization=True)
    tokenizer.save_pretrained(tmp_path)
    assert (tmp_path / "model.safetensors").exists()
    loaded, loaded_tokenizer = load_model(str(tmp_path), device="cpu")
    assert loaded_tokenizer.padding_side == "left" and loaded_tokenizer.pad_token is not None
    assert loaded.dtype == torch.float32 and not loaded.training
    for a, b in zip(model.state_dict().values(), loaded.state_dict().values()):
        assert torch.equal(a, b)


def test_missing_directory_is_one_clear_sentence(tmp_path):
    with pytest.raises(ModelNotFoundError, match="No model directory") as error:
        load_model(str(tmp_path / "nope" / "model"))
    assert "\n" not in str(error.value)


def test_unreachable_hub_is_one_clear_sentence(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(ModelNotFoundError, match="Hub cannot be reached") as error:
        load_model("nobody-llmgym/no-such-model")
    assert "\n" not in str(error.value)


def test_bad_device_and_dtype():
    with pytest.raises(ValueError, match="Unknown device"):
        load_model(device="tpu")
    with pytest.raises(ValueError, match="Unknown dtype"):
        resolve_dtype("float7", "cpu")


def test_llmgym_dtype_sets_the_default_dtype(monkeypatch):
    import torch

    monkeypatch.setenv("LLMGYM_DTYPE", "float32")
    assert resolve_dtype(None, "cuda") is torch.float32
    assert resolve_dtype("bfloat16", "cuda") is torch.bfloat16  # an explicit dtype wins
    monkeypatch.setenv("LLMGYM_DTYPE", "float7")
    with pytest.raises(ValueError, match="Unknown dtype"):
        resolve_dtype(None, "cpu")


def test_loading_a_model_draws_no_progress_bar(tmp_path, capfd):
    from llmgym.policy.models import load_model
    from llmgym.policy.testing import tiny_model_dir

    folder = tiny_model_dir("llama", tmp_path / "m", layers=2)
    capfd.readouterr()
    load_model(str(folder), device="cpu")
    out, err = capfd.readouterr()
    assert "%|" not in err + out, err
