"""The Q-critic actor-critic (``--algo qac``): PPO's loop with a critic of every valid action
and the actor fitted to the critic's improved policy, in one file.

How it departs from PPO (``ppo.py``, whose loop, GAE and value normalization it keeps):

- the critic scores every valid action of a visited state, ``Q(s, a)``, bilinear in whitened
  hidden states and the actions' embeddings (``llmgym.rl.qcritic``), trained on the returns of
  the actions taken: by gradient steps at ``value_lr``, or (``q_window`` N > 0) fitted before
  each update by ridge least squares to the last N updates' samples;
- V(s), for GAE and the bootstrap, is the policy's expectation of the Q-values;
- the clipped surrogate is replaced by a cross-entropy to the critic's improved policy in
  each visited state, ``softmax(log pi_old + q_step * c)`` (``q_target="mirror"``) or
  ``softmax(q_step * c)`` (``"softmax"``), ``c`` the centred Q-values scaled over the batch:
  the tabular natural policy gradient's step (Kakade 2001; MPO and MDPO take it), which moves
  an unlikely action as much as a likely one. On Blackjack with the language model alone, even
  the exact policy gradient drove every state to "stick" (docs/results/research-notes.md);
- in generate mode (envs with discrete valid actions) the policy acts in free text and each
  turn is scored again as the action the env took; the actor is fitted through each action's
  canonical answer ``{"action": "NAME"}``, the log-likelihoods themselves (not normalized over
  the actions), so the fit also teaches the model to answer with a valid action.

Runs made before this was its own algorithm (``--algo ppo --set q_critic=true``) restore and
resume as ``qac`` (:func:`llmgym.rl.algorithms.legacy_algo`).

Run it (the recipe where the language model itself learns Blackjack)::

    llmgym train Text-Blackjack-v1 --recipe blackjack-lm-ppo-ema
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Any, ClassVar

import torch

from llmgym.config import rule
from llmgym.errors import ConfigError
from llmgym.rl.algorithms.ppo import PPO, PPOConfig, ReturnScale, state_size
from llmgym.rl.batch import RolloutBatch
from llmgym.rl.qcritic import QCritic, actor_targets, centred_squares, fit_least_squares


@dataclass
class QACConfig(PPOConfig):
    """The Q-critic actor-critic's fields (plus PPO's, whose defaults it keeps)."""

    scores_turns: ClassVar[bool] = True  # generate mode: each turn is scored again

    algo: str = "qac"
    """Algorithm name (fixed)."""
    q_step: float = field(default=1.0, metadata=rule(above=0))
    """The actor is fitted in each state to ``softmax(log pi_old + q_step * c)``, ``c`` the
    centred Q-values scaled to unit root mean square over the batch (``q_target`` ``mirror``),
    or to ``softmax(q_step * c)`` (``softmax``)."""
    q_target: str = field(default="mirror", metadata=rule(choices=("mirror", "softmax")))
    """``mirror`` steps from the rollout policy, so every update pushes a state further toward
    its better action, however far it has gone; ``softmax`` fits the critic's own Boltzmann
    policy ``softmax(q_step * c)`` (soft policy iteration's target, as SAC's actor), which a
    state reaches and then stays at."""
    q_window: int = field(default=0, metadata=rule(min=0))
    """0 trains the critic by gradient steps at ``value_lr``; N > 0 fits it instead, before
    each update, by ridge least squares to the returns of the last N updates' samples (kept in
    checkpoints; use ``gae_lambda=1`` so the returns do not lean on the critic). On Blackjack
    the gradient-trained critic explained less than none of the returns' variance."""
    q_ridge: float = field(default=1.0, metadata=rule(min=0))
    """``q_window``: the ridge penalty of the least-squares fit (its features are whitened, so
    each sample adds about 1 per direction: a penalty near the memory's size shrinks hard);
    0 chooses it at each fit by generalized cross-validation (``qcritic.ridge_fit``)."""

    def _check_own_fields(self) -> None:
        super()._check_own_fields()
        if self.policy.mode == "generate" and self.policy.normalization != "sum":
            raise ConfigError(
                "--algo qac in generate mode needs normalization=sum (the actor is fitted "
                "to each answer's log-likelihood)."
            )


def make_qac(config: QACConfig, learner: Any, collector: Any, state: Any) -> PPO:
    """The Q-critic actor-critic: PPO's loop with :class:`QCriticActor` as its critic."""
    return PPO(config, learner, collector, state, critic=QCriticActor)


