"""Agents by name, and the names users import from ``llmgym.agents``.

``registry`` builds any agent from its name (``llm:MODEL@PATH``, ``sb3-ppo``, ``random``,
``optimal``, ...) and ``evaluate`` plays one by name, so this room sits above every family of
agent: the LLM policy (``llmgym.policy``), its trainers (``llmgym.rl``) and the baselines
(``llmgym.baselines``). The other names below are re-exported, lazily, from where they live,
for code written against ``llmgym.agents``.

Example:
    >>> from llmgym.agents import PolicyConfig
    >>> PolicyConfig.__module__
    'llmgym.policy.config'
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "Agent": "llmgym.integrations.llamagym",
    "load_model": "llmgym.policy.models",
    "get_model_defaults": "llmgym.policy.models",
    "MODEL_REGISTRY": "llmgym.policy.models",
    "ModelDefaults": "llmgym.policy.models",
    "ModelNotFoundError": "llmgym.policy.models",
    "tiny_model": "llmgym.policy.testing",
    "LLMPolicy": "llmgym.policy.policy",
    "PolicyConfig": "llmgym.policy.config",
    "PolicyOutput": "llmgym.policy.samples",
    "ActionSample": "llmgym.policy.samples",
    "split_infos": "llmgym.policy.policy",
    "make_agent": "llmgym.agents.registry",
    "register_agent": "llmgym.agents.registry",
    "evaluate": "llmgym.agents.evaluate",
    "make_trainer": "llmgym.rl",
    "load_trained": "llmgym.rl",
    "load_trained_policy": "llmgym.rl",
}


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'llmgym.agents' has no attribute {name!r}")
    return getattr(importlib.import_module(_EXPORTS[name]), name)


__all__ = sorted(_EXPORTS)
