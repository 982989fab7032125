"""PPO for LLM agents in text envs (turn-level), in one file.

How it departs from PPO as written for Atari/MuJoCo (Schulman et al. 2017; CleanRL's
``ppo.py``):

- the actor is the LLM policy; an *action* is a whole turn: one candidate in score mode, the
  whole completion in generate mode (the clipped ratio is then taken per completion token and
  averaged over the turn's tokens; prompt tokens never carry loss);
- the critic is a small MLP value head on the backbone's hidden state at the last prompt
  token (as in TWOSOME / GLAM); by default its input is detached so the value loss cannot pull
  the language model away from the policy objective;
- ``value_norm`` makes the critic independent of the returns' scale: it predicts returns
  normalized by a running mean and standard deviation (MAPPO's value normalization, Yu et
  al. 2022), so a zero critic already outputs the mean return and learns deviations of order
  one; a plain critic must first grow its bias to the returns' scale at the rate of its
  optimizer's steps (``value_lr`` per step for Adam);
- GAE runs across the turns of an episode (gamma/lambda per turn, not per token);
- iterations collect *complete* episodes (a truncated one bootstraps from V(final obs));
- ``mirror`` (envs with a mirror symmetry, e.g. CartPole) adds each state's mirror image with
  the mirrored action and the same advantage, so an update moves a symmetric policy alike on
  both sides;
- ``target_kl`` stops the epoch loop early once the approximate KL between the rollout
  policy and the current one exceeds it; an optional KL penalty to the reference (the model
  with the LoRA adapter switched off) keeps the policy near the pretrained model.

The parts: :class:`ReturnScale` (``value_norm``'s running statistics), the critic
(:class:`ValueCritic`: the value head, and the actor's loss, the clipped surrogate) and
:class:`PPO`, whose :meth:`PPO.update` reads top to bottom. The Q-critic actor-critic
(``qac.py``) is this loop with another critic and another actor loss: ``PPO(...,
critic=QCritic...)``, a critic with the methods of :class:`ValueCritic`.

Run it::

    llmgym train Text-Blackjack-v1 --algo ppo --mode score --sft auto --steps 3000
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch

from llmgym.errors import TrainingError
from llmgym.rl.advantages import gae
from llmgym.rl.batch import RolloutBatch
from llmgym.rl.config import TrainConfig
from llmgym.rl.losses import clipped_surrogate, k3_kl, token_clipped_surrogate
from llmgym.rl.metrics import explained_variance
from llmgym.rl.mirror import check_mirror, mirrored_samples
from llmgym.rollout import Episode

#: Returns from this magnitude up overflow float32 squares (the value loss, the gradient norm).
OVERFLOW_RETURN = 1e18


@dataclass
class PPOConfig(TrainConfig):
    """PPO hyperparameters (plus the shared :class:`TrainConfig` fields)."""

    algo: str = "ppo"
    """Algorithm name (fixed)."""
    gamma: float = 1.0
    """Discount per turn."""
    gae_lambda: float = 0.95
    """GAE lambda across turns."""
    update_epochs: int = 2
    """Passes over each batch of rollouts."""
    clip_coef: float = 0.2
    """Ratio clipping range."""
    clip_vloss: bool = False
    """Clip the value loss around the rollout values."""
    vf_coef: float = 0.5
    """Value loss weight."""
    ent_coef: float = 0.01
    """Entropy bonus weight."""
    kl_coef: float = 0.0
    """Weight of a KL penalty to the reference policy (0 = none)."""
    target_kl: float | None = 0.05
    """Stop the epoch loop once approx KL(rollout || current) exceeds this (None = never)."""
    norm_adv: bool = True
    """Normalise advantages over the batch."""
    value_hidden: int = 128
    """Width of the value head's hidden layer."""
    value_detach: bool = True
    """Feed the value head detached features (the value loss trains the head only)."""
    value_lr: float = 1e-3
    """Learning rate of the value head."""
    value_whiten: bool = False
    """Without an action head: the critic is linear on the whitened hidden state (the action
    head's feature map, refreshed from each update's states) instead of an MLP on the raw
    one, as with the head. On Blackjack (SmolLM2-135M, no head) the MLP explained 0.0002 of
    the returns' variance after 18 updates, the whitened critic ~0.25 at ``value_lr`` 1e-3
    (negative at 0.01); docs/results/research-notes.md."""
    value_norm: bool = False
    """Train the critic on returns normalized by running statistics (see above)."""
    value_norm_decay: float = 0.9
    """Weight of the previous statistics when an update's returns are averaged in."""
    mirror: bool = False
    """Also train on each state's mirror image with the mirrored action and the same advantage
    (envs whose catalog entry declares a mirror symmetry: CartPole; see ``mirror.py``)."""


