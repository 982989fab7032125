"""The errors a user can cause, in one place: each carries one sentence that says what was
wrong and what to do, and the CLI prints it as such (no traceback).

Every class also subclasses the built-in error it stood for before (``ValueError`` or
``RuntimeError``), so ``except ValueError`` keeps catching it.

Example:
    >>> from llmgym.agents.registry import make_agent
    >>> try:
    ...     make_agent("oracle", "Text-CartPole-v1")
    ... except LLMGymError as error:
    ...     print(type(error).__name__, isinstance(error, ValueError))
    AgentError True
"""

from __future__ import annotations


class LLMGymError(Exception):
    """Base of llmgym's user-facing errors: its message is one sentence, meant to be shown."""


class AgentError(LLMGymError, ValueError):
    """An unknown agent name, or an agent that cannot play an env."""


class UnsupportedEnvError(AgentError):
    """An agent that cannot play an env (no expert for it, DQN on continuous actions, SB3 on a
    text env): a bench leaves such a cell out and plays the others. Any other ``AgentError``
    (a broken agent name, a missing run) stops the bench."""


class TrainingError(LLMGymError, RuntimeError):
    """A bad training config, or a run directory or checkpoint that is missing or damaged."""


class ModelNotFoundError(LLMGymError, ValueError):
    """A model name that is neither registered, a local directory, nor loadable from the Hub."""


class InvalidActionError(LLMGymError, ValueError):
    """Raised by ``TextAction`` with ``on_invalid="raise"`` when no action could be parsed."""


class ConfigError(LLMGymError, ValueError):
    """A bad setting: a policy, trainer or wrapper option with a value it cannot take."""


class ConfigValueError(ConfigError, TrainingError):
    """A config value of the wrong type or out of its range, in one sentence that names the key.
    Both a ``ConfigError`` (a ``ValueError``) and a ``TrainingError``: callers that caught either
    for a bad value before keep catching it."""


class ExportError(LLMGymError, ValueError):
    """A run that cannot be exported as asked (one sentence saying what to do)."""


class VLLMError(LLMGymError, ValueError):
    """The vLLM server cannot be reached or refused a request (one sentence saying what to do)."""


class OutputError(LLMGymError, OSError):
    """A file or directory that cannot be written (a full disk, a read-only target); nothing
    partial is left behind (``llmgym.files``)."""


class RayBenchError(LLMGymError, RuntimeError):
    """A Ray task failed for good (its worker died on every retry)."""


__all__ = [
    "AgentError",
    "ConfigError",
    "ConfigValueError",
    "ExportError",
    "InvalidActionError",
    "LLMGymError",
    "ModelNotFoundError",
    "OutputError",
    "RayBenchError",
    "TrainingError",
    "UnsupportedEnvError",
    "VLLMError",
]
