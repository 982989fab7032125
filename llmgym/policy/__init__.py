"""The LLM as an actor: ``LLMPolicy`` and its config and sample types, the prompts, model
loading with per-model defaults, the action head, and the backends that run the model (hf,
vLLM over HTTP, vLLM in process). Nothing here trains: ``llmgym.rl`` does.

The names below are imported on first use, so ``llmgym.policy.config`` stays free of torch.

Example:
    >>> from llmgym.policy import PolicyConfig
    >>> PolicyConfig(mode="score", greedy=True).greedy
    True
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "LLMPolicy": "policy",
    "split_infos": "policy",
    "PolicyConfig": "config",
    "ActionSample": "samples",
    "PolicyOutput": "samples",
    "load_model": "models",
}


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'llmgym.policy' has no attribute {name!r}")
    return getattr(importlib.import_module(f"llmgym.policy.{_EXPORTS[name]}"), name)


__all__ = sorted(_EXPORTS)
