"""Shared pieces of the online RL trainers: config fields common to every algorithm, rollout
collection over K text envs, LoRA setup (reference = the same model with the adapter
disabled), the optimisation step (gradient accumulation, non-finite guard, clipping), periodic
evaluation on fixed seeds, logging (CSV + TensorBoard, W&B when ``WANDB_PROJECT`` is set),
checkpoints that resume exactly, and collapse diagnostics.

Each algorithm (``ppo.py``, ``grpo.py``, ``reinforce.py``) subclasses :class:`Trainer` and
implements :meth:`Trainer.update` (advantages + loss) and, where it needs grouped rollouts,
:meth:`Trainer.collect`. Nothing here imports torch at module import time beyond what the
trainer needs when it is constructed.
"""

from __future__ import annotations

import dataclasses
import json
import math
import random
import time
import warnings
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np

import llmgym  # noqa: F401  (registers the Text-* ids)
from llmgym.errors import ConfigError, TrainingError
from llmgym.evaluation.stats import finite_returns, mean_ci95
from llmgym.rl import checkpoints
from llmgym.rl.checkpointing import Checkpointing
from llmgym.rl.config import EVAL_METHODS, TrainConfig
from llmgym.rl.distributed import Processes
from llmgym.rl.likelihood import evaluate_cached, sequence_mean_logprob
from llmgym.rl.logger import MetricsLogger, library_versions
from llmgym.rl.optim import Optimizers
from llmgym.rl.weights import LoraAndReference, as_list
from llmgym.rollout import Episode, Step, cached, play

EVAL_SEED_BASE = 1_000_000
"""Evaluation episodes use seeds ``EVAL_SEED_BASE + i``: disjoint from training seeds."""


# --------------------------------------------------------------------------------------------
# Rollouts


def make_envs(env_id: str, n: int, env_kwargs: dict[str, Any] | None = None) -> list[gym.Env]:
    """``n`` independent copies of a text env (reset each with an explicit seed)."""
    if env_id not in gym.registry:
        raise TrainingError(f"Unknown environment {env_id!r}; run `llmgym envs` to list them.")
    return [gym.make(env_id, **(env_kwargs or {})) for _ in range(n)]


# --------------------------------------------------------------------------------------------
# The trainer