class ReturnScale:
    """``value_norm``'s running mean and standard deviation of the returns: decayed sums of
    the returns, their squares and the weights (0 and 1 until the first update).

    Example:
        >>> scale = ReturnScale(decay=0.0)
        >>> scale.scale()
        (0.0, 1.0)
        >>> scale.sums = [2.0, 5.0, 1.0]
        >>> scale.scale()
        (2.0, 1.0)
    """

    def __init__(self, decay: float) -> None:
        self.decay = decay
        self.sums = [0.0, 0.0, 0.0]

    def scale(self) -> tuple[float, float]:
        """Mean and standard deviation that ``value_norm`` divides the returns by."""
        total, squares, weight = self.sums
        if weight == 0.0:
            return 0.0, 1.0
        mean = total / weight
        return mean, max(squares / weight - mean**2, 1e-2) ** 0.5

    def renormalize(self, returns: list[float], processes: Any) -> None:
        """Average a batch's returns (over every process) into the running statistics."""
        mean, std = processes.mean_std(returns, ddof=0)
        for i, x in enumerate((mean, std**2 + mean**2, 1.0)):
            self.sums[i] = self.decay * self.sums[i] + (1 - self.decay) * x


def state_size(learner: Any) -> int:
    """The size of the state features a critic reads: the model's hidden state at each layer
    the policy reads."""
    model = learner.model
    hidden = model.config.hidden_size if hasattr(model, "config") else None
    hidden = hidden or model.get_base_model().config.hidden_size
    return hidden * len(learner.policy.layers)


