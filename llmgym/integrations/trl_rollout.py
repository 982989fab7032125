"""``rollout_func`` for TRL's ``GRPOTrainer``: whole llmgym episodes played by ``LLMPolicy``.

Each prompt (a row of ``episode_dataset``) becomes one episode, played in generate mode on the
trainer's plain language model; all episodes of a call advance together, one batched
``act_messages`` per turn. An episode is returned as one sequence, the way TRL trains
multi-turn tool use:

    prompt_ids     = the first turn's prompt (chat template + the ``{"action": "`` prefill)
    completion_ids = answer 1, env tokens, answer 2, env tokens, ..., last answer
    env_mask       = 1 on answer tokens, 0 on env tokens (the chat template's turn markers, the
                     next observation and the next prefill), so only model tokens are trained
    logprobs       = the sampling log-probs of answer tokens (0 on env tokens)

Each turn's prompt is the whole conversation so far, so the sequence is exactly what the model
saw. Where re-encoding the conversation does not reproduce the sampled tokens (a BPE merge
across an answer), the env tokens are encoded from the text that follows; ``stats`` counts
those turns.

Example:
    >>> rollout = rollout_func("Text-Blackjack-v1", max_new_tokens=8)
    >>> rollout.stats["episodes"], rollout.max_turns
    (0, 32)
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from llmgym.errors import ConfigError
from llmgym.integrations import make_text_env

SEED_KEY = "llmgym_seed"
"""Key of the first user message (in ``episode_dataset`` prompts) that carries the env seed."""


@dataclass
class _Trajectory:
    env: Any
    seed: int
    messages: list[dict[str, Any]]
    info: dict[str, Any]
    prompt_ids: list[int] = field(default_factory=list)
    completion_ids: list[int] = field(default_factory=list)
    env_mask: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    actions: list[str] = field(default_factory=list)
    rewards: list[float] = field(default_factory=list)
    done: bool = False


class EpisodeRollout:
    """The callable ``rollout_func`` returns: ``(prompts, trainer) -> dict`` for TRL."""

    def __init__(
        self,
        env_id: str,
        *,
        max_turns: int = 32,
        max_new_tokens: int | None = None,
        prefill: bool = True,
        seed: int = 0,
        make_kwargs: dict[str, Any] | None = None,
    ) -> None:
        if max_turns < 1:
            raise ConfigError(f"max_turns must be 1 or more, not {max_turns}.")
        self.env_id = env_id
        self.max_turns = max_turns
        self.max_new_tokens = max_new_tokens
        self.prefill = prefill
        self.seed = seed
        self.make_kwargs = dict(make_kwargs or {})
        make_text_env(env_id, **self.make_kwargs).close()  # fail early on an unknown id
        self._rng = np.random.default_rng(seed)
        self._policy: Any = None
        self._policy_key: tuple[Any, ...] | None = None
        #: Totals over all calls: episodes played, turns, turns whose env tokens were
        #: re-encoded from text, episodes cut at ``max_turns``, answers the env parsed, GRPO
        #: groups (the episodes of one seed) and those whose returns were all equal.
        self.stats = dict.fromkeys(
            (
                "episodes",
                "turns",
                "retokenized_turns",
                "cut_episodes",
                "parsed",
                "groups",
                "flat_groups",
            ),
            0,
        )

    # ----------------------------------------------------------------------------- policy
    def policy(self, model: Any, tokenizer: Any, temperature: float = 1.0) -> Any:
        """The ``LLMPolicy`` acting with ``model`` (kept across calls for the same model)."""
        from llmgym.policy import LLMPolicy, PolicyConfig

        key = (id(model), id(tokenizer), temperature)
        if key != self._policy_key:
            config = PolicyConfig(
                mode="generate",
                temperature=temperature,
                max_new_tokens=self.max_new_tokens,
                prefill=self.prefill,
                seed=self.seed,
            )
            self._policy = LLMPolicy(model, tokenizer, config)
            self._policy_key = key
        return self._policy

    def _seeds(self, prompts: Sequence[Any]) -> list[int]:
        """The seed each prompt names (``episode_dataset``); prompts without one get a fresh
        seed, shared by consecutive equal prompts (a GRPO group)."""
        seeds: list[int] = []
        for i, prompt in enumerate(prompts):
            named = _named_seed(prompt)
            if named is not None:
                seeds.append(named)
            elif i and prompt == prompts[i - 1]:
                seeds.append(seeds[-1])
            else:
                seeds.append(int(self._rng.integers(2**31)))
        return seeds

    # ----------------------------------------------------------------------------- rollout
    def __call__(self, prompts: list[Any], trainer: Any) -> dict[str, list[Any]]:
        """Play one episode per prompt with the trainer's model; TRL's rollout dict."""
        from trl.models import unwrap_model_for_generation

        with unwrap_model_for_generation(  # also lifts gradient checkpointing (no KV cache)
            trainer.model_wrapped,
            trainer.accelerator,
            gather_deepspeed3_params=trainer.args.ds3_gather_for_generation,
            gradient_checkpointing_kwargs=trainer.args.gradient_checkpointing_kwargs,
        ) as model:
            policy = self.policy(model, trainer.processing_class, float(trainer.temperature))
            return self.play(policy, self._seeds(prompts))

    def play(self, policy: Any, seeds: Sequence[int]) -> dict[str, list[Any]]:
        """Play one episode per seed with ``policy`` (all envs batched per turn)."""
        trajectories = []
        for s in seeds:
            env = make_text_env(self.env_id, **self.make_kwargs)
            obs, info = env.reset(seed=int(s))
            messages = policy.messages_for(len(trajectories), str(obs), info)
            trajectories.append(_Trajectory(env, int(s), messages, info))
        for _ in range(self.max_turns):
            active = [t for t in trajectories if not t.done]
            if not active:
                break
            samples = policy.act_messages(
                [t.messages for t in active],
                [t.info.get("valid_actions") or [] for t in active],
                [policy.prefill_for(t.info) for t in active],
            )
            for t, sample in zip(active, samples):
                self._append_turn(policy, t, sample)
                obs, reward, terminated, truncated, t.info = t.env.step(sample.text)
                t.actions.append(sample.text)
                t.rewards.append(float(reward))
                t.done = bool(terminated or truncated)
                self.stats["parsed"] += bool(t.info.get("parse", {}).get("ok", True))
                t.messages = [
                    *t.messages,
                    {"role": "assistant", "content": sample.text},
                    {"role": "user", "content": str(obs)},
                ]
        for t in trajectories:
            t.env.close()
            self._close(policy, t)
        self._check_spread([t.seed for t in trajectories], [sum(t.rewards) for t in trajectories])
        return {
            "prompt_ids": [t.prompt_ids for t in trajectories],
            "completion_ids": [t.completion_ids for t in trajectories],
            "logprobs": [t.logprobs for t in trajectories],
            "env_mask": [t.env_mask for t in trajectories],
            "episode_return": [float(sum(t.rewards)) for t in trajectories],
            "llmgym_seed": [t.seed for t in trajectories],
            "llmgym_actions": [list(t.actions) for t in trajectories],
        }

    def _check_spread(self, seeds: Sequence[int], returns: Sequence[float]) -> None:
        """Count the GRPO groups (episodes of one seed) and those whose returns are all equal,
        which carry no learning signal; warn when a whole call has none with any spread."""
        groups: dict[int, list[float]] = {}
        for seed, ret in zip(seeds, returns):
            groups.setdefault(seed, []).append(ret)
        flat = sum(len(r) < 2 or max(r) == min(r) for r in groups.values())
        self.stats["groups"] += len(groups)
        self.stats["flat_groups"] += flat
        if groups and flat == len(groups):
            warnings.warn(
                f"llmgym: every GRPO group of this step ({len(groups)} seed(s) x "
                f"{len(seeds) // max(len(groups), 1)} episodes) has one return for all its "
                "episodes: the step has no learning signal (loss 0). Sample more differently: "
                "num_generations >= 8, temperature >= 1, several seeds per step "
                "(per_device_train_batch_size = num_generations x seeds); see "
                "docs/integrations.md, 'TRL'.",
                RuntimeWarning,
                stacklevel=3,
            )

    def _append_turn(self, policy: Any, t: _Trajectory, sample: Any) -> None:
        """Add a turn's env tokens (the prompt beyond what the sequence holds) and answer."""
        self.stats["turns"] += 1
        if not t.prompt_ids:
            t.prompt_ids = list(sample.prompt_ids)
        else:
            held = t.prompt_ids + t.completion_ids
            if sample.prompt_ids[: len(held)] == held:
                env_ids = sample.prompt_ids[len(held) :]
            else:
                self.stats["retokenized_turns"] += 1
                prompt = policy.prompt_text(t.messages, policy.prefill_for(t.info))
                env_ids = _text_continuation(policy, held, prompt)
            t.completion_ids += env_ids
            t.env_mask += [0] * len(env_ids)
            t.logprobs += [0.0] * len(env_ids)
        t.completion_ids += list(sample.completion_ids)
        t.env_mask += [1] * len(sample.completion_ids)
        t.logprobs += [float(x) for x in sample.logprobs]

    def _close(self, policy: Any, t: _Trajectory) -> None:
        """Count the episode; a finished one whose last answer did not end the turn gets the
        end-of-turn token (an env token), so TRL does not count it as clipped."""
        self.stats["episodes"] += 1
        if not t.done:
            self.stats["cut_episodes"] += 1
            return
        stop = policy.tokenizer.eos_token_id
        if stop is not None and t.completion_ids and t.completion_ids[-1] != stop:
            t.completion_ids.append(stop)
            t.env_mask.append(0)
            t.logprobs.append(0.0)


