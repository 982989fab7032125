"""Where the policy's model work happens, behind one interface: scoring the valid actions'
answers, generating, recomputing log-probs with gradients for an update, and taking up new
weights after one. ``LLMPolicy`` builds the prompts (``llmgym.policy.prompts``), samples and
adds the action head; a backend only runs the model.

- ``hf.TransformersBackend`` (default): a transformers model in this process, with the shared
  prompt-prefix KV cache; everything, gradients included.
- ``vllm.VLLMServer``: a running vLLM server (OpenAI-compatible API): scoring, generation and
  weight sync by hot-loading a LoRA adapter (no hidden states, no gradients: a policy that
  acts through it recomputes log-probs for its updates with a local transformers backend).
- ``vllm_inprocess.VLLMInProcess``: the same with ``vllm.LLM`` in this process
  (``backend="vllm-inprocess"``).

Example:
    >>> from llmgym.policy.backends.hf import TransformersBackend
    >>> from llmgym.policy.backends.vllm import VLLMServer
    >>> issubclass(TransformersBackend, Backend), issubclass(VLLMServer, Backend)
    (True, True)
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable


@dataclass
class Sampling:
    """How the next token is picked in generate mode: the policy's temperature, top-p, greedy
    switch and its own random generator (so acting is reproducible)."""

    temperature: float
    top_p: float
    greedy: bool
    generator: Any

    def next_tokens(self, logits: Any) -> tuple[Any, Any]:
        """Pick the next token per row of ``logits`` [B, V]: (tokens [B], their log-probs
        under softmax(logits / temperature); top-p only narrows what is drawn)."""
        import torch

        logp = torch.log_softmax(logits / self.temperature, dim=-1)
        if self.greedy:
            tokens = logits.argmax(-1)
        else:
            probs = logp.exp()
            if self.top_p < 1:
                sorted_p, order = probs.sort(-1, descending=True)
                outside = sorted_p.cumsum(-1) - sorted_p >= self.top_p
                probs = probs.scatter(-1, order, sorted_p.masked_fill(outside, 0.0))
            tokens = torch.multinomial(probs, 1, generator=self.generator).squeeze(-1)
        return tokens, logp.gather(-1, tokens[:, None]).squeeze(-1)

    def request_seed(self) -> int:
        """A seed drawn from the generator, for engines that sample themselves."""
        import torch

        return int(torch.randint(2**31 - 1, (1,), generator=self.generator))


@runtime_checkable
class Backend(Protocol):
    """The model work of a policy. Token ids in, log-probs (tensors) out. A backend also
    keeps ``stats``, a dict of token counts for throughput reports."""

    def score(
        self,
        prompts: Sequence[list[int]],
        candidates: Sequence[list[list[int]]],
        *,
        hidden: bool,
        shared: bool,
        layers: Sequence[int] = (-1,),
    ) -> tuple[Any, list[list[Any]]]:
        """Per prompt, per candidate: the log-probs of the candidate's tokens after the prompt;
        with ``hidden``, also the hidden states of ``layers`` (indices into transformers'
        ``hidden_states``; -1 the last) at the last prompt token, concatenated [B, H x layers]
        (else None). ``shared``: encode the prefix all prompts share once, without gradient.
        Differentiable where the engine allows it and gradients are enabled."""

    def hidden_states(
        self, prompts: Sequence[list[int]], *, shared: bool, layers: Sequence[int] = (-1,)
    ) -> Any:
        """``score``'s hidden states alone (for an action head without the LM's scores),
        computed no deeper than ``layers`` need where the engine allows it."""

    def generate(
        self, prompts: Sequence[list[int]], max_new: int, stop_ids: list[int], sampling: Sampling
    ) -> tuple[list[list[int]], list[list[float]]]:
        """Up to ``max_new`` tokens per prompt until a stop token: (token ids, log-probs)."""

    def completion_logprobs(
        self,
        prompts: Sequence[list[int]],
        completions: Sequence[list[int]],
        temperature: float,
        *,
        shared: bool = False,
    ) -> tuple[list[Any], Any, Any]:
        """With gradients: each completion's token log-probs under softmax(logits /
        temperature), each one's mean token entropy [B] and the hidden state before its
        first token [B, H]. ``shared``: the prefix the prompts share is encoded once without
        gradient (as score mode's updates do) where the engine can."""

    def sync_weights(self) -> None:
        """Take up the policy's current weights (after an update or a reference switch)."""


#: The old ``vllm_url`` value for the in-process form; deprecated for
#: ``backend="vllm-inprocess"`` (``inprocess=True`` here), removed in the release after 0.1.
INPROCESS = "inprocess"


def make_vllm_backend(
    url: str, model: str = "", source: str = "", inprocess: bool = False
) -> Backend:
    """The vLLM backend for ``PolicyConfig(backend="vllm")``, a client of the server at
    ``url`` (serving ``model``), or with ``inprocess`` (``backend="vllm-inprocess"``)
    ``vllm.LLM`` in this process, loading ``model``, else ``source`` (a short name, directory
    or Hub id)."""
    if url.strip().lower() == INPROCESS:
        warnings.warn(
            'vllm_url="inprocess" is deprecated; use backend="vllm-inprocess".',
            DeprecationWarning,
            stacklevel=2,
        )
        inprocess = True
    if inprocess:
        from llmgym.policy.backends.vllm_inprocess import VLLMInProcess

        return VLLMInProcess(model or source)
    from llmgym.policy.backends.vllm import VLLMServer

    return VLLMServer(url, model)


__all__ = ["INPROCESS", "Backend", "Sampling", "make_vllm_backend"]