class Trainer(LoraAndReference, Checkpointing):
    """Online RL over text envs. Subclasses implement :meth:`update`.

    Loop: ``collect()`` complete episodes with the current policy -> ``update(episodes)`` ->
    log -> (periodic) evaluate -> (periodic) checkpoint. ``train()`` runs it until the env-step
    or episode budget is spent; ``train(resume=True)`` continues from the newest checkpoint.
    The other rooms: LoRA and the reference policy (``reference.py``), saving and restoring
    (``checkpointing.py``, ``checkpoints.py``), several processes (``distributed.py``), the
    losses (``losses.py``), the metrics log (``logger.py``), the episode loop (``llmgym.rollout``).
    """

    algo = "base"

    def __init__(
        self,
        config: TrainConfig,
        model: Any = None,
        tokenizer: Any = None,
        policy_config: Any = None,
    ):
        import torch

        self.torch = torch
        self.config = config
        config.optim.head_rate()  # a bad head_optimizer fails before the model loads
        check_vllm_training(config)  # before the model loads
        check_head_options(config)
        #: The vLLM server the policy acts through (``policy.backend == "vllm"``), else None.
        self.vllm: Any = None
        if config.policy.backend == "vllm":
            from llmgym.policy.backends import make_vllm_backend

            policy = config.policy
            self.vllm = make_vllm_backend(policy.vllm_url, policy.vllm_model, policy.model)
        if config.run.num_threads > 0:
            torch.set_num_threads(config.run.num_threads)
        self.run_dir = Path(config.run.output_dir)
        self._seed_everything(
            config.run.seed
        )  # the same in every process: the same initial weights
        no_gpu = config.run.device == "auto" and not torch.cuda.is_available()
        self.processes = Processes.from_environment(cpu=config.run.device == "cpu" or no_gpu)
        if model is None:
            model, tokenizer = load_model_for(
                config.policy.model, self._device_name(), config.policy.dtype
            )
        self.tokenizer = tokenizer
        self.device = next(model.parameters()).device
        self.model = self._prepare_model(model)
        self.policy = self._make_policy(policy_config)
        # No env_id: the trainer only updates on episodes handed to it (llmgym.Agent).
        self.envs = (
            make_envs(config.run.env_id, config.run.num_envs, config.run.env_kwargs)
            if config.run.env_id
            else []
        )
        # Evaluation runs under the registered step limit, on held-out problems where split.
        self.eval_kwargs = evaluation_kwargs(config.run.env_kwargs)
        self.eval_envs = self.envs
        if config.run.env_id and self.eval_kwargs != config.run.env_kwargs:
            self.eval_envs = make_envs(config.run.env_id, config.run.num_envs, self.eval_kwargs)
        if self.vllm is not None and self.processes.num > 1:
            raise TrainingError(
                "Training through a vLLM server runs in one process; launch it without "
                "accelerate/torchrun (the server batches the acting)."
            )
        if self.processes.num > config.run.episodes_per_update:
            raise TrainingError(
                f"{self.processes.num} processes need at least as many episodes per update, "
                f"not {config.run.episodes_per_update}."
            )
        self.iteration = 0
        self.env_steps = 0
        self.episodes_done = 0
        self.seeds_used = 0
        self.skipped_updates = 0
        self.merged_adapters: list[dict[str, Any]] = []  # reference refreshes (REINFORCE)
        self._ref_cache: dict[tuple, float] = {}
        self._recent_successes: list[Step] = []
        self._warned: Counter[str] = Counter()
        self.extra_modules: dict[str, Any] = {}  # e.g. PPO's value head (saved, optimised)
        self.module_lr: dict[str, float] = {}  # learning rates of extra modules (else the main)
        self.ent_boost = 0.0  # added to the entropy bonus while entropy is below min_entropy
        self._ref_head: Any = None  # the action head frozen at the last reference refresh
        self.features_frozen = False  # after SFT the head keeps the demos' feature map
        self.first_eval: dict[str, Any] | None = None  # the iteration-0 evaluation of train()
        self._rollout_outs: tuple[list[int], list[Any]] | None = None  # see rollout_recompute
        if self.policy.head is not None:
            self.extra_modules["action_head"] = self.policy.head
            self.module_lr["action_head"] = config.optim.head_rate()
        self.setup()
        self.optimizer = self._make_optimizer()
        self.logger: MetricsLogger | None = None
        self._seed_sampling()

    def _device_name(self) -> str:
        """``config.run.device``; with several GPU processes, this process's own GPU."""
        accelerator = self.processes.accelerator
        if accelerator is not None and self.config.run.device == "auto":
            return str(accelerator.device)
        return self.config.run.device

    def _seed_sampling(self) -> None:
        """With several processes, a sampling stream of its own for each (from the seed, the
        iteration and the rank); one process keeps the stream its seed started."""
        if self.processes.num > 1:
            rank, iteration = self.processes.rank, self.iteration
            seed = self.config.run.seed * 1_000_003 + iteration * 1009 + rank + 1
            self._seed_everything(seed)
            generator = getattr(self.policy, "generator", None)
            if generator is not None:
                generator.manual_seed(seed)

    # ---- construction ----------------------------------------------------------------------

    def setup(self) -> None:
        """Hook for subclasses: build extra modules before the optimizer is created."""

    def _seed_everything(self, seed: int) -> None:
        random.seed(seed)
        np.random.seed(seed)
        self.torch.manual_seed(seed)

    def _make_policy(self, policy_config: Any = None) -> Any:
        from llmgym.policy import LLMPolicy

        head = self._make_head()
        memoize = not self.config.optim.train_backbone
        policy_config = policy_config or self.config.policy.acting()
        if self.vllm is not None:  # act through vLLM; updates recompute locally
            from llmgym.rl.adapters import write_adapter, write_weights

            prefix = f"llmgym-{self.run_dir.name or 'run'}"
            if self.config.lora.enabled:
                self.vllm.use_adapters(
                    lambda path: write_adapter(self, path), self.run_dir / "vllm_adapters", prefix
                )
            else:  # a full fine-tune: vLLM reloads the whole model after each update
                self.vllm.use_weights(
                    lambda path: write_weights(self, path), self.run_dir / "vllm_weights", prefix
                )
        return LLMPolicy(
            self.model,
            self.tokenizer,
            policy_config,
            head=head,
            memoize=memoize,
            backend=self.vllm,
        )

    def _make_head(self) -> Any:
        """The action head (score mode with ``action_head`` on), else None."""
        if not self.config.policy.action_head or self.config.policy.mode != "score":
            return None
        from llmgym.policy.action_head import ActionHead

        base = self.model.get_base_model() if hasattr(self.model, "get_base_model") else self.model
        hidden = base.config.hidden_size
        embed = base.get_input_embeddings().weight.shape[1]
        policy = self.config.policy
        layers = head_layers(policy.head_layers, base.config.num_hidden_layers)
        head = ActionHead(hidden, embed, policy.head_whiten_eps, policy.lm_prior, layers)
        return head.to(self.device)

    def trainable_parameters(self) -> list[Any]:
        params = [p for p in self.model.parameters() if p.requires_grad]
        for module in self.extra_modules.values():
            params += [p for p in module.parameters() if p.requires_grad]
        return params

    def _make_optimizer(self, lr: float | None = None) -> Any:
        """AdamW with the language model's trainable weights as group 0 (``lr``) and one
        group per extra module at its own rate (``module_lr``); the action head in its own
        SGD when ``head_optimizer`` is ``sgd``."""
        torch = self.torch
        lr = lr or self.config.optim.learning_rate
        groups = [{"params": [p for p in self.model.parameters() if p.requires_grad], "lr": lr}]
        sgd = []
        for name, module in self.extra_modules.items():
            params = [p for p in module.parameters() if p.requires_grad]
            group = {"params": params, "lr": self.module_lr.get(name, lr)}
            own = name == "action_head" and self.config.optim.head_optimizer == "sgd"
            (sgd if own else groups).append(group)
        for group in groups + sgd:
            group["initial_lr"] = group["lr"]
        optimizers = [torch.optim.AdamW(groups, weight_decay=self.config.optim.weight_decay)]
        if sgd:
            optimizers.append(torch.optim.SGD(sgd))
        return Optimizers(optimizers)

    def _anneal(self) -> None:
        """``anneal_lr``: every group's rate at ``(1 - spent / budget)`` of its initial one."""
        if not self.config.optim.anneal_lr or not self.envs:
            return
        frac = max(0.0, 1.0 - self._spent() / max(self._budget(), 1))
        for group in self.optimizer.param_groups:
            group["lr"] = group["initial_lr"] * frac

    @property
    def ent_coef(self) -> float:
        """The entropy bonus in force: the configured one plus the low-entropy boost."""
        return float(getattr(self.config, "ent_coef", 0.0)) + self.ent_boost

    def adapt_entropy(self, entropy: float | None) -> None:
        """Double the boost while the policy's entropy is below ``min_entropy`` (starting at
        0.01, capped at 1); halve it away once the entropy has recovered."""
        floor = self.config.min_entropy
        if not floor or entropy is None or not math.isfinite(entropy):
            return
        if entropy < floor:
            self.ent_boost = min(1.0, max(0.01, 2 * self.ent_boost))
        else:
            self.ent_boost = self.ent_boost / 2 if self.ent_boost > 1e-3 else 0.0

    # ---- policy helpers ----------------------------------------------------------------

    @contextmanager
    def greedy(self, on: bool = True) -> Iterator[None]:
        """Temporarily act greedily (evaluation)."""
        cfg = self.policy.config
        old = cfg.greedy
        cfg.greedy = on
        try:
            yield
        finally:
            cfg.greedy = old

    def evaluate_samples(self, samples: Sequence[Any]) -> Any:
        """``policy.evaluate`` (differentiable log-probs, entropy, hidden state), through the
        shared-prefix KV cache when ``prefix_cache_grad`` is on (see :func:`evaluate_cached`)."""
        if self.config.optim.prefix_cache_grad:
            return evaluate_cached(self.policy, list(samples))
        return self.policy.evaluate(list(samples))

    def rollout_recompute(self, samples: Sequence[Any]) -> list[Any]:
        """:meth:`recompute` of the batch being trained on, under the weights that acted (the
        update's old log-probs); when acting went through vLLM it was already computed for
        ``perf/vllm_logprob_gap`` before the update, and is reused."""
        if self._rollout_outs is not None and self._rollout_outs[0] == [id(s) for s in samples]:
            return self._rollout_outs[1]
        return self.recompute(samples)

    def sync_acting_weights(self) -> None:
        """When acting goes through a vLLM server: hot-load the current LoRA weights there
        (``VLLMServer.sync_weights``); otherwise nothing (the policy acts with the model)."""
        if self.vllm is not None:
            self.vllm.sync_weights()

    def recompute(self, samples: Sequence[Any]) -> list[Any]:
        """``evaluate_samples`` without autograd, ``micro_batch_size`` samples at a time: the
        log-probs and hidden states of rollouts under the current weights, one output per chunk."""
        outs = []
        for chunk in _chunks(list(samples), self.config.optim.micro_batch_size):
            with self.torch.no_grad():
                outs.append(self.evaluate_samples(chunk))
        return outs

    # ---- the optimisation step -----------------------------------------------------------

    def optimize(
        self,
        indices: Sequence[int],
        loss_fn: Callable[[list[int]], tuple[Any, dict[str, float]]],
    ) -> dict[str, float] | None:
        """One optimizer step over ``indices``, accumulated over micro-batches.

        ``loss_fn(micro)`` returns the *mean* loss over the micro-batch and scalar stats. A
        non-finite loss or gradient skips the step (counted in ``train/skipped_updates``).
        Returns the averaged stats, or None when the step was skipped.
        """
        torch = self.torch
        self.optimizer.zero_grad(set_to_none=True)
        n = self.processes.sum([len(indices)])[0]  # the minibatch over all processes
        totals: dict[str, float] = {}
        finite = True
        for micro in _chunks(list(indices), self.config.optim.micro_batch_size):
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
        self.skipped_updates += 1
        self._warn(f"skipped an update: {why}", key="skip")
        return None

    # ---- the loop -------------------------------------------------------------------------

    def next_seeds(self, n: int) -> list[int]:
        """Env seeds of the next ``n`` training episodes (deterministic in the episode index)."""
        base = self.config.run.seed * 100_003
        seeds = [base + self.seeds_used + i for i in range(n)]
        self.seeds_used += n
        return seeds

    def collect(self) -> list[Episode]:
        """Episodes for one iteration (GRPO overrides this to form groups). They are complete
        unless the env-step budget runs out: the last collection stops when it is spent and the
        episodes it cuts end truncated (PPO bootstraps them from its value head)."""
        n = self.config.run.episodes_per_update
        with self.greedy(False):
            seeds = self.processes.shard(self.next_seeds(n))
            return play(
                self.policy.act,
                self.envs,
                seeds,
                first_index=self.episodes_done,
                max_total_steps=self._steps_left_here(),
            )

    def _steps_left_here(self) -> int:
        """This process's share of the env steps left in the budget."""
        left = max(self.config.run.total_env_steps - self.env_steps, 0)
        num, rank = self.processes.num, self.processes.rank
        return left // num + (rank < left % num)

    def update(self, episodes: list[Episode]) -> dict[str, float]:
        """Compute advantages and take the optimizer steps; return metrics."""
        raise NotImplementedError

    def evaluate(self, episodes: int | None = None, seed_base: int = EVAL_SEED_BASE) -> dict:
        """Mean return, its 95 % CI, success rate and parse rate over fixed evaluation seeds;
        or the greedy policy's exact expected return (``eval_method``)."""
        if self.uses_exact_eval():
            return self.evaluate_exact()
        n = episodes or self.config.eval.episodes
        return evaluate_policy(
            self.policy,
            self.eval_envs,
            [seed_base + i for i in range(n)],
            greedy=self.config.eval.greedy,
            markov=self.config.policy.history == 0,
        )

    def uses_exact_eval(self) -> bool:
        """Whether :meth:`evaluate` computes the exact value (see ``eval_method``)."""
        cfg = self.config
        if cfg.eval.method not in EVAL_METHODS:
            raise TrainingError(
                f"eval_method must be one of {', '.join(EVAL_METHODS)}, not {cfg.eval.method!r}."
            )
        if cfg.eval.method == "sampled" or not cfg.run.env_id:
            return False
        from llmgym.evaluation.exact import supports_exact

        possible = supports_exact(cfg.run.env_id, self.eval_kwargs)
        possible = possible and cfg.eval.greedy and cfg.policy.history == 0
        if cfg.eval.method == "exact" and not possible:
            raise TrainingError(
                f"Exact evaluation needs a greedy Markov policy on an env with a known model "
                f"(Blackjack, FrozenLake, Taxi, CliffWalking), not {cfg.run.env_id}; use "
                "eval_method=sampled."
            )
        return possible

    def evaluate_exact(self) -> dict[str, Any]:
        """The greedy policy's exact expected return, in :meth:`evaluate`'s format."""
        from llmgym.evaluation.exact import exact_value

        def act(observations: list[str], infos: list[dict[str, Any]]) -> list[str]:
            return [s.text for s in self.policy.act(observations, infos)]

        with self.greedy(True), self.torch.no_grad():
            result = exact_value(self.config.run.env_id, act, self.eval_kwargs)
        return exact_metrics(result)

    def sft_warm_start(self) -> dict[str, float]:
        """Run the configured SFT warm start (``sft`` = auto | FILE)."""
        from llmgym.rl.sft import SFTConfig, build_demos, save_demos, sft_train

        demos = build_demos(
            self.config.sft.source,
            self.config.run.env_id,
            self.config.run.env_kwargs,
            episodes=self.config.sft.episodes,
            seed=self.config.run.seed,
        )
        self.run_dir.mkdir(parents=True, exist_ok=True)
        save_demos(self.run_dir / "sft_demos.jsonl", demos)
        cfg = SFTConfig(
            epochs=self.config.sft.epochs,
            learning_rate=self.config.sft.learning_rate,
            micro_batch_size=min(self.config.optim.micro_batch_size, self.config.sft.batch_size),
            batch_size=self.config.sft.batch_size,
            seed=self.config.run.seed,
        )
        start = time.perf_counter()
        if self.config.run.progress:
            print(f"SFT warm start on {len(demos)} demos, {cfg.epochs} epochs ...", flush=True)

        def on_epoch(epoch: int) -> None:
            if self.config.run.progress:
                elapsed = time.perf_counter() - start
                print(f"  SFT epoch {epoch + 1}/{cfg.epochs} done ({elapsed:.0f} s)", flush=True)

        stats = sft_train(
            self.policy, demos, cfg, params=self.trainable_parameters(), on_epoch=on_epoch
        )
        self._ref_cache.clear()
        # The head learned on the demos' feature map: re-whitening it under RL's states would
        # move the SFT policy without any update.
        self.features_frozen = True
        if self.config.sft.as_reference:
            self.refresh_reference()
        return stats

    def train(self, resume: bool = False, final_episodes: int | None = None) -> dict[str, Any]:
        """Run until the budget is spent; returns the final evaluation (over ``final_episodes``
        episodes, default ``eval_episodes``; the exact value needs none), made after the last
        checkpoint so that an interrupted final evaluation resumes without repeating an update."""
        cfg = self.config
        main = self.processes.is_main
        if resume:
            self.load_checkpoint()
            self.sync_acting_weights()  # the server acts with the checkpoint's adapter
        elif main:
            self.run_dir.mkdir(parents=True, exist_ok=True)
            checkpoints.start_fresh(self.run_dir)
            self._save_run_info()
        self.processes.wait()
        self.logger = MetricsLogger(self.run_dir, cfg.to_dict()) if main else None
        if resume and self.logger is not None:
            self.logger.truncate(self.env_steps)
        pbar = _progress(cfg.run.progress and main, total=self._budget(), initial=self._spent())
        try:
            if self.iteration == 0 and not resume:
                start = time.perf_counter()
                metrics: dict[str, Any] = {}
                if cfg.sft.source != "none":
                    metrics |= self.sft_warm_start()
                    self.sync_acting_weights()
                ev = self.evaluate()
                self.first_eval = ev  # after the SFT warm start, when there is one
                metrics |= _eval_metrics(ev) | {"perf/eval_s": time.perf_counter() - start}
                if self.logger is not None:
                    self.logger.log(metrics, self.env_steps)
                _write(pbar, f"iter 0: eval return {ev['mean_return']:.3f}")
                if cfg.sft.source != "none":
                    self.save_checkpoint()  # iter_000000 = the SFT warm start (RL can restart here)
            while not self._done():
                self.run_iteration(pbar)
            self.save_checkpoint()
            final = self.evaluate(final_episodes)
            final_row = _eval_metrics(final) | {"iteration": self.iteration}
            if self.logger is not None:
                checkpoints.log_once(self.logger, final_row, self.env_steps)
            return final
        finally:
            if pbar is not None:
                pbar.close()
            if self.logger is not None:
                self.logger.close()

    def run_iteration(self, pbar: Any = None) -> dict[str, Any]:
        """Collect, update, log, maybe evaluate and checkpoint. Returns the logged metrics."""
        cfg = self.config
        t0 = time.perf_counter()
        episodes = self.collect()
        t1 = time.perf_counter()
        steps = sum(e.length for e in episodes)
        metrics = self.train_on_episodes(episodes)
        t2 = time.perf_counter()
        metrics |= {
            "perf/env_steps_per_s": steps / max(t1 - t0, 1e-9),
            "perf/rollout_s": t1 - t0,
            "perf/update_s": t2 - t1,
            "perf/iteration_s": t2 - t0,
        }
        if cfg.eval.every and self.iteration % cfg.eval.every == 0 and not self._done():
            metrics |= _eval_metrics(self.evaluate())
        self.diagnose(metrics, episodes)
        if self.logger is not None and self.iteration % cfg.run.log_every == 0:
            self.logger.log(metrics, self.env_steps)
        if cfg.run.checkpoint_every and self.iteration % cfg.run.checkpoint_every == 0:
            self.save_checkpoint()
        if pbar is not None:
            pbar.n = min(self._spent(), pbar.total)
            pbar.set_postfix(
                ret=f"{metrics['charts/episodic_return']:.2f}",
                kl=f"{metrics.get('losses/kl', 0.0):.3f}",
                ent=f"{metrics.get('charts/entropy', float('nan')):.2f}",
                refresh=False,
            )
            pbar.refresh()
        return metrics

    def train_on_episodes(self, episodes: list[Episode]) -> dict[str, Any]:
        """One update on finished episodes (collected by :meth:`collect` or handed in by
        ``llmgym.Agent``); advances the counters and returns the metrics."""
        self._anneal()
        steps, count = self.processes.sum([sum(e.length for e in episodes), len(episodes)])
        self.env_steps += int(steps)
        self.episodes_done += int(count)
        if self.config.optim.train_backbone:
            self.model.train()
        clean = [e for e in episodes if math.isfinite(e.ret)]
        nonfinite = sum(not math.isfinite(s.reward) for e in episodes for s in e.steps)
        if nonfinite:
            self._warn(
                f"{nonfinite} non-finite reward(s) in this batch: their "
                f"{len(episodes) - len(clean)} episode(s) are left out of the update",
                key="nonfinite",
            )
        metrics: dict[str, Any] = {}
        if clean:
            self._refresh_head_features(clean)
            gap = self._vllm_gap(clean)
            try:
                metrics = self.update(clean)
            finally:
                self._rollout_outs = None
            metrics |= gap
            self.adapt_entropy(metrics.get("charts/entropy"))
            if self.config.sft.during_rl > 0:
                metrics |= self._continued_sft(clean)
            self.sync_acting_weights()
        self.iteration += 1
        return (
            metrics
            | rollout_metrics(self.all_episodes(episodes))
            | {
                "llmgym/nonfinite_rewards": nonfinite,
                "iteration": self.iteration,
                "episodes": self.episodes_done,
                "train/skipped_updates": self.skipped_updates,
                "train/ent_coef": self.ent_coef,
                "train/lr": self.optimizer.param_groups[0]["lr"],
                **self._module_rates(),
            }
        )

    def _vllm_gap(self, episodes: list[Episode]) -> dict[str, float]:
        """Acting through vLLM: recompute the batch's log-probs here (no gradient, the weights
        that acted) and compare them with the ones the server returned (kept for
        :meth:`rollout_recompute`)."""
        if self.vllm is None:
            return {}
        samples = [s.sample for e in episodes for s in e.steps]
        if not samples:
            return {}
        outs = self.recompute(samples)
        self._rollout_outs = ([id(s) for s in samples], outs)
        mean, largest = logprob_gap(samples, outs)
        return {"perf/vllm_logprob_gap": mean, "perf/vllm_logprob_gap_max": largest}

    def all_episodes(self, episodes: list[Episode]) -> list[Episode]:
        """The batch of every process (for metrics): one process's own episodes; with several,
        copies that keep each step's action, reward, parse result and sampled log-prob."""
        if self.processes.num == 1:
            return episodes
        light = [
            dataclasses.replace(
                e,
                steps=[
                    dataclasses.replace(s, sample=_LoggedSample(_sample_logprob(s.sample)), info={})
                    for s in e.steps
                ],
                final_info={},
            )
            for e in episodes
        ]
        return self.processes.gather(light)

    def _module_rates(self) -> dict[str, float]:
        """``train/lr_<module>``: the current rate of each extra module (action head, critic)."""
        rates = {}
        for name, module in self.extra_modules.items():
            first = next(module.parameters(), None)
            for group in self.optimizer.param_groups:
                if any(p is first for p in group["params"]):
                    rates[f"train/lr_{name}"] = group["lr"]
        return rates

    def _refresh_head_features(self, episodes: list[Episode]) -> None:
        """Add the batch's hidden states to the head's whitening statistics and refresh the map
        (before the update, so its old and new log-probs share one feature map)."""
        head = self.policy.head
        if head is None or self.features_frozen:
            return
        hidden = [s.sample.hidden for e in episodes for s in e.steps]
        hidden = self.processes.gather([h.cpu() for h in hidden if h is not None])
        if not hidden:
            return
        head.whitener.update(self.torch.stack(hidden).to(self.device))
        head.whitener.refresh()

    def _continued_sft(self, episodes: list[Episode]) -> dict[str, float]:
        """Continued SFT on recent successful episodes (return > 0), weighted in as a loss."""
        for ep in episodes:
            if ep.ret > 0:
                self._recent_successes += [s for s in ep.steps if s.parse_ok]
        self._recent_successes = self._recent_successes[-256:]
        if not self._recent_successes:
            return {}
        rng = random.Random(self.iteration)
        batch = rng.sample(self._recent_successes, min(len(self._recent_successes), 32))
        samples = [s.sample for s in batch]

        def loss_fn(idx: list[int]) -> tuple[Any, dict[str, float]]:
            out = self.evaluate_samples([samples[i] for i in idx])
            loss = (
                -self.config.sft.during_rl
                * sequence_mean_logprob(out, self.config.policy.mode).mean()
            )
            return loss, {"losses/sft": loss.item()}

        return self.optimize(list(range(len(samples))), loss_fn) or {}

    def _budget(self) -> int:
        """The progress bar's total: episodes when an episode budget is set, else env steps."""
        return self.config.run.total_episodes or self.config.run.total_env_steps

    def _spent(self) -> int:
        return self.episodes_done if self.config.run.total_episodes else self.env_steps

    def _done(self) -> bool:
        cfg = self.config
        if cfg.run.total_episodes and self.episodes_done >= cfg.run.total_episodes:
            return True
        return self.env_steps >= cfg.run.total_env_steps

    # ---- diagnostics ---------------------------------------------------------------------

    def _warn(self, message: str, key: str | None = None) -> None:
        key = key or message
        self._warned[key] += 1
        if self._warned[key] in (1, 10, 100):
            warnings.warn(f"llmgym: {message}", RuntimeWarning, stacklevel=3)

    def diagnose(self, metrics: dict[str, Any], episodes: list[Episode]) -> None:
        """Collapse diagnostics: one action > 98 % of the time, entropy ~0, KL run-away."""
        if not self.config.run.collapse_warn:
            return
        top = metrics.get("diagnostics/top_action_frac", 0.0)
        n_actions = metrics.get("diagnostics/num_valid_actions", 0)
        collapsed = n_actions > 1 and top > 0.98 and metrics.get("charts/episodic_length", 0) > 0
        metrics["diagnostics/collapsed"] = float(collapsed)
        if collapsed and sum(e.length for e in episodes) >= 30:
            self._warn(
                f"action distribution collapsed: {metrics.get('diagnostics/top_action')!r} is "
                f"chosen {top:.0%} of the time (raise the entropy bonus or KL coefficient, or "
                "lower the learning rate)",
                key="collapse",
            )
        entropy = metrics.get("charts/entropy")
        if entropy is not None and entropy < 0.01:
            self._warn(f"policy entropy fell to {entropy:.4f}: exploration has stopped", "entropy")
        kl = metrics.get("losses/kl")
        if kl is not None and kl > self.config.run.kl_warn:
            self._warn(f"KL to the reference ran away ({kl:.2f} > {self.config.run.kl_warn})", "kl")

    # ---- the run's record ------------------------------------------------------------------

    def _save_run_info(self) -> None:
        info = {
            "config": self.config.to_dict(),
            "algo": self.algo,
            "versions": library_versions(),
            "train_seed_formula": "seed * 100003 + i (i counts seeds drawn; one per GRPO group)",
            "eval_seeds": f"{EVAL_SEED_BASE} + i",
            "num_processes": self.processes.num,
            "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        }
        (self.run_dir / "run.json").write_text(json.dumps(info, indent=2, default=str))


# --------------------------------------------------------------------------------------------
# Helpers


def check_vllm_training(config: Any) -> None:
    """Refuse, in one sentence, what cannot train through vLLM (``policy.backend == "vllm"``):
    an action head (vLLM returns no hidden states) and a frozen language model (nothing to
    sync). LoRA adapters are hot-loaded after each update, a full fine-tune reloaded whole."""
    policy = config.policy
    if policy.backend != "vllm":
        return
    if policy.action_head and policy.mode == "score":
        raise ConfigError(
            "vLLM returns log-probs, not hidden states, so a policy with an action head "
            "cannot act through it; train with `--set action_head=false` to use the vllm backend."
        )
    if not config.optim.train_backbone:
        raise ConfigError(
            "Training through vLLM syncs the language model's weights after each update, so "
            "it needs train_backbone=true (LoRA or a full fine-tune); a frozen model trains "
            "with the hf backend."
        )


def head_layers(layers: Any, num_layers: int) -> tuple[int, ...]:
    """``head_layers`` checked against a model of ``num_layers`` decoder layers (whose
    ``hidden_states`` run from 0, the embeddings, to ``num_layers``).

    Example:
        >>> head_layers(None, 30), head_layers([4, -1], 30)
        ((-1,), (4, -1))
    """
    if layers is None:
        return (-1,)
    ok = isinstance(layers, list) and layers and all(type(i) is int for i in layers)
    if not ok or not all(-num_layers - 1 <= i <= num_layers for i in layers):
        raise ConfigError(
            f"head_layers must be a non-empty list of hidden-state indices from {-num_layers - 1} "
            f"to {num_layers} (0: the embeddings, -1: the last layer), not {layers!r}."
        )
    return tuple(layers)


def check_head_options(config: Any) -> None:
    """Refuse the action head's options (``lm_prior=false``, ``head_layers``) without the head."""
    policy = config.policy
    if policy.action_head and policy.mode == "score":
        return
    if not policy.lm_prior:
        raise ConfigError(
            "lm_prior=false leaves the action head alone to score the actions, so it needs "
            "score mode with the head on (`--mode score --set action_head=true`)."
        )
    if policy.head_layers is not None:
        raise ConfigError(
            "head_layers chooses what the action head reads, so it needs score mode with the "
            "head on (`--mode score --set action_head=true`)."
        )


def logprob_gap(samples: Sequence[Any], outs: Sequence[Any]) -> tuple[float, float]:
    """Mean and largest |acted - recomputed| log-prob over the action tokens of ``samples``:
    per completion token in generate mode, per action (log pi of the chosen candidate) in
    score mode. ``outs``: ``recompute(samples)`` (one output per chunk).

    Example:
        >>> import torch
        >>> from types import SimpleNamespace as NS
        >>> samples = [NS(logprobs=[-1.0, -2.0]), NS(logprobs=[-0.5])]
        >>> outs = [NS(logprob=None, token_logprobs=[torch.tensor([-1.1, -2.0]),
        ...                                          torch.tensor([-0.2])])]
        >>> [round(x, 4) for x in logprob_gap(samples, outs)]
        [0.1333, 0.3]
    """
    tokens = [t for out in outs for t in (getattr(out, "token_logprobs", None) or [])]
    if tokens:
        recomputed = [as_list(t.detach().float().cpu()) for t in tokens]
    else:
        recomputed = [[v] for out in outs for v in as_list(out.logprob.detach().float().cpu())]
    gaps = [
        abs(float(a) - float(b))
        for sample, row in zip(samples, recomputed, strict=True)
        for a, b in zip(as_list(sample.logprobs), row, strict=True)
    ]
    return (float(np.mean(gaps)), float(np.max(gaps))) if gaps else (0.0, 0.0)


def evaluation_kwargs(env_kwargs: dict[str, Any]) -> dict[str, Any]:
    """The evaluation env's kwargs: without a training-only ``max_episode_steps`` cap, and
    on the held-out ``split="test"`` where training draws from ``split="train"`` (math).

    Example:
        >>> evaluation_kwargs({"is_slippery": False, "max_episode_steps": 30})
        {'is_slippery': False}
        >>> evaluation_kwargs({"split": "train"})
        {'split': 'test'}
    """
    out = {k: v for k, v in env_kwargs.items() if k != "max_episode_steps"}
    if out.get("split") == "train":
        out["split"] = "test"
    return out


def exact_metrics(result: Any) -> dict[str, Any]:
    """An exact evaluation in the format of :func:`evaluate_policy` (CI 0, no episodes)."""
    return {
        "mean_return": float(result.value),
        "ci95": 0.0,
        "episodes": 0,
        "success_rate": float("nan"),
        "parse_rate": float(result.parse_rate),
        "mean_length": float("nan"),
        "returns": [],
        "method": "exact",
    }


def load_model_for(name: str, device: str = "auto", dtype: str = "auto") -> tuple[Any, Any]:
    """``load_model`` plus ``tiny`` (a random tiny Llama for tests and smoke runs), with the
    weights in ``dtype`` (``auto``: float32 on CPU, bfloat16 or float16 on a GPU)."""
    import torch

    from llmgym.policy.models import load_model, resolve_device, resolve_dtype

    kind = resolve_device(device) if device == "auto" else torch.device(device).type
    torch_dtype = resolve_dtype(None if dtype == "auto" else dtype, kind)
    if name == "tiny":
        from llmgym.policy.testing import tiny_model

        model, tokenizer = tiny_model(seed=0)
        return model.to(dtype=torch_dtype), tokenizer
    return load_model(name, device=device, dtype=torch_dtype)


def rollout_metrics(episodes: list[Episode]) -> dict[str, Any]:
    """Return, length, parse rate, entropy and the action histogram of a batch of episodes."""
    steps = [s for e in episodes for s in e.steps]
    returns = [e.ret for e in episodes if math.isfinite(e.ret)]
    names: Counter[str] = Counter(s.action for s in steps)
    n_valid = max((s.num_actions for s in steps), default=0)
    top, top_n = names.most_common(1)[0] if names else ("", 0)
    metrics: dict[str, Any] = {
        "charts/episodic_return": float(np.mean(returns)) if returns else float("nan"),
        "charts/episodic_length": float(np.mean([e.length for e in episodes])) if episodes else 0.0,
        "charts/success_rate": float(np.mean([r > 0 for r in returns])) if returns else 0.0,
        "llmgym/parse_rate": float(np.mean([s.parse_ok for s in steps])) if steps else float("nan"),
        "diagnostics/top_action_frac": top_n / max(len(steps), 1),
        "diagnostics/top_action": top,
        "diagnostics/num_valid_actions": n_valid,
    }
    logprobs = [_sample_logprob(s.sample) for s in steps]
    logprobs = [lp for lp in logprobs if lp is not None]
    if logprobs:
        metrics["charts/sample_nll"] = -float(np.mean(logprobs))
    return metrics


@dataclass
class _LoggedSample:
    """What the metrics read of a sample that another process played."""

    logprob: float | None


def _sample_logprob(sample: Any) -> float | None:
    lp = getattr(sample, "logprob", None)
    if lp is None:
        lps = getattr(sample, "logprobs", None)
        if lps is None:
            return None
        lp = sum(as_list(lps)) if getattr(sample, "candidate_ids", None) is None else None
    return float(lp) if lp is not None else None


def evaluate_policy(
    policy: Any,
    envs: Sequence[gym.Env],
    seeds: Sequence[int],
    *,
    greedy: bool = True,
    markov: bool = True,
) -> dict[str, Any]:
    """Play one episode per seed; mean return with its 95 % CI, success and parse rates."""
    import torch

    cfg = policy.config
    old = cfg.greedy
    cfg.greedy = greedy
    act = cached(policy.act, {}) if (greedy and markov) else policy.act
    try:
        with torch.no_grad():
            episodes = play(act, envs, seeds)
    finally:
        cfg.greedy = old
    returns = [e.ret for e in episodes]
    finite = finite_returns(returns)
    mean, ci = mean_ci95(finite)
    steps = [s for e in episodes for s in e.steps]
    return {
        "nonfinite_episodes": len(returns) - len(finite),
        "mean_return": mean,
        "ci95": ci,
        "episodes": len(episodes),
        "success_rate": float(np.mean([r > 0 for r in returns])),
        "parse_rate": float(np.mean([s.parse_ok for s in steps])) if steps else float("nan"),
        "mean_length": float(np.mean([e.length for e in episodes])),
        "returns": returns,
        "method": "sampled",
    }


def _eval_metrics(ev: dict[str, Any]) -> dict[str, float]:
    return {
        "eval/mean_return": ev["mean_return"],
        "eval/ci95": ev["ci95"],
        "eval/success_rate": ev["success_rate"],
        "eval/parse_rate": ev["parse_rate"],
        "eval/mean_length": ev["mean_length"],
    }


def _chunks(items: list, size: int) -> Iterator[list]:
    size = max(1, size)
    for i in range(0, len(items), size):
        yield items[i : i + size]


def _progress(enabled: bool, total: int, initial: int) -> Any:
    if not enabled:
        return None
    try:
        from tqdm.auto import tqdm
    except ImportError:
        return None
    return tqdm(total=total, initial=initial, unit="", desc="training", dynamic_ncols=True)


def _write(pbar: Any, message: str) -> None:
    if pbar is not None:
        pbar.write(message)


def mean_stats(history: list[dict[str, float]]) -> dict[str, float]:
    """Average each stat over the optimizer steps that reported it."""
    keys: list[str] = []
    for h in history:
        keys += [k for k in h if k not in keys]
    return {k: float(np.mean([h[k] for h in history if k in h])) for k in keys}
