"""Score mode of the LLM policy: each valid action's answer scored by the language model
(one pass, the prompt's KV cache shared by the candidates) plus the action head's learned,
state-specific score, sampled from ``softmax(score / temperature)``; and the same scores
recomputed with gradients for an update. Mixed into ``LLMPolicy``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from llmgym.policy.config import PolicyConfig
from llmgym.policy.prompts import prompt_and_candidate_ids, split_infos
from llmgym.policy.samples import ActionSample, PolicyOutput


class ScoreMode:
    """Mixed into ``LLMPolicy``: score mode over the attributes declared here, which the
    policy sets (and the prompt methods it defines)."""

    config: PolicyConfig
    model: Any
    tokenizer: Any
    device: torch.device
    generator: torch.Generator
    head: Any  # ActionHead | None
    memoize: bool
    backend: Any
    update_backend: Any
    _memo: dict[tuple[Any, ...], Any]
    _action_embeddings: dict[str, torch.Tensor]
    _prefill: str
    feature_layers: tuple[int, ...]

    def _scores(self, token_logprobs: list[torch.Tensor], actions: Sequence[str]) -> torch.Tensor:
        sums = torch.stack([t.sum() for t in token_logprobs])
        if self.config.normalization == "token":
            sizes = [len(t) for t in token_logprobs]
        elif self.config.normalization == "word":
            sizes = [max(1, len(a.split())) for a in actions]
        else:
            return sums
        return sums / torch.tensor(sizes, dtype=sums.dtype, device=sums.device)

    def action_probabilities(
        self, observations: Sequence[str], infos: Sequence[dict[str, Any]]
    ) -> list[list[float]]:
        """Score mode: each env's probability of each valid action, ``softmax(score / T)``
        (the distribution ``act`` samples from), without acting or touching the history."""
        temperature = self.config.temperature
        scores = self.action_scores(observations, infos)
        return [torch.softmax(torch.tensor(s) / temperature, -1).tolist() for s in scores]

    @torch.no_grad()
    def action_scores(
        self, observations: Sequence[str], infos: Sequence[dict[str, Any]]
    ) -> list[list[float]]:
        """Score mode: each env's score of each valid action (the language model's and the
        head's, before the temperature), finite where a probability would round to 0."""
        infos = split_infos(infos, len(observations))
        messages = [
            self.messages_for(i, o, info) for i, (o, info) in enumerate(zip(observations, infos))
        ]
        texts = [self.prompt_text(m) for m in messages]
        actions = [list(info.get("valid_actions") or []) for info in infos]
        _, _, _, scores = self._score_rows(texts, actions)
        return [s.float().tolist() for s in scores]

    def _score_rows(self, texts, actions):
        """(prompt ids, candidate ids, hidden states, candidate scores incl. the head) per env;
        the prompts and their candidates tokenized in one call."""
        prefilled = bool(self._prefill)
        prompts, candidates = prompt_and_candidate_ids(self.tokenizer, texts, actions, prefilled)
        hidden, lm_scores = self._score_features(prompts, candidates, actions)
        return prompts, candidates, hidden, self._candidate_scores(hidden, lm_scores, actions)

    def _act_score(self, messages, texts, actions, greedy) -> list[ActionSample]:
        prompts, candidates, hidden, scores = self._score_rows(texts, actions)
        samples = []
        for b, acts in enumerate(actions):
            logpi = torch.log_softmax(scores[b] / self.config.temperature, -1)
            if greedy:
                k = int(logpi.argmax())
            else:
                probs = logpi.exp().to(self.generator.device)
                k = int(torch.multinomial(probs, 1, generator=self.generator))
            samples.append(
                ActionSample(
                    text=self.answer_text(acts[k]),
                    action_index=k,
                    prompt_ids=prompts[b],
                    completion_ids=candidates[b][k],
                    logprobs=[float(logpi[k])],
                    candidate_ids=candidates[b],
                    messages=messages[b],
                    valid_actions=acts,
                    hidden=hidden[b].detach().cpu() if self.head is not None else None,
                )
            )
        return samples

    def _score_features(
        self,
        prompts: list[list[int]],
        candidates: list[list[list[int]]],
        actions: list[list[str]],
        *,
        shared: bool = True,
    ) -> tuple[torch.Tensor, list[torch.Tensor]]:
        """(hidden state at the answer position [B, H], each env's candidate LM scores [K]),
        from the memo where allowed; with gradients when the caller enables them."""
        if not self.memoize:
            return self._forward_features(prompts, candidates, actions, shared)
        keys = [(tuple(p), tuple(a)) for p, a in zip(prompts, actions)]
        missing = first_missing(keys, self._memo)
        if missing:
            with torch.no_grad():
                hidden, lm = self._forward_features(
                    [prompts[i] for i in missing],
                    [candidates[i] for i in missing],
                    [actions[i] for i in missing],
                    shared,
                )
            for j, i in enumerate(missing):
                self._memo[keys[i]] = (hidden[j], lm[j])
        rows = [self._memo[k] for k in keys]
        return torch.stack([h for h, _ in rows]), [s for _, s in rows]

    def _forward_features(
        self, prompts, candidates, actions, shared, backend=None, with_hidden=None
    ):
        """(hidden states [B, H], LM scores) by one pass of ``backend`` (the acting one by
        default; hidden states ``with_hidden``, by default where there is a head or the
        backbone trains on this backend). A head without the LM prior needs no LM scores
        (zeros stand in): only its hidden states are computed, through no more layers than
        they need."""
        backend = backend or self.backend
        if with_hidden is None:  # acting: where the backbone trains and the update runs on
            # the same backend, the update reads these hidden states under the same weights,
            # so this pass is kept for it (fast path)
            same = backend is self.update_backend and self.model is not None
            with_hidden = self.head is not None or (not self.memoize and same)
        if self.head is not None and not self.head.lm_prior:
            states = backend.hidden_states(prompts, shared=shared, layers=self.layers)
            return states, [torch.zeros(len(a), device=states.device) for a in actions]
        hidden, token_logprobs = backend.score(
            prompts,
            candidates,
            hidden=with_hidden,
            shared=shared,
            layers=self.layers,
        )
        lm = [self._scores(t, a) for t, a in zip(token_logprobs, actions)]
        if hidden is None:
            hidden = torch.zeros((len(prompts), 0), device=self.device)
        return hidden, lm

    def _candidate_scores(
        self, hidden: torch.Tensor, lm_scores: list[torch.Tensor], actions: list[list[str]]
    ) -> list[torch.Tensor]:
        """LM scores plus the action head's (when there is one and it is enabled); the head's
        alone when it has no LM prior (``lm_prior=False``)."""
        if self.head is None:
            return lm_scores
        features = self.head.whitener(hidden)
        out = []
        for b, acts in enumerate(actions):
            head = self.head(features[b : b + 1], self.action_embeddings(acts)[None])[0]
            out.append(lm_scores[b] + head if self.head.lm_prior else head)
        return out

    def action_embeddings(self, actions: Sequence[str]) -> torch.Tensor:
        """[K, E] the fixed unit-norm embeddings the action head (and PPO's Q-critic) reads
        ``actions`` by."""
        return torch.stack([self._action_embedding(a) for a in actions])

    def _action_embedding(self, action: str) -> torch.Tensor:
        if action not in self._action_embeddings:
            from llmgym.policy.action_head import action_embedding

            ids = self.encode(action) or [self.tokenizer.pad_token_id]
            self._action_embeddings[action] = action_embedding(self.model, ids).to(self.device)
        return self._action_embeddings[action]

    @property
    def layers(self) -> tuple[int, ...]:
        """The model's hidden states the state features are made of (the action head's,
        else ``feature_layers``)."""
        return self.head.layers if self.head is not None else self.feature_layers

    def features(self, hidden: torch.Tensor) -> torch.Tensor:
        """The action head's whitened state features (the raw hidden state without a head)."""
        return self.head.whitener(hidden) if self.head is not None else hidden.float()

    def _forward_score(
        self, samples: Sequence[ActionSample], shared_prefix: bool = False
    ) -> PolicyOutput:
        prompts = [s.prompt_ids for s in samples]
        actions = [s.valid_actions or [""] * len(s.candidate_ids) for s in samples]
        candidates = [s.candidate_ids for s in samples]
        if self.memoize:
            hidden, lm = self._score_features(prompts, candidates, actions, shared=shared_prefix)
        else:
            hidden, lm = self._forward_features(
                prompts, candidates, actions, shared_prefix, self.update_backend, with_hidden=True
            )
        scores = self._candidate_scores(hidden, lm, actions)
        if self.config.center_grad and torch.is_grad_enabled():
            scores = centered_grad(scores, actions)
        logprob, entropy, every = [], [], []
        for s, score in zip(samples, scores):
            logpi = torch.log_softmax(score / self.config.temperature, -1)
            logprob.append(logpi[s.action_index])
            entropy.append(-(logpi.exp() * logpi).sum())
            every.append(logpi)
        return PolicyOutput(
            torch.stack(logprob),
            torch.stack(entropy),
            hidden,
            candidate_logprobs=every,
            candidate_scores=list(scores),
        )


