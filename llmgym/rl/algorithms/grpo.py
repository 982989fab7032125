"""GRPO for LLM agents in text envs, in one file.

Group Relative Policy Optimization (Shao et al. 2024, DeepSeekMath) without a critic: a
*group* of G rollouts starts from the same situation, and each rollout's advantage is its
return minus the group mean, divided by the group std. Two ways to form groups:

- ``group_level="episode"``: G episodes reset with the *same env seed* (same deal, same map,
  same initial state); every turn of an episode gets that episode's advantage.
- ``group_level="step"``: play the seed's episode with the current policy up to a random
  turn, then copy the env G times and let each copy take its own sampled action and play on
  to the end; only the branching turn is trained, with the group-normalised return-to-go.
  Each episode the update sees is then one branch: its first turn is the one trained.

The advantage always belongs to the exact sample whose ``text`` the env stepped with.
Groups where every return is equal carry no policy-gradient signal; their samples still carry
the entropy bonus and the KL term, so a collapsed policy (no informative group at all) is still
pushed back towards exploring by the low-entropy boost (``min_entropy``). The objective is
PPO's clipped ratio (token-level, averaged per completion in generate mode) with an optional
KL(pi || pi_ref) penalty (k3 estimator), reference = the model with the LoRA adapter switched
off and no action head. The policy-gradient term averages over the informative samples of the
whole batch (of every process): each counts ``n / n_informative`` in a mean over all samples.
(Until 2026-11-25 it averaged over each micro-batch's informative samples, a weight that
depended on which samples met in a micro-batch.)

Run it::

    llmgym train Text-Blackjack-v1 --algo grpo --mode score --sft auto --steps 3000
"""

from __future__ import annotations

import copy
import random
from dataclasses import dataclass
from typing import Any

import torch

from llmgym.errors import ConfigError
from llmgym.rl.advantages import discounted_returns, group_advantages, group_stats
from llmgym.rl.batch import RolloutBatch
from llmgym.rl.config import TrainConfig
from llmgym.rl.losses import clipped_surrogate, k3_kl, token_clipped_surrogate
from llmgym.rollout import Episode


@dataclass
class GRPOConfig(TrainConfig):
    """GRPO hyperparameters (plus the shared :class:`TrainConfig` fields)."""

    algo: str = "grpo"
    """Algorithm name (fixed)."""
    group_size: int = 8
    """G: rollouts per group (``episodes_per_update // group_size`` groups per iteration)."""
    group_level: str = "episode"
    """``episode``: G episodes share the env seed; ``step``: G branches from one state."""
    max_branch_depth: int = 4
    """Step-level groups branch at a turn drawn uniformly from [0, max_branch_depth)."""
    scale_rewards: bool = True
    """Divide by the group std (False = mean-centring only, as in Dr. GRPO)."""
    clip_coef: float = 0.2
    """Ratio clipping range."""
    beta: float = 0.0
    """Weight of the KL(pi || pi_ref) penalty (0 = none, the reference is never run)."""
    update_epochs: int = 1
    """Passes over each batch (1 = the ratio is 1 and clipping is inactive)."""
    ent_coef: float = 0.0
    """Entropy bonus weight (in generate mode over the answer's tokens)."""
    action_ent_coef: float = 0.0
    """Generate mode: a bonus on the entropy over the turn's valid actions (the softmax of
    their canonical answers' scores, as score mode scores them: by default their
    log-likelihoods), which keeps exploring *which* action rather than how it is worded; it
    costs a forward pass of every valid action per trained turn. 0 = off. (In score mode
    ``ent_coef`` is already over the actions.)"""
    gamma: float = 1.0
    """Discount of the returns compared within a group (< 1 favours shorter episodes, e.g.
    0.95 on FrozenLake, where bumping into walls costs nothing otherwise)."""

    def _check_own_fields(self) -> None:
        super()._check_own_fields()
        if self.action_ent_coef and self.policy.mode != "generate":
            raise ConfigError(
                "action_ent_coef is for generate mode; in score mode ent_coef is already "
                "the entropy over the valid actions."
            )


