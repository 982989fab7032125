"""REINFORCE with a baseline and a KL penalty to the reference, in one file.

The "stable REINFORCE" of the RL-for-math seed (LLM_RL): the policy gradient of the
reward-to-go minus a baseline, plus ``kl_coef * KL(pi || pi_ref)`` in the loss, where the
reference is the model with the LoRA adapter switched off; every ``ref_refresh_every``
iterations the adapter is merged into the weights and a fresh one starts, so the reference
follows the policy (a trust region that moves).

Departures: the baseline is the batch mean of the reward-to-go (``baseline="batch"``), an
exponential moving average (``"ema"``), or none; advantages may be scaled by their std; one
pass over each batch (on-policy; no ratio, so no clipping). In generate mode the turn's
log-probability is the mean over its completion tokens (length-normalised).

Run it::

    llmgym train Text-Blackjack-v1 --algo reinforce --mode score --sft auto --steps 3000
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from llmgym.rl.advantages import baseline_advantages, discounted_returns
from llmgym.rl.batch import RolloutBatch
from llmgym.rl.config import TrainConfig
from llmgym.rl.losses import k3_kl
from llmgym.rollout import Episode


@dataclass
class ReinforceConfig(TrainConfig):
    """REINFORCE hyperparameters (plus the shared :class:`TrainConfig` fields)."""

    algo: str = "reinforce"
    """Algorithm name (fixed)."""
    gamma: float = 1.0
    """Discount per turn for the reward-to-go."""
    baseline: str = "batch"
    """``batch`` (mean reward-to-go of the batch), ``ema`` (moving average) or ``none``."""
    ema_decay: float = 0.9
    """Decay of the ``ema`` baseline."""
    scale_advantages: bool = True
    """Divide advantages by their batch standard deviation."""
    kl_coef: float = 0.05
    """Weight of the KL(pi || pi_ref) penalty in the loss."""
    ref_refresh_every: int = 0
    """Merge the adapter into the reference every this many iterations (0 = never)."""
    ent_coef: float = 0.0
    """Entropy bonus weight."""
    update_epochs: int = 1
    """Passes over each batch (1 = strictly on-policy)."""


class Reinforce:
    """REINFORCE + baseline + KL to a (periodically refreshed) reference."""

    def __init__(self, config: ReinforceConfig, learner: Any, collector: Any, state: Any) -> None:
        self.config, self.learner, self.state = config, learner, state
        self.processes = learner.processes
        self._ema: float | None = None

    def extra_state(self) -> dict[str, Any]:
        return {"ema": self._ema}

    def load_extra_state(self, state: dict[str, Any], tensors: dict[str, Any]) -> None:
        self._ema = state.get("ema")

    # ---- advantages --------------------------------------------------------------------------

    def baseline(self, batch_mean: float) -> float:
        """The baseline of this batch (whose mean reward-to-go over every process is
        ``batch_mean``): that mean, its moving average (``ema``) or 0."""
        cfg = self.config
        if cfg.baseline == "batch":
            return batch_mean
        if cfg.baseline == "ema":
            old = self._ema
            self._ema = (
                batch_mean
                if old is None
                else cfg.ema_decay * old + (1 - cfg.ema_decay) * batch_mean
            )
            return self._ema
        return 0.0

    def advantages(self, episodes: list[Episode]) -> list[float]:
        """Each turn's reward-to-go minus the baseline, over the batch's std when
        ``scale_advantages`` (statistics over every process)."""
        cfg = self.config
        returns = [
            g
            for ep in episodes
            for g in discounted_returns([s.reward for s in ep.steps], cfg.gamma)
        ]
        batch_mean, _ = self.processes.mean_std(returns)
        base = self.baseline(batch_mean)
        _, std = self.processes.mean_std(baseline_advantages(returns, base))
        return baseline_advantages(returns, base, std if cfg.scale_advantages else None)

    # ---- the update --------------------------------------------------------------------------

    def update(self, episodes: list[Episode], acted: list[Any] | None = None) -> dict[str, float]:
        cfg, learner, iteration = self.config, self.learner, self.state.iteration
        if cfg.ref_refresh_every and iteration and iteration % cfg.ref_refresh_every == 0:
            learner.refresh_reference()
        samples = [s.sample for e in episodes for s in e.steps]
        adv = torch.tensor(self.advantages(episodes), dtype=torch.float32, device=learner.device)
        batch = RolloutBatch(
            samples=samples,
            advantages=adv,
            ref_logprobs=learner.reference_logprobs(samples) if cfg.kl_coef > 0 else None,
        )
        generate = cfg.policy.mode == "generate"

        def loss_fn(idx: list[int]) -> tuple[Any, dict[str, float]]:
            mb = batch.select(idx)
            out = learner.evaluate_samples(mb.samples)
            logp = out.logprob.float()
            if generate and getattr(out, "token_logprobs", None) is not None:
                turn_logp = torch.stack([t.float().mean() for t in out.token_logprobs])
            else:
                turn_logp = logp
            pg_loss = -(mb.advantages * turn_logp).mean()
            entropy = out.entropy.float().mean()
            loss = pg_loss - learner.ent_coef * entropy
            stats = {}
            if mb.ref_logprobs is not None:
                kl = k3_kl(mb.ref_logprobs, logp)
                loss = loss + cfg.kl_coef * kl
                stats["losses/kl"] = kl.item()
            return loss, stats | {
                "losses/policy": pg_loss.item(),
                "charts/entropy": entropy.item(),
                "losses/total": loss.item(),
            }

        metrics = learner.run_epochs(len(batch), loss_fn, cfg.update_epochs)
        return metrics | {
            "charts/advantage_abs": float(adv.abs().mean()),
            "train/reference_refreshes": float(len(learner.weights.merged_adapters)),
        }


__all__ = ["Reinforce", "ReinforceConfig"]
