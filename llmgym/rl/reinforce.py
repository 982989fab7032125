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

import numpy as np

from llmgym.rl.config import TrainConfig
from llmgym.rl.losses import discounted_returns, k3_kl
from llmgym.rl.trainer import Trainer, mean_stats
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


class ReinforceTrainer(Trainer):
    """REINFORCE + baseline + KL to a (periodically refreshed) reference."""

    algo = "reinforce"
    config: ReinforceConfig

    def setup(self) -> None:
        self._ema: float | None = None
        self._np_rng = np.random.default_rng(self.config.run.seed + 1)

    def extra_state(self) -> dict[str, Any]:
        return {"ema": self._ema, "np_rng": self._np_rng.bit_generator.state}

    def load_extra_state(self, state: dict[str, Any]) -> None:
        self._ema = state.get("ema")
        if "np_rng" in state:
            self._np_rng.bit_generator.state = state["np_rng"]

    def compute_advantages(self, episodes: list[Episode]) -> list[float]:
        cfg = self.config
        returns: list[float] = []
        for ep in episodes:
            for step, g in zip(
                ep.steps, discounted_returns([s.reward for s in ep.steps], cfg.gamma)
            ):
                step.ret = g
                returns.append(g)
        arr = np.asarray(returns, dtype=float)
        batch_mean, _ = self.processes.mean_std(arr)  # the batch of every process
        if cfg.baseline == "batch":
            base = batch_mean
        elif cfg.baseline == "ema":
            self._ema = (
                batch_mean
                if self._ema is None
                else (cfg.ema_decay * self._ema + (1 - cfg.ema_decay) * batch_mean)
            )
            base = self._ema
        else:
            base = 0.0
        adv = arr - base
        _, std = self.processes.mean_std(adv)
        if cfg.scale_advantages and std > 1e-8:
            adv = adv / (std + 1e-8)
        return adv.tolist()

    def update(self, episodes: list[Episode]) -> dict[str, float]:
        torch, cfg = self.torch, self.config
        if cfg.ref_refresh_every and self.iteration and self.iteration % cfg.ref_refresh_every == 0:
            self.refresh_reference()
        steps = [s for e in episodes for s in e.steps]
        samples = [s.sample for s in steps]
        adv = torch.tensor(
            self.compute_advantages(episodes), dtype=torch.float32, device=self.device
        )
        ref = self.reference_logprobs(samples) if cfg.kl_coef > 0 else None
        generate = cfg.policy.mode == "generate"

        def loss_fn(idx: list[int]) -> tuple[Any, dict[str, float]]:
            out = self.evaluate_samples([samples[i] for i in idx])
            logp = out.logprob.float()
            if generate and getattr(out, "token_logprobs", None) is not None:
                turn_logp = torch.stack([t.float().mean() for t in out.token_logprobs])
            else:
                turn_logp = logp
            pg_loss = -(adv[idx] * turn_logp).mean()
            entropy = out.entropy.float().mean()
            loss = pg_loss - self.ent_coef * entropy
            kl = torch.zeros(())
            if ref is not None:
                kl = k3_kl(ref[idx], logp)
                loss = loss + cfg.kl_coef * kl
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
        return mean_stats(history) | {
            "charts/advantage_abs": float(adv.abs().mean()),
            "train/reference_refreshes": float(len(self.merged_adapters)),
        }


__all__ = ["ReinforceConfig", "ReinforceTrainer"]