class GRPO:
    """GRPO with episode- or step-level groups; see the module docstring."""

    def __init__(self, config: GRPOConfig, learner: Any, collector: Any, state: Any) -> None:
        self.config, self.learner, self.collector, self.state = config, learner, collector, state
        self.processes = learner.processes
        if self.processes.num > self.num_groups:
            raise ConfigError(
                f"{self.processes.num} processes need at least as many groups per update "
                f"(episodes_per_update / group_size), not {self.num_groups}."
            )

    @property
    def num_groups(self) -> int:
        return max(1, self.config.run.episodes_per_update // self.config.group_size)

    # ---- grouped rollouts ----------------------------------------------------------------

    def collect(self) -> list[Episode]:
        """``num_groups`` groups of G episodes (whole groups to each process; a group's number
        is the same in every process)."""
        G = self.config.group_size
        seeds_here = self.collector.next_seeds(self.num_groups)
        groups_here = self.processes.shard(list(enumerate(seeds_here)))
        if self.config.group_level == "step":
            return self._collect_branches(groups_here)
        seeds = [seed for _, seed in groups_here for _ in range(G)]
        groups = [g for g, _ in groups_here for _ in range(G)]
        first = self.state.episodes_done
        return self.collector.play(seeds, first_index=first, groups=groups)

    def _collect_branches(self, groups_here: list[tuple[int, int]]) -> list[Episode]:
        """Step-level groups: a prefix played by the policy, then G branches to the end."""
        cfg = self.config
        G = cfg.group_size
        episodes: list[Episode] = []
        rng = random.Random(int(self.state.np_rng.integers(2**31)))
        for g, seed in groups_here:
            env = self.collector.envs[0]
            depth = rng.randrange(cfg.max_branch_depth)
            if depth:  # the prefix: the policy plays up to `depth` turns
                prefix = self.collector.play([seed], envs=[env], max_steps=depth)[0]
                start = prefix.final_observation, prefix.final_info
            if not depth or not prefix.capped:  # ended before the branch point: branch at its start
                start = env.reset(seed=seed)
            branches = [copy.deepcopy(env) for _ in range(G)]
            episodes += self.collector.play(
                [seed] * G, envs=branches, starts=[start] * G, groups=[g] * G
            )
        return episodes

    # ---- advantages --------------------------------------------------------------------------

    def advantages(self, episodes: list[Episode]) -> tuple[list[Any], list[float]]:
        """(the trained samples, their advantages): each episode's discounted return (from its
        first turn: with gamma < 1 shorter successes score higher) normalised within its group
        (the group's episodes in every process). Every turn of an episode is trained, or, with
        step-level groups, only the first turn of each branch: the one that branched."""
        returns = [
            discounted_returns([s.reward for s in ep.steps], self.config.gamma)[0]
            if ep.steps
            else 0.0
            for ep in episodes
        ]
        groups = [e.group for e in episodes]
        stats = group_stats(self.processes.gather(list(zip(groups, returns))))
        adv = group_advantages(returns, groups, self.config.scale_rewards, stats)
        if self.config.group_level == "step":
            return [ep.steps[0].sample for ep in episodes], adv
        pairs = [(s.sample, a) for ep, a in zip(episodes, adv) for s in ep.steps]
        return [s for s, _ in pairs], [a for _, a in pairs]

    # ---- the update --------------------------------------------------------------------------

    def update(self, episodes: list[Episode], acted: list[Any] | None = None) -> dict[str, float]:
        cfg, learner = self.config, self.learner
        samples, adv_list = self.advantages(episodes)
        if not samples:
            return {"grpo/informative_samples": 0.0}
        if self.config.group_level == "step":
            acted = None  # the acted outputs cover every turn, not only the branching ones
        adv = torch.tensor(adv_list, dtype=torch.float32, device=learner.device)
        informative = (adv.abs() > 1e-8).float()
        # The policy gradient averages over the informative samples of the batch (of every
        # process): each counts n / n_informative in a mean over all samples.
        n, n_informative = self.processes.sum([len(samples), float(informative.sum())])
        old_logp = old_tokens = None
        if cfg.update_epochs > 1:  # else the ratio is 1: the loss uses the current log-probs
            old_logp, old_tokens, _ = learner.old_logprobs(samples, acted)
        batch = RolloutBatch(
            samples=samples,
            advantages=adv,
            old_logprobs=old_logp,
            old_token_logprobs=old_tokens,
            ref_logprobs=learner.reference_logprobs(samples) if cfg.beta > 0 else None,
            weights=informative * (n / max(n_informative, 1.0)),
        )
        generate = cfg.policy.mode == "generate"
        # Every valid action of each turn, scored: built once, trained in every epoch.
        scored = self.scored_actions(samples) if cfg.action_ent_coef else []

        def loss_fn(idx: list[int]) -> tuple[Any, dict[str, float]]:
            mb = batch.select(idx)
            out = learner.evaluate_samples(mb.samples)
            logp = out.logprob.float()
            if generate and getattr(out, "token_logprobs", None) is not None:
                tokens = [t.float() for t in out.token_logprobs]
                old = mb.old_token_logprobs or [t.detach() for t in tokens]
                logratios = [t - o for t, o in zip(tokens, old)]
                per_sample = token_clipped_surrogate(logratios, mb.advantages, cfg.clip_coef)
            else:
                old = mb.old_logprobs if mb.old_logprobs is not None else logp.detach()
                per_sample = clipped_surrogate(logp - old, mb.advantages, cfg.clip_coef)
            pg_loss = (per_sample * mb.weights).mean()
            entropy = out.entropy.float().mean()
            loss = pg_loss - learner.ent_coef * entropy
            stats = {}
            if mb.ref_logprobs is not None:
                kl = k3_kl(mb.ref_logprobs, logp)
                loss = loss + cfg.beta * kl
                stats["losses/kl"] = kl.item()
            if scored:
                out_actions = learner.evaluate_samples([scored[i] for i in idx])
                action_entropy = out_actions.entropy.float().mean()
                loss = loss - cfg.action_ent_coef * action_entropy
                stats["charts/action_entropy"] = action_entropy.item()
            return loss, stats | {
                "losses/policy": pg_loss.item(),
                "charts/entropy": entropy.item(),
                "losses/total": loss.item(),
            }

        metrics = learner.run_epochs(len(batch), loss_fn, cfg.update_epochs)
        return metrics | {"grpo/informative_samples": n_informative}

    def scored_actions(self, samples: list[Any]) -> list[Any]:
        """Each turn as a score-mode sample over its valid actions (every action's canonical
        answer after the turn's prompt): their forward pass gives the entropy over the
        actions that ``action_ent_coef`` rewards."""
        if any(not s.valid_actions for s in samples):
            raise ConfigError(
                "action_ent_coef needs an env with discrete valid actions (a turn had none)."
            )
        policy = self.learner.policy
        return [policy.score_sample(s.messages, s.valid_actions, 0) for s in samples]


__all__ = ["GRPO", "GRPOConfig"]
