"""The batched LLM policy: one call acts for a whole vector of text envs.

Two modes:

- ``score``: the log-likelihood of each valid action's completion given the prompt. The prompt
  is encoded once and its KV cache reused for every candidate, so the cost is flat in the
  number of actions; the action is sampled from ``softmax(score / temperature)`` (or the
  argmax) and is always valid.
- ``generate``: free text, sampled (temperature, top-p, max new tokens, stop at end of turn);
  only the new tokens are decoded and the env's parser reads them.

Prompts are the model's own chat template applied to (system prompt, last ``history`` turns,
observation), left-padded into one batch. The prompt prefix that all envs share (the system
prompt, usually) is encoded once, at batch size 1, and kept across calls while the weights
stay the same. ``forward_samples`` recomputes the log-probabilities of acted samples with
gradients, for trainers.

An optional :class:`~llmgym.policy.action_head.ActionHead` (score mode) adds a learned,
state-specific score to each candidate; with ``memoize=True`` (a frozen backbone) each distinct
prompt's hidden state and candidate scores are computed once and reused by acting and updates,
and a greedy policy in generate mode generates each distinct prompt's answer once.

Example:
    >>> import gymnasium as gym, llmgym
    >>> from llmgym.policy.testing import tiny_model
    >>> model, tokenizer = tiny_model()
    >>> policy = LLMPolicy(model, tokenizer, PolicyConfig(mode="score", greedy=True))
    >>> env = gym.make("Text-Blackjack-v1")
    >>> obs, info = env.reset(seed=0)
    >>> [sample] = policy.act([obs], [info])
    >>> sample.text in ('{"action": "stick"}', '{"action": "hit"}'), sample.action_index in (0, 1)
    (True, True)
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any

import torch

from llmgym.errors import ConfigError
from llmgym.policy.backends import Sampling
from llmgym.policy.backends.hf import TransformersBackend
from llmgym.policy.config import PolicyConfig
from llmgym.policy.memo import memo_state, restore_memo
from llmgym.policy.model_registry import get_model_defaults
from llmgym.policy.models import prepare_tokenizer
from llmgym.policy.prompts import (
    PREFILL,
    THINK_SUFFIX,
    Message,
    build_messages,
    candidate_ids,
    completion_text,
    encode,
    encode_many,
    split_infos,
    without_system_role,
)
from llmgym.policy.samples import ActionSample, PolicyOutput
from llmgym.policy.score import ScoreMode, first_missing
from llmgym.wrappers.history import ChatHistory


class LLMPolicy(ScoreMode):
    """Acts for a batch of text envs with a causal LM (plain, or a peft ``PeftModel``), or
    through vLLM (``config.uses_vllm``; ``model`` may then be None: acting needs only the
    tokenizer), or through any ``backend`` given (``llmgym.policy.backends``):
    the policy builds the prompts, samples and adds the action head; the backend runs the model.

    ``act`` samples under ``torch.no_grad``; ``forward_samples`` recomputes the same log-probs
    with gradients. Per-env chat history (``config.history > 0``) is kept by env index; call
    ``reset(indices)`` when those envs start a new episode. An info that already carries
    ``messages`` (``gym.make(..., history=k)``) is used as is.
    """

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        config: PolicyConfig | None = None,
        *,
        device: Any = None,
        head: Any = None,
        memoize: bool = False,
        backend: Any = None,
        layers: tuple[int, ...] = (-1,),
    ) -> None:
        self.model = model
        self.tokenizer = prepare_tokenizer(tokenizer)
        self.config = config or PolicyConfig()
        if device is None:
            device = model.device if model is not None else "cpu"
        self.device = torch.device(device)
        name = getattr(getattr(model, "config", None), "_name_or_path", "") or ""
        name = name or getattr(self.tokenizer, "name_or_path", "") or ""
        self.defaults = get_model_defaults(name)
        self.generator = torch.Generator(device=self.device).manual_seed(self.config.seed)
        self.stop_ids = self._stop_ids()
        self.histories: dict[int, ChatHistory] = {}
        self._closing: list[int] | None = None
        #: Score mode: learned per-state candidate scores added to the LM's (None = off).
        self.head = head
        #: Score mode without a head: the hidden states (transformers' ``hidden_states``
        #: indices) its state features, which PPO's critics read, are made of.
        self.feature_layers = tuple(layers)
        #: Reuse each distinct prompt's (hidden state, candidate LM scores): only valid while
        #: the backbone does not change (an action head trained on a frozen model).
        self.memoize = memoize
        self._memo: dict[tuple[Any, ...], tuple[torch.Tensor, torch.Tensor]] = {}
        self._action_embeddings: dict[str, torch.Tensor] = {}
        #: The model work (``llmgym.policy.backends``): ``backend`` if given, else transformers
        #: in this process or a vLLM server (``config.backend``).
        self.backend: Any = backend if backend is not None else self._default_backend(model)
        #: The backend that recomputes log-probs (with gradients) for updates: the acting one,
        #: except when the policy acts through vLLM and has its model here (training through
        #: vLLM): then transformers on that local copy.
        self.update_backend: Any = self.backend
        if self.config.uses_vllm and model is not None:
            pad = self.tokenizer.pad_token_id
            local = TransformersBackend(model, pad, self.device, self.config.prefix_cache)
            local.on_new_weights = self._memo.clear
            self.update_backend = local

    def _default_backend(self, model: Any) -> Any:
        if self.config.backend == "hf":
            pad = self.tokenizer.pad_token_id
            hf = TransformersBackend(model, pad, self.device, self.config.prefix_cache)
            hf.on_new_weights = self._memo.clear
            return hf
        from llmgym.policy.backends import make_vllm_backend

        if self.head is not None:
            raise ConfigError(
                "vLLM returns log-probs, not hidden states, so a policy with an action head "
                "cannot act through it; train with `--set action_head=false` to use the "
                "vllm backend."
            )
        name = getattr(getattr(model, "config", None), "_name_or_path", "") or ""
        name = name or getattr(self.tokenizer, "name_or_path", "") or ""
        config = self.config
        inprocess = config.backend == "vllm-inprocess"
        return make_vllm_backend(config.vllm_url, config.vllm_model, name, inprocess)

    @property
    def stats(self) -> dict[str, int]:
        """The backend's token counts (prompt, cached, generated, decode positions)."""
        return self.backend.stats

    # ----------------------------------------------------------------------------- prompts
    def _stop_ids(self) -> list[int]:
        ids = {self.tokenizer.eos_token_id}
        eos = getattr(getattr(self.model, "generation_config", None), "eos_token_id", None)
        ids.update(eos if isinstance(eos, list) else [eos])
        vocab = self.tokenizer.get_vocab()
        ids.update(vocab[t] for t in self.defaults.stop_tokens if t in vocab)
        return sorted(i for i in ids if i is not None)

    @property
    def _prefill(self) -> str:
        return PREFILL if self.config.prefill and not self.config.think else ""

    def messages_for(self, index: int, observation: str, info: dict[str, Any]) -> list[Message]:
        """The chat messages for env ``index`` (its info's ``messages`` if it has them)."""
        if "messages" in info:
            messages = [dict(m) for m in info["messages"]]
            if self.config.think and messages and messages[0]["role"] == "system":
                messages[0]["content"] += THINK_SUFFIX
            return messages if self.defaults.system_role else without_system_role(messages)
        history = self.histories.get(index)
        return build_messages(
            str(info.get("system_prompt", "")),
            str(observation),
            list(history.turns) if history else (),
            think=self.config.think,
            system_role=self.defaults.system_role,
        )

    def prefill_for(self, info: dict[str, Any]) -> str:
        """The answer start written for the model: the env's ``answer_prefill`` in generate
        mode, else ``{"action": "``; empty when ``prefill`` is off or the model thinks first."""
        if not self._prefill:
            return ""
        if self.config.mode == "generate":
            return str(info.get("answer_prefill", self._prefill))
        return self._prefill

    def prompt_text(self, messages: list[Message], prefill: str | None = None) -> str:
        """The chat template applied to ``messages`` with the generation prompt, then
        ``prefill`` (None: the policy's own, ``{"action": "`` unless switched off)."""
        text = self.tokenizer.apply_chat_template(
            messages,
            tokenize=False,
            add_generation_prompt=True,
            **self.defaults.chat_template_kwargs,
        )
        return text + (self._prefill if prefill is None else prefill)

    def encode(self, text: str) -> list[int]:
        """Token ids of ``text`` (no special tokens)."""
        return encode(self.tokenizer, text)

    def candidate_ids(self, prompt: str, prompt_ids: list[int], action: str) -> list[int]:
        """Token ids of the answer naming ``action``, as they continue ``prompt``."""
        return candidate_ids(self.tokenizer, prompt, prompt_ids, action, bool(self._prefill))

    def answer_text(self, action: str) -> str:
        """The whole answer naming ``action`` (what the env steps with), prefill included."""
        return self._prefill + completion_text(action, bool(self._prefill))

    def score_sample(self, messages: list[Message], actions: Sequence[str], k: int) -> ActionSample:
        """The score-mode sample of answering ``actions[k]`` to ``messages``, built as ``act``
        builds its own (demos, mirrored states); its log-prob is left to a recompute
        (``logprobs`` holds 0)."""
        prompt = self.prompt_text(messages)
        prompt_ids = self.encode(prompt)
        candidates = [self.candidate_ids(prompt, prompt_ids, a) for a in actions]
        return ActionSample(
            text=self.answer_text(actions[k]),
            action_index=k,
            prompt_ids=prompt_ids,
            completion_ids=candidates[k],
            logprobs=[0.0],
            candidate_ids=candidates,
            messages=messages,
            valid_actions=list(actions),
        )

    def reset(self, indices: Sequence[int] | None = None) -> None:
        """Forget the chat history of envs ``indices`` (all when None)."""
        for i in list(self.histories) if indices is None else indices:
            self.histories.pop(int(i), None)

    def clear_cache(self) -> None:
        """Make the backend take up the current weights (the cached prompt prefix is dropped;
        done automatically when the weights change) and drop the memoised features (call it
        after changing a frozen backbone's weights)."""
        self.backend.sync_weights()
        if self.update_backend is not self.backend:
            self.update_backend.sync_weights()
        self._memo.clear()

    def forget_kept_states(self) -> None:
        """Forget the states kept in this process across calls (the cached prefix, the frozen
        trunk's states; :meth:`clear_cache` keeps the trunk's and makes a vLLM server take up
        the weights), so that what follows is computed as after a fresh start. Kept floats
        depend on the batches they were computed in: processes that do not save them
        (:meth:`kept_state`) at a checkpoint forget them there, so that a resumed run computes
        what the uninterrupted one does. The memoised features stay (:meth:`memo_state`)."""
        for backend in self._local_backends():
            backend.forget_prefix()
            backend.trunk.forget()

    def kept_state(self) -> list[dict[str, Any]]:
        """The states kept across calls by each transformers backend in this process (its
        cached prefix, its frozen trunk's states), for a checkpoint: a run resumed with them
        (:meth:`load_kept_state`) computes the floats the uninterrupted run does, and a
        checkpoint changes nothing in the run."""
        return [backend.kept_state() for backend in self._local_backends()]

    def load_kept_state(self, state: list[dict[str, Any]]) -> None:
        """Restore :meth:`kept_state`'s ``state`` (call it after the weights are loaded)."""
        for backend, kept in zip(self._local_backends(), state, strict=True):
            backend.load_kept_state(kept)

    def _local_backends(self) -> list[Any]:
        """The transformers backends in this process (a vLLM server keeps no state of ours)."""
        distinct = [self.backend]
        if self.update_backend is not self.backend:
            distinct.append(self.update_backend)
        return [b for b in distinct if getattr(b, "trunk", None) is not None]

    def memo_state(self) -> dict[str, list[Any]]:
        """The memoised features for a checkpoint (:func:`llmgym.policy.memo.memo_state`);
        :meth:`load_memo_state` restores them."""
        return memo_state(self._memo)

    def load_memo_state(self, state: dict[str, list[Any]]) -> None:
        """Replace the memoised features with ``state`` (:meth:`memo_state`'s)."""
        for backend in (self.backend, self.update_backend):
            note = getattr(backend, "note_weights", None)  # the weights the memo was made
            if note is not None:  # with: seen now, so a first call does not take them as new
                note()  # and empty the memo
        restore_memo(self._memo, state, self.device)

    def share_memo(self, memo: dict[tuple[Any, ...], Any]) -> dict[tuple[Any, ...], Any]:
        """Use ``memo`` as this policy's store of memoised features (with ``memoize``) and
        return it, so that policies over one frozen backbone (several runs of a sweep) compute
        each prompt's features once. The caller vouches that the backbone stays frozen: a
        weight change the backend sees no longer empties it (``clear_cache()`` still does)."""
        if getattr(self.backend, "on_new_weights", None) == self._memo.clear:
            self.backend.on_new_weights = None
        self._memo = memo
        return memo

    # ----------------------------------------------------------------------------- acting
    @torch.no_grad()
    def act(
        self,
        observations: Sequence[str],
        infos: Sequence[dict[str, Any]],
        *,
        greedy: bool | None = None,
    ) -> list[ActionSample]:
        """Actions for all envs in one batched call (``infos`` per env: ``system_prompt``,
        ``valid_actions``; a vector env's info dict is split automatically). ``greedy``
        overrides ``config.greedy`` for this call (an evaluation acts greedily without
        touching the config the training rollouts share)."""
        infos = split_infos(infos, len(observations))
        if len(observations) != len(infos):
            raise ValueError(f"Got {len(observations)} observations but {len(infos)} infos.")
        messages = [
            self.messages_for(i, o, info) for i, (o, info) in enumerate(zip(observations, infos))
        ]
        actions = [list(info.get("valid_actions") or []) for info in infos]
        prefills = [self.prefill_for(i) for i in infos]
        samples = self.act_messages(messages, actions, prefills, greedy=greedy)
        if self.config.history:
            for i, (obs, sample) in enumerate(zip(observations, samples)):
                if "messages" not in infos[i]:
                    self.histories.setdefault(i, ChatHistory(self.config.history))
                    self.histories[i].add(str(obs), sample.text)
        return samples

    @torch.no_grad()
    def act_messages(
        self,
        messages: Sequence[list[Message]],
        valid_actions: Sequence[Sequence[str]] | None = None,
        prefills: Sequence[str] | None = None,
        *,
        greedy: bool | None = None,
    ) -> list[ActionSample]:
        """Like ``act``, from ready-made chat messages (and valid actions, for score mode;
        ``prefills``: each prompt's answer start in generate mode, default the policy's)."""
        greedy = self.config.greedy if greedy is None else greedy
        if prefills is None or self.config.mode == "score":
            prefills = [self._prefill] * len(messages)
        texts = [self.prompt_text(m, p) for m, p in zip(messages, prefills)]
        actions = [list(a) for a in valid_actions or [[] for _ in messages]]
        if self.config.mode == "generate":
            prompts = encode_many(self.tokenizer, texts)  # one tokenizer call a step
            return self._act_generate(list(messages), prompts, list(prefills), greedy, actions)
        if len(actions) != len(messages) or not all(actions):
            raise ConfigError(
                "Score mode needs discrete valid actions for every env; "
                "use PolicyConfig(mode='generate') for continuous or free-text envs."
            )
        return self._act_score(list(messages), texts, actions, greedy)

    @property
    def _stops_at_answer(self) -> bool:
        return self.config.stop_at_answer and bool(self._prefill)

    def _closing_ids(self) -> list[int]:
        """Ids of the tokens whose text holds ``}`` (computed once)."""
        if self._closing is None:
            pieces = self.tokenizer.batch_decode([[i] for i in range(len(self.tokenizer))])
            self._closing = [i for i, piece in enumerate(pieces) if "}" in piece]
        return self._closing

    def _act_generate(self, messages, prompts, prefills, greedy, actions) -> list[ActionSample]:
        max_new = self.config.max_new_tokens or self.defaults.max_new_tokens
        stop_ids = self.stop_ids + (self._closing_ids() if self._stops_at_answer else [])
        sampling = Sampling(self.config.temperature, self.config.top_p, greedy, self.generator)
        # Greedy with memoize (fixed weights): each distinct prompt is generated once; else every
        # prompt is its own (identical sampled prompts must not share an answer).
        reuse = self.memoize and greedy
        memo = self._memo if reuse else {}
        keys = [("generate", tuple(p)) if reuse else ("generate", i) for i, p in enumerate(prompts)]
        todo = first_missing(keys, memo)
        if todo:
            tokens, logps = self.backend.generate(
                [prompts[i] for i in todo], max_new, stop_ids, sampling
            )
            stop_set = set(stop_ids)
            for i, row, row_logps in zip(todo, tokens, logps):
                end = next((j + 1 for j, t in enumerate(row) if t in stop_set), len(row))
                self.stats["generated_tokens"] += end
                memo[keys[i]] = (row[:end], row_logps[:end])
        samples = []
        for b, key in enumerate(keys):
            completion, logprobs = memo[key]
            text = self.tokenizer.decode(completion, skip_special_tokens=True)
            samples.append(
                ActionSample(
                    text=prefills[b] + text,
                    action_index=None,
                    prompt_ids=prompts[b],
                    completion_ids=list(completion),
                    logprobs=list(logprobs),
                    candidate_ids=[],
                    messages=messages[b],
                    valid_actions=actions[b],
                )
            )
        return samples

    # ----------------------------------------------------------------------------- training
    def forward_samples(
        self, samples: Sequence[ActionSample], *, shared_prefix: bool = False
    ) -> PolicyOutput:
        """Log-probs, entropies and hidden states of ``samples`` under the current weights,
        with gradients (run it inside ``torch.no_grad()`` for a frozen reference). Samples
        with candidates (score mode, or :meth:`score_sample` in either mode) are scored over
        their candidates, others by their completion's tokens.

        ``shared_prefix=True``: the prompt prefix the samples share (the system prompt) is
        encoded once without gradient and its KV cache reused; the gradient flows through the
        rest of each prompt and the candidates or completions (cheaper training updates)."""
        if self.config.mode == "score" or all(s.candidate_ids for s in samples):
            return self._forward_score(samples, shared_prefix)
        return self._forward_generate(samples, shared_prefix)

    def evaluate(
        self, samples: Sequence[ActionSample], *, shared_prefix: bool = False
    ) -> PolicyOutput:
        """Deprecated alias of :meth:`forward_samples` (it shares a name with the evaluator);
        removed in the release after 0.1."""
        warnings.warn(
            "LLMPolicy.evaluate is deprecated; use LLMPolicy.forward_samples.",
            DeprecationWarning,
            stacklevel=2,
        )
        return self.forward_samples(samples, shared_prefix=shared_prefix)

    def _forward_generate(self, samples: Sequence[ActionSample], shared: bool) -> PolicyOutput:
        token_logprobs, entropy, hidden = self.update_backend.completion_logprobs(
            [s.prompt_ids for s in samples],
            [s.completion_ids for s in samples],
            self.config.temperature,
            shared=shared,
        )
        return PolicyOutput(
            torch.stack([t.sum() for t in token_logprobs]), entropy, hidden, token_logprobs
        )


__all__ = [
    "ActionSample",
    "LLMPolicy",
    "PolicyConfig",
    "PolicyOutput",
    "build_messages",
    "split_infos",
]