class ValueCritic:
    """PPO's critic and actor loss: a value head on the state features (linear on the action
    head's whitened features, on its own whitened ones with ``value_whiten``, else an MLP) and
    the clipped surrogate. A critic of another kind (``qac.py``) has the same methods."""

    #: Whether each free-text turn is scored again as the action the env took.
    scores_answers = False

    def __init__(self, config: Any, learner: Any, returns: ReturnScale) -> None:
        self.config, self.policy, self.returns = config, learner.policy, returns
        self.value_head = self._make_head(state_size(learner)).to(learner.device)
        learner.add_module("value_head", self.value_head, config.value_lr)

    def _make_head(self, hidden: int) -> Any:
        if self.policy.head is not None:  # linear on the action head's whitened features
            head = torch.nn.Linear(self.policy.head.feature_size, 1)
            torch.nn.init.zeros_(head.weight)
            torch.nn.init.zeros_(head.bias)
        elif self.config.value_whiten:  # linear on its own whitened features
            from llmgym.policy.action_head import Whitener

            linear = torch.nn.Linear(hidden, 1)
            torch.nn.init.zeros_(linear.weight)
            torch.nn.init.zeros_(linear.bias)
            head = torch.nn.Sequential(Whitener(hidden, self.config.policy.head_whiten_eps), linear)
        else:
            gen = torch.Generator().manual_seed(self.config.run.seed + 17)
            head = torch.nn.Sequential(
                torch.nn.Linear(hidden, self.config.value_hidden),
                torch.nn.Tanh(),
                torch.nn.Linear(self.config.value_hidden, 1),
            )
            with torch.no_grad():
                for p in head.parameters():
                    p.copy_(torch.randn(p.shape, generator=gen) * 0.02)
        return head

    def normalized_value(self, hidden: Any) -> Any:
        """The value head's output: the value itself, or with ``value_norm`` its normalized
        form."""
        features = self.policy.features(hidden)
        features = features.detach() if self.config.value_detach else features
        return self.value_head(features).squeeze(-1)

    def value(self, hidden: Any) -> Any:
        """The value in return units."""
        mean, std = self.returns.scale()
        return self.normalized_value(hidden) * std + mean

    def whitener(self) -> Any:
        """The whitener of a critic that has its own (``value_whiten`` without a head),
        refreshed from each update's states; None otherwise."""
        if self.config.value_whiten and self.policy.head is None:
            return self.value_head[0]
        return None

    def state_values(self, out: Any, samples: list[Any]) -> Any:
        """V(s) in return units of the samples' states."""
        return self.value(out.hidden)

    def value_prediction(self, out: Any, mb: RolloutBatch) -> Any:
        """The critic's (normalized) prediction of each sample's return."""
        return self.normalized_value(out.hidden)

    def update_samples(self, steps: list[Any], acted: Any) -> tuple[list[Any], Any]:
        """The samples an update trains on, and the acting outputs that cover them (None:
        computed again)."""
        return [s.sample for s in steps], acted

    def critic_samples(self, samples: list[Any]) -> list[Any]:
        """The samples the critic values (the acted ones)."""
        return samples

    def actor_targets(self, outs: Any, chunks: Any, acted: Any, returns: Any, scale: Any) -> Any:
        """Per-sample target distributions the actor is fitted to instead of the clipped
        surrogate (None: the surrogate)."""
        return None

    def policy_loss(self, out: Any, mb: RolloutBatch, logratio: Any) -> Any:
        """The per-sample policy loss: the clipped surrogate, per completion token (averaged
        over the turn) in generate mode."""
        clip = self.config.clip_coef
        if mb.old_token_logprobs is not None:  # per-token ratio, averaged per completion
            token_logratios = [
                new.float() - old for new, old in zip(out.token_logprobs, mb.old_token_logprobs)
            ]
            return token_clipped_surrogate(token_logratios, mb.advantages, clip)
        return clipped_surrogate(logratio, mb.advantages, clip)


