"""The learner: the trainable weights, their optimizer and the update's tools. An algorithm
hands it a :class:`~llmgym.rl.batch.RolloutBatch` and a loss; :meth:`Learner.run_epochs`
(the epoch x minibatch loop every algorithm shares) returns the update's metrics.

It owns the model being trained (``learner.model``; a reference refresh or a resumed merge
replaces it, and the policy follows), the modules trained beside it (the action head, a
critic: :meth:`Learner.add_module`), the optimizer and the weights' running average. It
re-scores samples (with gradients, or without for the old and the reference log-probs),
keeps the entropy bonus in force, and takes one optimizer step over micro-batches with its
non-finite guard.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import torch

from llmgym.rl.averaging import WeightAverage
from llmgym.rl.likelihood import evaluate_cached
from llmgym.rl.metrics import logprob_gap, mean_stats
from llmgym.rl.optim import make_optimizer
from llmgym.rl.state import RunState
from llmgym.rollout import Episode

LossFn = Callable[[list[int]], tuple[Any, dict[str, float]]]
"""``loss_fn(indices)``: the mean loss over a micro-batch of the batch, and scalar stats."""


class Learner:
    """Trains ``model`` (behind ``policy``) with the settings of ``config``; see the module
    docstring. Call :meth:`start` once every module is added, before the first update."""

    def __init__(
        self,
        config: Any,
        model: Any,
        policy: Any,
        weights: Any,
        processes: Any,
        state: RunState,
        warn: Callable[..., None],
        vllm: Any = None,
    ) -> None:
        self.config = config
        self.model = model
        self.policy = policy
        self.weights = weights  # what trains and the reference (llmgym.rl.weights)
        self.processes = processes
        self.state = state
        self.warn = warn
        self.vllm = vllm  # the vLLM engine the policy acts through, else None
        self.device = next(model.parameters()).device
        on = config.optim.prefix_cache_generate  # auto: on a GPU only (it changes the gradient)
        #: Whether generate mode's update reuses the shared prompt's KV cache too.
        self.generate_prefix_cache = on == "on" or (on == "auto" and self.device.type == "cuda")
        self.extra_modules: dict[str, Any] = {}  # trained beside the model, saved by name
        self.module_lr: dict[str, float] = {}  # their learning rates (else the main one)
        self.optimizer: Any = None
        self.average: Any = None
        if policy.head is not None:
            self.add_module("action_head", policy.head, config.optim.head_rate())

    def add_module(self, name: str, module: Any, lr: float | None = None) -> None:
        """Train ``module`` beside the model (at ``lr``, else the main rate); checkpoints
        keep it as ``NAME.safetensors``."""
        self.extra_modules[name] = module
        if lr is not None:
            self.module_lr[name] = lr

    def start(self) -> None:
        """The optimizer and the weights' average, over every module added."""
        self.optimizer = self.make_optimizer()
        optim = self.config.optim
        self.average = WeightAverage(
            self.policy_parameters, optim.average_decay, self.sync_acting_weights
        )

    # ---- the weights ---------------------------------------------------------------------

    def set_model(self, model: Any) -> None:
        """Train ``model`` from now on (a merged adapter's new model); the policy acts with
        it."""
        if model is not self.model:
            self.model = self.policy.model = model
            self.policy.clear_cache()

    def trainable_parameters(self) -> list[Any]:
        params = [p for p in self.model.parameters() if p.requires_grad]
        for module in self.extra_modules.values():
            params += [p for p in module.parameters() if p.requires_grad]
        return params

    def policy_parameters(self) -> dict[str, Any]:
        """The acting policy's trained weights by name: the model's and the action head's."""
        named = {k: p for k, p in self.model.named_parameters() if p.requires_grad}
        head = self.extra_modules.get("action_head")
        if head is not None:
            named |= {f"action_head.{k}": p for k, p in head.named_parameters() if p.requires_grad}
        return named

    def make_optimizer(self, lr: float | None = None) -> Any:
        optim = self.config.optim
        return make_optimizer(
            self.model, self.extra_modules, self.module_lr, optim, lr or optim.learning_rate
        )

    def module_rates(self) -> dict[str, float]:
        """``train/lr_<module>``: the current rate of each extra module (action head, critic)."""
        rates = {}
        for name, module in self.extra_modules.items():
            first = next(module.parameters(), None)
            for group in self.optimizer.param_groups:
                if any(p is first for p in group["params"]):
                    rates[f"train/lr_{name}"] = group["lr"]
        return rates

    def anneal(self, fraction: float) -> None:
        """``anneal_lr``: every group's rate at ``fraction`` of its initial one."""
        for group in self.optimizer.param_groups:
            group["lr"] = group["initial_lr"] * fraction

    def refresh_reference(self) -> None:
        """Make the current policy the new reference (merging a LoRA adapter) and restart the
        optimizer on the fresh adapter."""
        model = self.weights.refresh(self.model, self.policy)
        if model is not self.model:
            self.set_model(model)
            self.optimizer = self.make_optimizer()
            self.average.reset()  # it averaged the adapter now merged

    def sync_acting_weights(self) -> None:
        """When acting goes through a vLLM server: hot-load the current weights there;
        otherwise nothing (the policy acts with the model)."""
        if self.vllm is not None:
            self.vllm.sync_weights()

    # ---- the policy as the update sees it --------------------------------------------------

    def evaluate_samples(self, samples: Sequence[Any]) -> Any:
        """``policy.forward_samples`` (differentiable log-probs, entropy, hidden state),
        through the shared-prefix KV cache when ``prefix_cache_grad`` is on (in generate mode
        as ``prefix_cache_generate`` says; see :func:`evaluate_cached`)."""
        if self.config.optim.prefix_cache_grad:
            return evaluate_cached(self.policy, list(samples), self.generate_prefix_cache)
        return self.policy.forward_samples(list(samples))

    def recompute(self, samples: Sequence[Any]) -> list[Any]:
        """``evaluate_samples`` without autograd, ``micro_batch_size`` samples at a time: the
        log-probs and hidden states of rollouts under the current weights, one output per chunk."""
        outs = []
        for chunk in chunks(list(samples), self.config.optim.micro_batch_size):
            with torch.no_grad():
                outs.append(self.evaluate_samples(chunk))
        return outs

    def old_logprobs(
        self, samples: Sequence[Any], acted: list[Any] | None = None
    ) -> tuple[Any, list[Any] | None, list[Any]]:
        """Under the weights that acted (before any step of this update): each sample's
        log-prob [N], each completion's token log-probs (generate mode, else None) and the
        raw outputs (one per chunk, for a critic). ``acted``: those outputs when already
        computed (acting through vLLM computes them for ``perf/vllm_logprob_gap``)."""
        outs = acted if acted is not None else self.recompute(samples)
        logps = torch.cat([out.logprob.float() for out in outs])
        tokens = [t.float() for out in outs for t in getattr(out, "token_logprobs", None) or []]
        return logps, (tokens or None), outs

    def reference_logprobs(self, samples: Sequence[Any]) -> Any:
        """log pi_ref(taken | prompt) per sample [N] (see :class:`~llmgym.rl.weights.Weights`)."""
        values = self.weights.reference_logprobs(self.policy, samples, self.recompute)
        return values.to(self.device)

    @property
    def ent_coef(self) -> float:
        """The entropy bonus in force: the configured one plus the low-entropy boost."""
        return float(getattr(self.config, "ent_coef", 0.0)) + self.state.ent_boost

    def adapt_entropy(self, entropy: float | None) -> None:
        """Double the boost while the policy's entropy is below ``min_entropy`` (starting at
        0.01, capped at 1); halve it away once the entropy has recovered."""
        floor, state = self.config.min_entropy, self.state
        if not floor or entropy is None or not math.isfinite(entropy):
            return
        if entropy < floor:
            state.ent_boost = min(1.0, max(0.01, 2 * state.ent_boost))
        else:
            state.ent_boost = state.ent_boost / 2 if state.ent_boost > 1e-3 else 0.0

    # ---- before an update ------------------------------------------------------------------

    def prepare(self, episodes: list[Episode]) -> tuple[list[Any] | None, dict[str, float]]:
        """Before an update on ``episodes``: ``lora.init=states`` on the first, the action
        head's feature statistics; returns the acting outputs when acting went through vLLM
        (the update's old log-probs) and their gap to the server's."""
        self._init_lora(episodes)
        self._refresh_head_features(episodes)
        return self._vllm_gap(episodes)

    def _vllm_gap(self, episodes: list[Episode]) -> tuple[list[Any] | None, dict[str, float]]:
        """Acting through vLLM: the batch's outputs recomputed here (no gradient, the weights
        that acted; the update's old log-probs) and their gap to the server's log-probs."""
        samples = [s.sample for e in episodes for s in e.steps]
        if self.vllm is None or not samples:
            return None, {}
        outs = self.recompute(samples)
        mean, largest = logprob_gap(samples, outs)
        return outs, {"perf/vllm_logprob_gap": mean, "perf/vllm_logprob_gap_max": largest}

    def _init_lora(self, episodes: list[Episode]) -> None:
        """``lora.init=states``: before the first update, point the LoRA A matrices at the
        directions the batch's states differ in (:func:`init_lora_from_states`)."""
        lora = self.config.lora
        if lora.init != "states" or not lora.enabled or not self.config.optim.train_backbone:
            return
        if self.state.iteration > 0:  # set once, before the first update (a resume keeps its own)
            return
        from llmgym.rl.weights import init_lora_from_states

        prompts = self.processes.gather(
            [tuple(s.sample.prompt_ids) for e in episodes for s in e.steps]
        )
        # every process the same prompts in the same order, so the replicas stay equal
        pad = self.policy.tokenizer.pad_token_id
        init_lora_from_states(self.model, list(dict.fromkeys(prompts)), pad)

    def _refresh_head_features(self, episodes: list[Episode]) -> None:
        """Add the batch's hidden states to the head's whitening statistics and refresh the map
        (before the update, so its old and new log-probs share one feature map)."""
        head = self.policy.head
        if head is None or self.state.features_frozen:
            return
        hidden = [s.sample.hidden for e in episodes for s in e.steps]
        hidden = self.processes.gather([h.cpu() for h in hidden if h is not None])
        if not hidden:
            return
        head.whitener.update(torch.stack(hidden).to(self.device))
        head.whitener.refresh()

    # ---- the optimisation step and the epoch loop ------------------------------------------

    def optimize(self, indices: Sequence[int], loss_fn: LossFn) -> dict[str, float] | None:
        """One optimizer step over ``indices``, accumulated over micro-batches.

        ``loss_fn(micro)`` returns the *mean* loss over the micro-batch and scalar stats. A
        non-finite loss or gradient skips the step (counted in ``train/skipped_updates``).
        Returns the averaged stats, or None when the step was skipped.
        """
        self.optimizer.zero_grad(set_to_none=True)
        n = self.processes.sum([len(indices)])[0]  # the minibatch over all processes
        totals: dict[str, float] = {}
        finite = True
        for micro in chunks(list(indices), self.config.optim.micro_batch_size):
            loss, stats = loss_fn(micro)
            finite = bool(torch.isfinite(loss))
            if not finite:
                break
            (loss * (len(micro) / n)).backward()
            for k, v in stats.items():
                totals[k] = totals.get(k, 0.0) + float(v) * len(micro) / n
        if self.processes.sum([not finite])[0]:
            return self._skip("non-finite loss")
        if self.processes.num > 1:
            names = sorted(set().union(*self.processes.gather([sorted(totals)])))
            totals = dict(zip(names, self.processes.sum([totals.get(k, 0.0) for k in names])))
        params = self.trainable_parameters()
        self.processes.sum_gradients(params)
        norm = torch.nn.utils.clip_grad_norm_(params, self.config.optim.max_grad_norm)
        if not torch.isfinite(norm):
            return self._skip("non-finite gradient")
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        totals["losses/grad_norm"] = float(norm)
        return totals

    def _skip(self, why: str) -> None:
        self.optimizer.zero_grad(set_to_none=True)
        self.state.skipped_updates += 1
        self.warn(f"skipped an update: {why}", key="skip")
        return None

    def run_epochs(
        self,
        size: int,
        loss_fn: LossFn,
        epochs: int,
        stop: Callable[[dict[str, float]], bool] | None = None,
    ) -> dict[str, float]:
        """``epochs`` passes over a batch of ``size`` samples in shuffled minibatches of
        ``optim.minibatch_size``, one :meth:`optimize` step each; ``stop(stats)`` ends the
        loop early (PPO's ``target_kl``). Returns the steps' mean stats plus
        ``losses/epochs`` and ``losses/early_stop``."""
        history: list[dict[str, float]] = []
        epochs_run, stopped = 0, False
        while epochs_run < epochs and not stopped:
            epochs_run += 1
            for mb in self.processes.minibatches(
                size, self.config.optim.minibatch_size, self.state.np_rng
            ):
                stats = self.optimize(mb, loss_fn)
                if stats is None:
                    continue
                history.append(stats)
                if stop is not None and stop(stats):
                    stopped = True
                    break
        return mean_stats(history) | {
            "losses/epochs": float(epochs_run),
            "losses/early_stop": float(stopped),
        }


def chunks(items: list, size: int) -> Iterator[list]:
    """``items`` in consecutive pieces of ``size`` (at least 1).

    Example:
        >>> list(chunks([1, 2, 3], 2))
        [[1, 2], [3]]
    """
    size = max(1, size)
    for i in range(0, len(items), size):
        yield items[i : i + size]


__all__ = ["Learner", "LossFn", "chunks"]
