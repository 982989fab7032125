"""GRPO for LLM agents in text envs, in one file.

Group Relative Policy Optimization (Shao et al. 2024, DeepSeekMath) without a critic: a
*group* of G rollouts starts from the same situation, and each rollout's advantage is its
return minus the group mean, divided by the group std. Two ways to form groups:

- ``group_level="episode"``: G episodes reset with the *same env seed* (same deal, same map,
  same initial state); every turn of an episode gets that episode's advantage.
- ``group_level="step"``: play the seed's episode with the current policy up to a random
  turn, then copy the env G times and let each copy take its own sampled action and play on
  to the end; only the branching turn is trained, with the group-normalised return-to-go.

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

import numpy as np

from llmgym.errors import ConfigError
from llmgym.rl.config import TrainConfig
from llmgym.rl.losses import (
    clipped_surrogate,
    discounted_returns,
    k3_kl,
    token_clipped_surrogate,
)
from llmgym.rl.trainer import Trainer, mean_stats
from llmgym.rollout import Episode, Step, play


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
    """Entropy bonus weight."""
    gamma: float = 1.0
    """Discount of the returns compared within a group (< 1 favours shorter episodes, e.g.
    0.95 on FrozenLake, where bumping into walls costs nothing otherwise)."""


class GRPOTrainer(Trainer):
    """GRPO with episode- or step-level groups; see the module docstring."""

    algo = "grpo"
    config: GRPOConfig

    def setup(self) -> None:
        cfg = self.config
        if cfg.group_level not in ("episode", "step"):
            raise ConfigError(f"group_level must be 'episode' or 'step', not {cfg.group_level!r}.")
        if cfg.group_size < 2:
            raise ConfigError("GRPO needs group_size >= 2 (advantages are relative to a group).")
        if self.processes.num > self.num_groups:
            raise ConfigError(
                f"{self.processes.num} processes need at least as many groups per update "
                f"(episodes_per_update / group_size), not {self.num_groups}."
            )
        self._np_rng = np.random.default_rng(cfg.run.seed + 1)
        self._train: list[tuple[Step, float]] = []
        self._train_for: list[Episode] | None = None

    def extra_state(self) -> dict[str, Any]:
        return {"np_rng": self._np_rng.bit_generator.state}

    def load_extra_state(self, state: dict[str, Any]) -> None:
        if "np_rng" in state:
            self._np_rng.bit_generator.state = state["np_rng"]

    @property
    def num_groups(self) -> int:
        return max(1, self.config.run.episodes_per_update // self.config.group_size)

    # ---- grouped rollouts ----------------------------------------------------------------

    def collect(self) -> list[Episode]:
        G = self.config.group_size
        # Whole groups to each process; a group's number is the same in every process.
        groups_here = self.processes.shard(list(enumerate(self.next_seeds(self.num_groups))))
        with self.greedy(False):
            if self.config.group_level == "episode":
                seeds = [seed for _, seed in groups_here for _ in range(G)]
                groups = [g for g, _ in groups_here for _ in range(G)]
                episodes = play(
                    self.policy.act, self.envs, seeds, first_index=self.episodes_done, groups=groups
                )
                self._train = self._episode_advantages(episodes)
                self._train_for = episodes
                return episodes
            return self._collect_steps(groups_here)

    def _episode_advantages(self, episodes: list[Episode]) -> list[tuple[Step, float]]:
        """Each turn's advantage: its episode's return normalised within its group (the
        group's episodes in every process)."""
        # Discounted from the first turn: with gamma < 1 shorter successes score higher.
        returns = [
            discounted_returns([s.reward for s in ep.steps], self.config.gamma)[0]
            if ep.steps
            else 0.0
            for ep in episodes
        ]
        by_group: dict[int, list[float]] = {}
        for group, ret in self.processes.gather(list(zip([e.group for e in episodes], returns))):
            by_group.setdefault(group, []).append(ret)
        stats = {g: (np.mean(r), np.std(r)) for g, r in by_group.items()}
        out = []
        for ep, ret in zip(episodes, returns):
            a = self._normalise(np.asarray([ret]), *stats[ep.group])[0]
            out += [(s, a) for s in ep.steps]
        return out

    def _normalise(self, returns: Any, mean: float, std: float) -> list[float]:
        """Group advantages: return minus the group mean, over its std (``scale_rewards``)."""
        adv = np.asarray(returns, dtype=float) - mean
        if self.config.scale_rewards:
            adv = adv / (std + 1e-4)
        return adv.tolist()

    def _collect_steps(self, groups_here: list[tuple[int, int]]) -> list[Episode]:
        """Step-level groups: a prefix played by the policy, then G branches to the end."""
        cfg = self.config
        G = cfg.group_size
        self._train = []
        episodes: list[Episode] = []
        rng = random.Random(int(self._np_rng.integers(2**31)))
        for g, seed in groups_here:
            env = self.envs[0]
            depth = rng.randrange(cfg.max_branch_depth)
            if depth:  # the prefix: the policy plays up to `depth` turns
                prefix = play(self.policy.act, [env], [seed], max_steps=depth)[0]
                start = prefix.final_observation, prefix.final_info
            if not depth or not prefix.capped:  # ended before the branch point: branch at its start
                start = env.reset(seed=seed)
            branches = [copy.deepcopy(env) for _ in range(G)]
            branch_eps = play(
                self.policy.act, branches, [seed] * G, starts=[start] * G, groups=[g] * G
            )
            returns = [
                discounted_returns([s.reward for s in b.steps], cfg.gamma)[0] for b in branch_eps
            ]
            adv = self._normalise(returns, np.mean(returns), np.std(returns))
            for b, a in zip(branch_eps, adv):
                self._train.append((b.steps[0], a))
            episodes += branch_eps
        self._train_for = episodes
        return episodes

    # ---- the update --------------------------------------------------------------------------

    def update(self, episodes: list[Episode]) -> dict[str, float]:
        torch, cfg = self.torch, self.config
        # Episodes handed in from outside (llmgym.Agent) form groups by their ``group`` field.
        pairs = self._train if self._train_for is episodes else self._episode_advantages(episodes)
        if not pairs:
            return {"grpo/informative_samples": 0.0}
        samples = [s.sample for s, _ in pairs]
        adv = torch.tensor([a for _, a in pairs], dtype=torch.float32, device=self.device)
        informative = (adv.abs() > 1e-8).float()
        # The policy gradient averages over the informative samples of the batch (of every
        # process): each counts n / n_informative in a mean over all samples.
        n, n_informative = self.processes.sum([len(samples), float(informative.sum())])
        pg_weight = informative * (n / max(n_informative, 1.0))
        old_logp = old_tokens = None
        if cfg.update_epochs > 1:
            old_logp, old_tokens = self._old_logprobs(samples)
        ref = self.reference_logprobs(samples) if cfg.beta > 0 else None
        generate = cfg.policy.mode == "generate"

        def loss_fn(idx: list[int]) -> tuple[Any, dict[str, float]]:
            out = self.evaluate_samples([samples[i] for i in idx])
            logp = out.logprob.float()
            a = adv[idx]
            if generate and getattr(out, "token_logprobs", None) is not None:
                tokens = [t.float() for t in out.token_logprobs]
                if old_tokens is None:  # one epoch: ratio 1, the gradient of log pi
                    old = [t.detach() for t in tokens]
                else:
                    old = [old_tokens[i] for i in idx]
                logratios = [t - o for t, o in zip(tokens, old)]
                per_sample = token_clipped_surrogate(logratios, a, cfg.clip_coef)
            else:
                old = old_logp[idx] if old_logp is not None else logp.detach()
                per_sample = clipped_surrogate(logp - old, a, cfg.clip_coef)
            pg_loss = (per_sample * pg_weight[idx]).mean()
            entropy = out.entropy.float().mean()
            loss = pg_loss - self.ent_coef * entropy
            kl = torch.zeros(())
            if ref is not None:
                kl = k3_kl(ref[idx], logp)
                loss = loss + cfg.beta * kl
            stats = {"losses/kl": kl.item()} if ref is not None else {}
            return loss, stats | {
                "losses/policy": pg_loss.item(),
                "charts/entropy": entropy.item(),
                "losses/total": loss.item(),
            }

        history = []
        for _ in range(cfg.update_epochs):
            for mb in self.processes.minibatches(
                len(samples), cfg.optim.minibatch_size, self._np_rng
            ):
                stats = self.optimize(mb, loss_fn)
                if stats is not None:
                    history.append(stats)
        return mean_stats(history) | {"grpo/informative_samples": n_informative}

    def _old_logprobs(self, samples: list[Any]) -> tuple[Any, list[Any] | None]:
        outs = self.rollout_recompute(samples)
        logps = self.torch.cat([out.logprob.float() for out in outs])
        tokens = [t.float() for out in outs for t in getattr(out, "token_logprobs", None) or []]
        return logps, (tokens or None)


__all__ = ["GRPOConfig", "GRPOTrainer"]
