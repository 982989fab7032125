"""The weights' dtype (issue 51): ``policy.dtype=auto`` is bfloat16 on CUDA (float16 where a
GPU has no bf16) and float32 on the CPU, while what trains (the LoRA adapter, the action head)
and the optimizer's state stay float32. Checked without a GPU: the decision's function with
``device="cuda"``, then the tiny model loaded in bf16 on the CPU through one update."""

from __future__ import annotations

import pytest
import torch

from llmgym.policy.models import load_model_for, resolve_dtype
from llmgym.rl.algorithms.ppo import PPOConfig


@pytest.fixture(autouse=True)
def _no_dtype_override(monkeypatch):
    monkeypatch.delenv("LLMGYM_DTYPE", raising=False)


def test_auto_is_bf16_on_cuda_and_fp32_on_the_cpu(monkeypatch):
    assert PPOConfig().policy.dtype == "auto"  # the default: resolved per device
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *a, **k: True)
    assert resolve_dtype(None, "cuda") == torch.bfloat16
    assert resolve_dtype(None, "cuda:1") == torch.bfloat16
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *a, **k: False)
    assert resolve_dtype(None, "cuda") == torch.float16  # a GPU before Ampere
    assert resolve_dtype(None, "cpu") == torch.float32
    assert resolve_dtype(None, "mps") == torch.float32


def test_lora_head_and_optimizer_state_are_fp32_over_bf16_weights():
    from llmgym.rl.trainer import Trainer

    config = PPOConfig.build(
        {
            "model": "tiny",
            "device": "cpu",
            "dtype": "bfloat16",  # what auto gives on CUDA, here on the CPU
            "num_envs": 2,
            "episodes_per_update": 2,
            "progress": False,
            "update_epochs": 1,
        }
    )
    model, tokenizer = load_model_for("tiny", "cpu", "bfloat16")
    trainer = Trainer(config, model=model, tokenizer=tokenizer)
    trained = dict(trainer.learner.policy_parameters())
    for name, module in trainer.learner.extra_modules.items():  # the critic, if any
        trained |= {f"{name}.{k}": p for k, p in module.named_parameters() if p.requires_grad}
    assert any("lora_" in n for n in trained) and any("action_head" in n for n in trained)
    assert {p.dtype for p in trained.values()} == {torch.float32}, {
        n: p.dtype for n, p in trained.items() if p.dtype != torch.float32
    }
    frozen = {p.dtype for p in trainer.model.parameters() if not p.requires_grad}
    assert frozen == {torch.bfloat16}  # the base weights stay in the device's dtype
    trainer.train_on_episodes(trainer.collect())
    optimizer = trainer.learner.optimizer
    states = [
        v
        for opt in getattr(optimizer, "optimizers", [optimizer])
        for state in opt.state.values()
        for v in state.values()
        if torch.is_tensor(v) and v.numel() > 1
    ]
    assert states and {v.dtype for v in states} == {torch.float32}
