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

from llmgym.envs.registration import register_envs, text_env_ids, wrap

__version__ = "0.1.0"

register_envs()

__all__ = ["__version__", "text_env_ids", "wrap"]
