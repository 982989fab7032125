"""The HF backend's weights key without a walk over the modules on every call (issue 51): the
kept list of parameters and adapter layers must never go stale. After every kind of change the
key equals a fresh walk's (``weights_key_walked``) and differs from the key before it."""

from __future__ import annotations

import torch

from llmgym.policy.backends.hf import TransformersBackend, weights_key_walked
from llmgym.policy.testing import tiny_model


def _lora(model, name="default"):
    from peft import LoraConfig, get_peft_model

    return get_peft_model(model, LoraConfig(r=2, target_modules=["q_proj", "v_proj"]), name)


def test_the_kept_key_follows_every_change_of_the_weights():
    model = _lora(tiny_model()[0])
    backend = TransformersBackend(model, 0, "cpu")
    keys = []

    def check(what: str) -> None:
        key = backend.weights_key()
        assert key == weights_key_walked(backend.model), what
        assert not keys or key != keys[-1], f"the key did not change: {what}"
        keys.append(key)

    check("first")
    lora = [p for n, p in model.named_parameters() if "lora_B" in n]
    optimizer = torch.optim.AdamW(lora, lr=0.1)
    sum(p.sum() for p in lora).backward()
    optimizer.step()
    check("an optimizer step")
    model.load_state_dict({k: v + 1 for k, v in model.state_dict().items() if "lora_A" in k}, False)
    check("a checkpoint loaded")
    with torch.no_grad():
        next(model.parameters()).mul_(1.0)  # in place, even a no-op
    check("an in-place write")
    model.train(not model.training)
    check("train/eval mode switched")
    model.train(not model.training)
    check("switched back")
    with model.disable_adapter():
        check("adapters off")
    check("adapters on again")
    model.add_adapter("other", model.peft_config["default"])  # new layers: a new walk
    check("an adapter added")
    model.set_adapter("other")
    check("another adapter active")
    new = [p for n, p in model.named_parameters() if "lora_A.other" in n]
    with torch.no_grad():
        new[0].add_(1.0)  # a parameter the first walk did not list
    check("the new adapter's weight written")
    layer = model.base_model.model.model.layers[0].mlp
    layer.up_proj.weight = torch.nn.Parameter(layer.up_proj.weight.detach().clone())
    with torch.no_grad():
        layer.up_proj.weight.add_(1.0)  # a parameter replaced, then written
    check("a parameter replaced and written")
    backend.model = _lora(tiny_model(seed=1)[0])  # another model
    check("another model")


def test_the_key_is_kept_without_walking_the_modules(monkeypatch):
    model = _lora(tiny_model()[0])
    backend = TransformersBackend(model, 0, "cpu")
    backend.weights_key()
    walks = []
    real = type(model).modules

    def counted(self):
        walks.append(1)
        return real(self)

    monkeypatch.setattr(type(model), "modules", counted)
    for _ in range(5):
        backend.weights_key()
    assert walks == []  # no walk on the hot path
    backend.sync_weights()  # the policy's clear_cache(): the next key walks anew
    backend.weights_key()
    assert walks == [1]
