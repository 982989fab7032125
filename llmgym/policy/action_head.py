"""A zero-initialised action head on the backbone's hidden state: RL updates that depend on
the state.

Measured on SmolLM2-135M in Blackjack: the gradient of ``logit(hit) - logit(stick)`` with
respect to LoRA weights points the same way in every state (mean pairwise cosine 0.96), so
RL on the language model alone moves every state together, although a linear probe on the
hidden state at the answer position recovers the optimal action 94 % of the time. This head
reads that hidden state, as LLaRP (Szot et al. 2023) trains learned layers around a frozen LLM
with PPO:

    score(a | s) = LM score(a | s) + [z(h_s), 1]^T W unit(e_a)

``h_s`` is the last hidden state at the answer position (after the ``{"action": "`` prefill),
or several layers' hidden states there, concatenated (``layers``); ``z`` centres and whitens
it with statistics of the states seen in training (refreshed before each update, so one
update sees one fixed feature map), ``e_a`` is the mean input embedding of the action's name
and ``W`` starts at zero: at initialisation the policy is exactly the language model's.

Example:
    >>> import torch
    >>> head = ActionHead(hidden_size=4, embed_size=3)
    >>> h, e = torch.randn(2, 4), torch.randn(2, 5, 3)
    >>> head(head.whitener(h), e).abs().sum().item()  # zero-initialised: adds nothing
    0.0
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from llmgym.errors import ConfigError


class Whitener(nn.Module):
    """Running mean and covariance of features; ``z(h) = (C + r I)^(-1/2) (h - m)`` with the
    ridge ``r = eps * tr(C) / H`` (at least 1e-4 of the mean squared feature).

    ``update`` accumulates statistics; ``refresh`` recomputes the map from them (the map stays
    fixed in between, so an update's old and new log-probs use the same features).

    Example:
        >>> w = Whitener(2, eps=0.0)
        >>> w.update(torch.tensor([[1.0, 0.0], [3.0, 0.0], [1.0, 2.0], [3.0, 2.0]]))
        >>> w.refresh()
        >>> w(torch.tensor([[3.0, 2.0]])).round(decimals=3).tolist()
        [[1.0, 1.0]]
    """

    def __init__(self, size: int, eps: float = 0.3) -> None:
        super().__init__()
        self.eps = eps
        self.register_buffer("count", torch.zeros((), dtype=torch.float64))
        self.register_buffer("total", torch.zeros(size, dtype=torch.float64))
        self.register_buffer("outer", torch.zeros(size, size, dtype=torch.float64))
        self.register_buffer("mean", torch.zeros(size))
        self.register_buffer("transform", torch.eye(size))

    @torch.no_grad()
    def update(self, features: torch.Tensor) -> None:
        """Add a batch ``[N, H]`` of feature vectors to the statistics."""
        x = features.detach().reshape(-1, self.total.numel()).to(self.total)
        self.count += len(x)
        self.total += x.sum(0)
        self.outer += x.T @ x

    @torch.no_grad()
    def refresh(self) -> None:
        """Recompute the centring and whitening map from the statistics gathered so far."""
        if self.count < 2:
            return
        mean = self.total / self.count
        cov = self.outer / self.count - torch.outer(mean, mean)
        size = len(mean)
        second_moment = (self.outer.trace() / self.count / size).clamp(min=1e-12)
        # The floor keeps a map of (nearly) identical states from amplifying tiny differences.
        ridge = torch.maximum(self.eps * cov.trace() / size, 1e-4 * second_moment)
        eye = torch.eye(size, dtype=cov.dtype, device=cov.device)
        values, vectors = torch.linalg.eigh(cov + ridge * eye)
        inv_sqrt = vectors @ torch.diag(values.clamp(min=1e-12).rsqrt()) @ vectors.T
        self.mean.copy_(mean.to(self.mean))
        self.transform.copy_(inv_sqrt.to(self.transform))

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        return (hidden.float() - self.mean) @ self.transform


class ActionHead(nn.Module):
    """Bilinear, zero-initialised candidate scores from whitened state features and action
    embeddings; any number of candidates per state (padding rows are ignored by the caller)."""

    def __init__(
        self,
        hidden_size: int,
        embed_size: int,
        whiten_eps: float = 0.3,
        lm_prior: bool = True,
        layers: tuple[int, ...] = (-1,),
    ) -> None:
        super().__init__()
        #: Whether the policy adds the LM's candidate scores to this head's (False: the head
        #: alone scores the candidates and the policy starts uniform).
        self.lm_prior = lm_prior
        #: The model's hidden states the head reads at the answer position, concatenated
        #: (indices into transformers' ``hidden_states``: 0 the embeddings, -1 the last).
        self.layers = tuple(layers)
        #: The size of the state features: ``hidden_size`` per layer read.
        self.feature_size = hidden_size * len(self.layers)
        self.whitener = Whitener(self.feature_size, whiten_eps)
        self.weight = nn.Parameter(torch.zeros(self.feature_size + 1, embed_size))

    def forward(self, features: torch.Tensor, action_embeddings: torch.Tensor) -> torch.Tensor:
        """``features`` [B, H] (whitened), ``action_embeddings`` [B, K, E] -> scores [B, K]."""
        ones = torch.ones_like(features[:, :1])
        query = torch.cat([features, ones], dim=-1) @ self.weight  # [B, E]
        return torch.einsum("be,bke->bk", query, action_embeddings)


def action_embedding(model: nn.Module, token_ids: list[int]) -> torch.Tensor:
    """Unit-norm mean input embedding of an action name's tokens (a fixed vector: input
    embeddings are never trained here)."""
    table = model.get_input_embeddings().weight
    with torch.no_grad():
        vector = table[torch.tensor(token_ids, device=table.device)].float().mean(0)
    return vector / vector.norm().clamp(min=1e-8)


def head_for(model: nn.Module, policy: Any) -> ActionHead | None:
    """The action head a ``PolicySection`` asks for on ``model`` (score mode with
    ``action_head`` on), on the model's device; else None."""
    if not policy.action_head or policy.mode != "score":
        return None
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    embed = base.get_input_embeddings().weight
    head = ActionHead(
        base.config.hidden_size,
        embed.shape[1],
        policy.head_whiten_eps,
        policy.lm_prior,
        state_layers(model, policy),
    )
    return head.to(embed.device)


def state_layers(model: nn.Module, policy: Any) -> tuple[int, ...]:
    """The hidden states a ``PolicySection``'s state features are made of on ``model``
    (``head_layers`` checked against its depth; the last by default)."""
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    return head_layers(policy.head_layers, base.config.num_hidden_layers)


def head_layers(layers: Any, num_layers: int) -> tuple[int, ...]:
    """``head_layers`` checked against a model of ``num_layers`` decoder layers (whose
    ``hidden_states`` run from 0, the embeddings, to ``num_layers``).

    Example:
        >>> head_layers(None, 30), head_layers([4, -1], 30)
        ((-1,), (4, -1))
    """
    if layers is None:
        return (-1,)
    ok = isinstance(layers, list) and layers and all(type(i) is int for i in layers)
    if not ok or not all(-num_layers - 1 <= i <= num_layers for i in layers):
        raise ConfigError(
            f"head_layers must be a non-empty list of hidden-state indices from {-num_layers - 1} "
            f"to {num_layers} (0: the embeddings, -1: the last layer), not {layers!r}."
        )
    return tuple(layers)


__all__ = ["ActionHead", "Whitener", "action_embedding", "head_for", "head_layers", "state_layers"]