class _CenterGrad(torch.autograd.Function):
    """The identity, whose gradient is centred over the rows (dim 0)."""

    @staticmethod
    def forward(ctx, x: torch.Tensor) -> torch.Tensor:
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad: torch.Tensor) -> torch.Tensor:
        return grad - grad.mean(0, keepdim=True)


def centered_grad(
    scores: list[torch.Tensor], actions: Sequence[Sequence[str]]
) -> list[torch.Tensor]:
    """``scores`` unchanged, with each action's gradient centred over the rows that share its
    valid actions (``PolicyConfig.center_grad``).

    >>> s = torch.zeros(2, 2, requires_grad=True)
    >>> rows = centered_grad(list(s), [["a", "b"], ["a", "b"]])
    >>> (rows[0][0] + 3 * rows[1][0]).backward()
    >>> s.grad.tolist()
    [[-1.0, 0.0], [1.0, 0.0]]
    """
    groups: dict[tuple[str, ...], list[int]] = {}
    for i, acts in enumerate(actions):
        groups.setdefault(tuple(acts), []).append(i)
    out = list(scores)
    for rows in groups.values():
        if len(rows) > 1:
            centred = _CenterGrad.apply(torch.stack([scores[i] for i in rows]))
            for j, i in enumerate(rows):
                out[i] = centred[j]
    return out


def first_missing(keys: Sequence[Any], memo: dict[Any, Any]) -> list[int]:
    """Indices of the first occurrence of each key not in ``memo``, in order.

    >>> first_missing(["a", "b", "a", "c"], {"b": 1})
    [0, 3]
    """
    first: dict[Any, int] = {}
    for i, key in enumerate(keys):
        if key not in memo:
            first.setdefault(key, i)
    return list(first.values())


__all__ = ["ScoreMode", "centered_grad", "first_missing"]
