"""What the policy hands a trainer: ``ActionSample`` (one env's action with what is needed to
score it again) and ``PolicyOutput`` (the differentiable re-scoring of a batch of samples)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch

from llmgym.policy.prompts import Message


@dataclass
class ActionSample:
    """One env's action from one ``act`` call, with what a trainer needs to score it again."""

    text: str
    """The answer to pass to ``env.step``."""
    action_index: int | None
    """Index into the valid actions (score mode); None in generate mode."""
    prompt_ids: list[int]
    """Token ids of the prompt (chat template, plus the prefill)."""
    completion_ids: list[int]
    """Token ids of the chosen completion."""
    logprobs: list[float]
    """Generate: per completion token, log-prob under softmax(logits / temperature). Score: one
    value, log pi(chosen) under softmax(scores / temperature)."""
    candidate_ids: list[list[int]]
    """Score mode: token ids of every valid action's completion; [] in generate mode."""
    messages: list[Message]
    """The chat messages the prompt was built from."""
    valid_actions: list[str] = field(default_factory=list)
    """The valid action names the candidates stand for (score mode); in generate mode the
    env's valid actions, if it has discrete ones."""
    hidden: Any = None
    """Score mode with an action head: the backbone's hidden state at the answer position."""


@dataclass
class PolicyOutput:
    """``LLMPolicy.forward_samples``' differentiable outputs for a batch of samples."""

    logprob: torch.Tensor
    """[B] log pi(taken | prompt)."""
    entropy: torch.Tensor
    """[B] entropy of the candidate distribution (score) or mean token entropy (generate)."""
    hidden: torch.Tensor
    """[B, H] the backbone's last hidden state at the last prompt token (for a value head)."""
    token_logprobs: list[torch.Tensor] = field(default_factory=list)
    """Generate mode: [T_i] per-token log-probs of each completion; [] in score mode."""
    candidate_logprobs: list[torch.Tensor] = field(default_factory=list)
    """Score mode: [K_i] log pi of each valid action of each sample; [] in generate mode."""
    candidate_scores: list[torch.Tensor] = field(default_factory=list)
    """Score mode: [K_i] each valid action's score before the temperature (without a head and
    with ``normalization="sum"``: the log-likelihood of its answer); [] in generate mode."""