class QCriticActor:
    """The critic of every valid action and the actor's cross-entropy to its improved policy,
    in the place of PPO's :class:`~llmgym.rl.algorithms.ppo.ValueCritic`; see the module
    docstring."""

    def __init__(self, config: QACConfig, learner: Any, returns: ReturnScale) -> None:
        self.config, self.policy, self.returns = config, learner.policy, returns
        self.processes = learner.processes
        head = self.policy.head
        features = head.feature_size if head is not None else state_size(learner)
        embed = learner.model.get_input_embeddings().weight.shape[1]
        self.q_head = QCritic(features, embed, config.policy.head_whiten_eps)
        self.q_head.weight.requires_grad_(config.q_window == 0)  # else fitted in closed form
        self.q_memory: deque = deque(maxlen=max(1, config.q_window))
        self.q_head = self.q_head.to(learner.device)
        learner.add_module("value_head", self.q_head, config.value_lr)

    # ---- the critic ------------------------------------------------------------------------

    def whitener(self) -> Any:
        return self.q_head.whitener

    def q_values(self, hidden: Any, samples: list[Any]) -> list[Any]:
        """[K_i] the (normalized) Q-value of each sample's valid actions."""
        features = self.policy.features(hidden).detach()
        return [
            self.q_head(f[None], self.policy.action_embeddings(s.valid_actions)[None])[0]
            for f, s in zip(features, samples)
        ]

    def state_values(self, out: Any, samples: list[Any]) -> Any:
        """V(s) in return units: the policy's expectation of the Q-values."""
        mean, std = self.returns.scale()
        q = self.q_values(out.hidden, samples)
        v = [(lp.float().exp() * qi).sum() for lp, qi in zip(out.candidate_logprobs, q)]
        return torch.stack(v) * std + mean

    def value_prediction(self, out: Any, mb: RolloutBatch) -> Any:
        """The Q-value of the action taken."""
        q = self.q_values(out.hidden, mb.samples)
        return torch.stack([qi[s.action_index] for qi, s in zip(q, mb.samples)])

    def _fit_q(self, outs: list[Any], samples: list[Any], returns: list[float], scale) -> None:
        """``q_window``: add the acted samples (features, action, return) to the memory, the
        same in every process, and refit the critic to it by least squares."""
        hidden = torch.cat([o.hidden for o in outs])[: len(samples)]
        features = self.policy.features(hidden).detach().cpu()
        actions = [s.valid_actions[s.action_index] for s in samples]
        features, actions, returns = (
            self.processes.gather(list(x)) for x in (features, actions, returns)
        )
        self.q_memory.append((torch.stack(features), actions, returns))
        kept = [a for _, acts, _ in self.q_memory for a in acts]
        embeddings = {a: self.policy.action_embeddings([a])[0] for a in set(kept)}
        mean, std = scale
        targets = (torch.tensor([r for _, _, rs in self.q_memory for r in rs]) - mean) / std
        features = torch.cat([f for f, _, _ in self.q_memory])
        fit_least_squares(self.q_head, features, kept, targets, embeddings, self.config.q_ridge)

    # ---- the actor -------------------------------------------------------------------------

    def actor_targets(
        self,
        outs: list[Any],
        chunks: list[Any],
        acted: list[Any],
        returns: list[float],
        scale: tuple[float, float],
    ) -> Any:
        """Each sample's target over its valid actions, from the Q-values before the update
        (the critic refitted first with ``q_window``)."""
        cfg = self.config
        if cfg.q_window:
            self._fit_q(outs, acted, returns, scale)
        with torch.no_grad():
            q = [qi for o, c in zip(outs, chunks) for qi in self.q_values(o.hidden, c)]
        old_all = [lp.detach() for o in outs for lp in o.candidate_logprobs]
        rms = None  # one process: the batch's own (the committed runs' arithmetic)
        if self.processes.num > 1:  # several: the root mean square of the whole batch
            count, squares = self.processes.sum(centred_squares(q))
            rms = (squares / count) ** 0.5 if count else 0.0
        return actor_targets(q, old_all, cfg.q_step, cfg.q_target, rms)

    def policy_loss(self, out: Any, mb: RolloutBatch, logratio: Any) -> Any:
        """Cross-entropy to the targets: over the actions' log-probabilities in score mode,
        their canonical answers' log-likelihoods in generate mode."""
        fitted = out.candidate_scores if self.scores_answers else out.candidate_logprobs
        pairs = zip(mb.action_coefficients, fitted)
        return -torch.stack([target @ lp.float() for target, lp in pairs])

    # ---- generate mode: each turn scored again as the action the env took -----------------

    @property
    def scores_answers(self) -> bool:
        """Whether each free-text turn is scored again as the action the env took."""
        return self.config.policy.mode == "generate"

    def update_samples(self, steps: list[Any], acted: Any) -> tuple[list[Any], Any]:
        """The samples an update trains on (in generate mode each turn scored again), and
        the acting outputs that cover them (None: computed again)."""
        if not self.scores_answers:
            return [s.sample for s in steps], acted
        return [self.scored(s.sample, s.action) for s in steps], None

    def critic_samples(self, samples: list[Any]) -> list[Any]:
        """The samples the critic values (in generate mode as score-mode samples)."""
        if not self.scores_answers:
            return samples
        return [self.scored(s, (s.valid_actions or [""])[0]) for s in samples]

    def scored(self, sample: Any, action: str) -> Any:
        """The turn answered by ``sample`` as the score-mode sample of ``action`` (the one the
        env took), so the critic and the actor's fit see every valid action's canonical
        answer."""
        if action not in sample.valid_actions:
            raise ConfigError(
                "--algo qac in generate mode needs an env with discrete valid actions "
                f"(the env took {action!r}, not one of {sample.valid_actions})."
            )
        actions = sample.valid_actions
        return self.policy.score_sample(sample.messages, actions, actions.index(action))

    # ---- checkpoints: q_window's samples ---------------------------------------------------

    def extra_state(self) -> dict[str, Any]:
        memory = [{"actions": a, "returns": r} for _, a, r in self.q_memory]
        return {"q_memory": memory}  # features: extra_tensors

    def extra_tensors(self) -> dict[str, Any]:
        return {f"q_memory.{i}": features for i, (features, _, _) in enumerate(self.q_memory)}

    def load_extra_state(self, state: dict[str, Any], tensors: dict[str, Any]) -> None:
        memory = state.get("q_memory", [])  # absent: a checkpoint written before it was kept
        self.q_memory.clear()
        self.q_memory.extend(
            (tensors[f"q_memory.{i}"], m["actions"], m["returns"]) for i, m in enumerate(memory)
        )


__all__ = ["QACConfig", "QCriticActor", "make_qac"]
