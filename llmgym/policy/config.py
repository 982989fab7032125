"""``PolicyConfig``: how an ``LLMPolicy`` builds prompts and picks actions, checked where it is
built.

Example:
    >>> PolicyConfig(mode="generate").history
    0
    >>> PolicyConfig(mode="chat")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    llmgym.errors.ConfigError: mode must be one of score, generate, not 'chat'.
"""

from __future__ import annotations

from dataclasses import dataclass

from llmgym.errors import ConfigError

MODES = ("score", "generate")
BACKENDS = ("hf", "vllm")
NORMALIZATIONS = ("sum", "token", "word")


@dataclass
class PolicyConfig:
    """How an LLMPolicy builds prompts and picks actions."""

    mode: str = "score"
    """``score`` (rank the valid actions, always valid) or ``generate`` (free text, parsed)."""
    history: int = 0
    """Past (observation, answer) turns kept in the prompt; 0 for Markov envs."""
    temperature: float = 1.0
    """Softmax temperature: over candidate scores (score) or over tokens (generate)."""
    greedy: bool = False
    """Take the argmax instead of sampling."""
    normalization: str = "sum"
    """Score of a candidate: ``sum`` of token log-probs, mean per ``token``, or per ``word``."""
    max_new_tokens: int | None = None
    """Generation budget (generate mode); None takes the model's registry default."""
    top_p: float = 1.0
    """Nucleus sampling threshold (generate mode); log-probs ignore it (they are under the
    temperature softmax, so trainers get a smooth distribution)."""
    think: bool = False
    """Ask the model to reason before answering (generate mode; disables ``prefill``)."""
    prefill: bool = True
    """Start the assistant turn with ``{"action": "`` so small models answer in format (in
    generate mode an env may name its own start in ``info["answer_prefill"]``, e.g. math's
    ``{"answer": ``)."""
    seed: int = 0
    """Seed of the policy's own torch.Generator: acting is reproducible."""
    prefix_cache: bool = True
    """Encode the prompt prefix shared by the batch once and keep it across calls."""
    stop_at_answer: bool = True
    """With the prefill, stop generating at the first token holding ``}``: the answer is
    complete (rambling past it costs decode steps for the whole batch)."""
    backend: str = "hf"
    """``hf``: transformers in this process. ``vllm``: act through a running vLLM server
    (``vllm_url``; ``llmgym.policy.backends.vllm``) or ``vllm.LLM`` in this process
    (``vllm_url="inprocess"``); log-probs only, so no action head."""
    vllm_url: str = ""
    """The vLLM server's address, e.g. ``http://127.0.0.1:8000``, or ``inprocess`` for
    ``vllm.LLM`` in this process (backend ``vllm``)."""
    vllm_model: str = ""
    """The served model (or loaded adapter) name; empty = the first the server lists. In
    process: the model ``vllm.LLM`` loads; empty = the policy's model."""

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ConfigError(f"mode must be one of {', '.join(MODES)}, not {self.mode!r}.")
        if self.normalization not in NORMALIZATIONS:
            raise ConfigError(
                f"normalization must be one of {', '.join(NORMALIZATIONS)}, "
                f"not {self.normalization!r}."
            )
        if self.temperature <= 0:
            raise ConfigError(
                f"temperature must be positive (use greedy=True), not {self.temperature}."
            )
        if not 0 < self.top_p <= 1:
            raise ConfigError(f"top_p must be in (0, 1], not {self.top_p}.")
        if self.history < 0:
            raise ConfigError(f"history must be 0 or more, not {self.history}.")
        if self.backend not in BACKENDS:
            raise ConfigError(
                f"backend must be one of {', '.join(BACKENDS)}, not {self.backend!r}."
            )
