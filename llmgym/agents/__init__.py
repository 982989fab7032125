"""LLM agents: model loading, the batched LLM policy, the LlamaGym-compatible Agent.

Imported lazily, so ``import llmgym.agents`` stays light until a name is used.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "Agent": "agent",
    "load_model": "models",
    "get_model_defaults": "models",
    "MODEL_REGISTRY": "models",
    "ModelDefaults": "models",
    "ModelNotFoundError": "models",
    "tiny_model": "testing",
    "LLMPolicy": "policy",
    "PolicyConfig": "policy",
    "PolicyOutput": "policy",
    "ActionSample": "policy",
    "split_infos": "policy",
}


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'llmgym.agents' has no attribute {name!r}")
    return getattr(importlib.import_module(f"llmgym.agents.{_EXPORTS[name]}"), name)


__all__ = sorted(_EXPORTS)
