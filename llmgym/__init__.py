"""llmgym: any Gymnasium env as a language env, LLM agents trained in it with online RL.

``import llmgym`` registers the ``Text-*`` environments and stays light: torch and
transformers are imported only where a model is used.

Example:
    >>> import gymnasium as gym, llmgym
    >>> env = gym.make("Text-CartPole-v1")
    >>> obs, info = env.reset(seed=0)
    >>> info["valid_actions"]
    ['LEFT', 'RIGHT']
"""

from typing import Any

from llmgym.envs.registration import register_envs, text_env_ids, wrap

__version__ = "0.1.0"

register_envs()


def __getattr__(name: str) -> Any:
    """``llmgym.Agent`` is imported on first use: ``import llmgym`` stays free of torch."""
    if name == "Agent":
        from llmgym.integrations.llamagym import Agent

        return Agent
    raise AttributeError(f"module 'llmgym' has no attribute {name!r}")


__all__ = ["Agent", "__version__", "text_env_ids", "wrap"]