def _named_seed(prompt: Any) -> int | None:
    if isinstance(prompt, list):
        for message in prompt:
            if isinstance(message, dict) and message.get(SEED_KEY) is not None:
                return int(message[SEED_KEY])
    return None


def _text_continuation(policy: Any, held: list[int], prompt_text: str) -> list[int]:
    """Token ids of the part of ``prompt_text`` beyond the text ``held`` decodes to."""
    held_text = policy.tokenizer.decode(held, skip_special_tokens=False)
    n = 0
    for a, b in zip(held_text, prompt_text):
        if a != b:
            break
        n += 1
    return list(policy.tokenizer(prompt_text[n:], add_special_tokens=False)["input_ids"])


def rollout_func(
    env_id: str,
    *,
    max_turns: int = 32,
    max_new_tokens: int | None = None,
    prefill: bool = True,
    seed: int = 0,
    **make_kwargs: Any,
) -> EpisodeRollout:
    """A ``rollout_func`` for ``GRPOTrainer`` playing ``env_id`` episodes of at most
    ``max_turns`` turns, ``max_new_tokens`` per answer (None: the model's default), with the
    ``{"action": "`` prefill; its extra fields ``episode_return``, ``llmgym_seed`` and
    ``llmgym_actions`` reach the reward functions (use ``episode_return``)."""
    return EpisodeRollout(
        env_id,
        max_turns=max_turns,
        max_new_tokens=max_new_tokens,
        prefill=prefill,
        seed=seed,
        make_kwargs=make_kwargs,
    )


__all__ = ["SEED_KEY", "EpisodeRollout", "rollout_func"]