class PPO:
    """PPO with a critic (default :class:`ValueCritic`); see the module docstring."""

    def __init__(
        self, config: PPOConfig, learner: Any, collector: Any, state: Any, critic: Any = None
    ) -> None:
        self.config, self.learner, self.collector, self.state = config, learner, collector, state
        self.policy, self.processes = learner.policy, learner.processes
        if config.mirror:
            envs = collector.envs
            check_mirror(envs[0] if envs else None, config.policy.mode, config.policy.history)
        self.returns = ReturnScale(config.value_norm_decay)
        self.critic = (critic or ValueCritic)(config, learner, self.returns)

    # ---- checkpoints: the return statistics and the critic's own state ---------------------

    def extra_state(self) -> dict[str, Any]:
        own = getattr(self.critic, "extra_state", dict)
        return {"return_sums": self.returns.sums} | own()

    def extra_tensors(self) -> dict[str, Any]:
        return getattr(self.critic, "extra_tensors", dict)()

    def load_extra_state(self, state: dict[str, Any], tensors: dict[str, Any]) -> None:
        self.returns.sums = list(state.get("return_sums", [0.0, 0.0, 0.0]))
        if hasattr(self.critic, "load_extra_state"):
            self.critic.load_extra_state(state, tensors)

    # ---- advantages ------------------------------------------------------------------------

    def bootstrap_values(self, episodes: list[Episode]) -> dict[int, float]:
        """V(final observation) of the episodes cut by the time limit, by episode index (the
        policy answers the final observation once, for its prompt)."""
        cut = [e for e in episodes if e.truncated]
        if not cut:
            return {}
        with torch.no_grad():
            samples = self.collector.act(
                [e.final_observation for e in cut], [e.final_info for e in cut]
            )
            samples = self.critic.critic_samples(samples)
            out = self.learner.evaluate_samples(samples)
            values = self.critic.state_values(out, samples).tolist()
        return {e.index: v for e, v in zip(cut, values)}

    def advantages(
        self, episodes: list[Episode], values: list[float], last: dict[int, float]
    ) -> tuple[list[float], list[float]]:
        """GAE across each episode's turns (:func:`~llmgym.rl.advantages.gae`): (advantages,
        returns) over the episodes' turns in order. ``values``: the critic's, per turn;
        ``last``: :meth:`bootstrap_values` (a terminated episode's next value is 0)."""
        cfg = self.config
        advantages: list[float] = []
        returns: list[float] = []
        k = 0
        for ep in episodes:
            vals = values[k : k + ep.length]
            k += ep.length
            last_value = (
                last.get(ep.index, 0.0) if ep.steps and not ep.steps[-1].terminated else 0.0
            )
            rewards = [s.reward for s in ep.steps]
            adv, ret = gae(rewards, vals, last_value, cfg.gamma, cfg.gae_lambda)
            advantages += adv
            returns += ret
        return advantages, returns

    def _refuse_overflow(self, metrics: dict[str, float], returns: list[float]) -> None:
        """Raise ``TrainingError`` when every step of this update was skipped (no loss in
        ``metrics``) on returns too large for float32 squares (above ``OVERFLOW_RETURN``, as
        rewards of 1e30 give): every later update would be skipped too, and the run would end
        having trained nothing."""
        largest = max((abs(r) for r in returns if math.isfinite(r)), default=0.0)
        if "losses/total" in metrics or largest < OVERFLOW_RETURN:
            return
        fix = (
            "scale the rewards down"
            if self.config.value_norm
            else "scale the rewards down, or pass --set value_norm=true (the critic then learns "
            "normalized returns)"
        )
        raise TrainingError(
            f"Every PPO step of update {self.state.iteration + 1} was skipped: returns up to "
            f"{largest:.3g} overflow the losses in float32, so nothing can be trained; {fix}."
        )

    def _refresh_critic_features(self, outs: list[Any]) -> None:
        """Add this batch's features to the critic's own whitener, if it has one, and refresh
        its map, the same in every process."""
        whitener = self.critic.whitener()
        if whitener is None:
            return
        hidden = self.processes.gather([h.cpu() for out in outs for h in out.hidden])
        features = self.policy.features(torch.stack(hidden).to(self.learner.device))
        whitener.update(features.detach())
        whitener.refresh()

    @staticmethod
    def _split(samples: list[Any], outs: list[Any]) -> list[list[Any]]:
        """``samples`` cut into the chunks that ``outs`` (one output per chunk) were made of."""
        chunks, k = [], 0
        for out in outs:
            chunks.append(samples[k : k + len(out.logprob)])
            k += len(out.logprob)
        return chunks

    # ---- the update ------------------------------------------------------------------------

    def update(self, episodes: list[Episode], acted: list[Any] | None = None) -> dict[str, float]:
        cfg, learner, critic = self.config, self.learner, self.critic
        device = learner.device
        steps = [s for e in episodes for s in e.steps]
        samples, acted = critic.update_samples(steps, acted)
        answers = critic.scores_answers
        n = len(steps)  # the acted samples; with ``mirror`` their mirror images follow
        copies = 2 if cfg.mirror else 1
        if cfg.mirror:
            samples += mirrored_samples(self.policy, self.collector.envs[0], steps)
            acted = None  # the acted outputs do not cover the mirror images
        # 1. What the rollout policy said: old log-probs and the critic's values.
        old_logp, old_tokens, outs = learner.old_logprobs(samples, acted)
        self._refresh_critic_features(outs)
        with torch.no_grad():
            chunks = self._split(samples, outs)
            old_values = torch.cat([critic.state_values(o, c) for o, c in zip(outs, chunks)])
        # 2. Advantages and the critic's targets (mirror images copy their originals').
        last = self.bootstrap_values(episodes)
        adv_list, ret_list = self.advantages(episodes, old_values[:n].tolist(), last)
        adv = torch.tensor(adv_list * copies, device=device)
        returns = torch.tensor(ret_list * copies, device=device)
        if cfg.value_norm:
            self.returns.renormalize(returns.tolist(), self.processes)
        ret_mean, ret_std = self.returns.scale()  # the critic's targets (normalized by value_norm)
        coefficients = critic.actor_targets(
            outs, chunks, samples[:n], ret_list, (ret_mean, ret_std)
        )
        if cfg.norm_adv and self.processes.sum([len(steps)])[0] > 1:  # over every process
            mean, std = self.processes.mean_std(adv.tolist(), ddof=1)
            adv = (adv - mean) / (std + 1e-8)
        batch = RolloutBatch(
            samples=samples,
            advantages=adv,
            old_logprobs=old_logp,
            old_token_logprobs=None if answers or cfg.policy.mode == "score" else old_tokens,
            values=(old_values - ret_mean) / ret_std,
            returns=(returns - ret_mean) / ret_std,
            ref_logprobs=learner.reference_logprobs(samples) if cfg.kl_coef > 0 else None,
            action_coefficients=coefficients,
        )

        # 3. The actor's loss (the clipped surrogate), the value loss, the entropy bonus and
        # the KL penalty.
        def loss_fn(idx: list[int]) -> tuple[Any, dict[str, float]]:
            mb = batch.select(idx)
            out = learner.evaluate_samples(mb.samples)
            logratio = out.logprob.float() - mb.old_logprobs
            ratio = logratio.exp()
            pg_loss = critic.policy_loss(out, mb, logratio).mean()
            v = critic.value_prediction(out, mb)
            v_loss = (v - mb.returns) ** 2
            if cfg.clip_vloss:
                v_clip = mb.values + (v - mb.values).clamp(-cfg.clip_coef, cfg.clip_coef)
                v_loss = torch.max(v_loss, (v_clip - mb.returns) ** 2)
            v_loss = 0.5 * v_loss.mean()
            entropy = out.entropy.float().mean()
            loss = pg_loss - learner.ent_coef * entropy + cfg.vf_coef * v_loss
            stats = {}
            if mb.ref_logprobs is not None:
                kl = k3_kl(mb.ref_logprobs, out.logprob.float())
                loss = loss + cfg.kl_coef * kl
                stats["losses/kl"] = kl.item()
            with torch.no_grad():
                approx_kl = ((ratio - 1) - logratio).mean()
                clipfrac = ((ratio - 1).abs() > cfg.clip_coef).float().mean()
            return loss, stats | {
                "losses/policy": pg_loss.item(),
                "losses/value": v_loss.item(),
                "charts/entropy": entropy.item(),
                "losses/approx_kl": approx_kl.item(),
                "losses/clipfrac": clipfrac.item(),
                "losses/total": loss.item(),
            }

        # 4. Epochs of minibatch steps, stopped early once the policy moved past target_kl.
        def past_target(stats: dict[str, float]) -> bool:
            return cfg.target_kl is not None and stats["losses/approx_kl"] > cfg.target_kl

        metrics = learner.run_epochs(len(batch), loss_fn, cfg.update_epochs, stop=past_target)
        self._refuse_overflow(metrics, ret_list)
        with torch.no_grad():  # over the acted samples
            explained = explained_variance(returns[:n], old_values[:n])
        return metrics | {
            "losses/explained_variance": explained,
            "charts/value_mean": float(old_values[:n].mean()),
        }


__all__ = ["PPO", "PPOConfig", "ReturnScale", "ValueCritic", "state_size"]
