"""The loop every online RL trainer shares, and the hand-off to its algorithm.

One iteration: ``collect()`` complete episodes with the current policy -> ``update(episodes)``
(the algorithm: advantages into a :class:`~llmgym.rl.batch.RolloutBatch`, then its loss through
:meth:`Trainer.run_epochs`, the one epoch x minibatch x optimizer-step loop) -> log -> evaluate
every ``eval.every`` iterations -> checkpoint every ``run.checkpoint_every``. ``train()`` runs
it until the env-step or episode budget is spent; ``train(resume=True)`` continues from the
newest checkpoint, exactly.

Each algorithm (``algorithms/``: ``ppo.py``, ``qac.py``, ``grpo.py``, ``reinforce.py``)
subclasses :class:`Trainer` and implements :meth:`Trainer.update`. The trainer owns its parts:
the policy (``llmgym.policy``), which weights train and the reference
(:class:`~llmgym.rl.weights.Weights`), the optimizers (``optim.py``), several processes
(``distributed.py``), the metrics log (``logger.py``), checkpoints (``checkpointing.py``) and
its evaluations (``run_evaluation.py``). Nothing writes into the rollout's records: an update reads
episodes and builds its own batch.
"""

from __future__ import annotations

import math
import random
import time
import warnings
from collections import Counter
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

import llmgym  # noqa: F401  (registers the Text-* ids)
from llmgym.errors import TrainingError
from llmgym.evaluation.evaluator import evaluation_kwargs
from llmgym.policy.action_head import head_for, state_layers
from llmgym.policy.models import load_model_for
from llmgym.rl import checkpoints
from llmgym.rl.checkpointing import Checkpointing
from llmgym.rl.config import TrainConfig
from llmgym.rl.distributed import Processes
from llmgym.rl.envs import make_envs
from llmgym.rl.logger import MetricsLogger
from llmgym.rl.metrics import (
    collapse_warnings,
    eval_line,
    eval_metrics,
    light_copies,
    progress_bar,
    rollout_metrics,
)
from llmgym.rl.run_evaluation import RunEvaluation
from llmgym.rl.update import UpdateSteps
from llmgym.rl.weights import Weights
from llmgym.rollout import Episode, play

EVAL_SEED_BASE = 1_000_000
"""Evaluation episodes use seeds ``EVAL_SEED_BASE + i``: disjoint from training seeds."""


class Trainer(UpdateSteps, Checkpointing):
    """Online RL over text envs. Subclasses implement :meth:`update`; see the module docstring."""

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
        config.validate()  # before the model loads
        self.config = config
        run = config.run
        #: The vLLM engine the policy acts through (``policy.uses_vllm``), else None.
        self.vllm: Any = None
        if config.policy.uses_vllm:
            from llmgym.policy.backends import make_vllm_backend

            p, inprocess = config.policy, config.policy.backend == "vllm-inprocess"
            self.vllm = make_vllm_backend(p.vllm_url, p.vllm_model, p.model, inprocess)
        if run.num_threads > 0:
            torch.set_num_threads(run.num_threads)
        self.run_dir = Path(run.output_dir)
        self._seed_everything(run.seed)  # the same in every process: the same initial weights
        no_gpu = run.device == "auto" and not torch.cuda.is_available()
        self.processes = Processes.from_environment(cpu=run.device == "cpu" or no_gpu)
        if self.vllm is not None and self.processes.num > 1:
            raise TrainingError(
                "Training through a vLLM server runs in one process; launch it without "
                "accelerate/torchrun (the server batches the acting)."
            )
        if self.processes.num > run.episodes_per_update:
            raise TrainingError(
                f"{self.processes.num} processes need at least as many episodes per update, "
                f"not {run.episodes_per_update}."
            )
        if model is None:
            model, tokenizer = load_model_for(
                config.policy.model,
                self._device_name(),
                config.policy.dtype,
                config.policy.backbone,
            )
        self.tokenizer = tokenizer
        self.device = next(model.parameters()).device
        self.weights = Weights(config)
        self.model = self.weights.prepare(model)
        self.policy = self._make_policy(policy_config)
        # No env_id: the trainer only updates on episodes handed to it (llmgym.Agent). The envs
        # keep the chat history (policy.history), so it follows each env's episodes.
        make = partial(make_envs, run.env_id, run.num_envs, history=config.policy.history)
        self.envs = make(run.env_kwargs) if run.env_id else []
        # Evaluation runs under the registered step limit, on held-out problems where split.
        eval_kwargs = evaluation_kwargs(run.env_kwargs)
        eval_envs = make(eval_kwargs) if run.env_id and eval_kwargs != run.env_kwargs else None
        self.evaluation = RunEvaluation(config, eval_envs or self.envs, eval_kwargs, self.torch)
        self.iteration = 0
        self.env_steps = 0
        self.episodes_done = 0
        self.seeds_used = 0
        self.skipped_updates = 0
        self._warned: Counter[str] = Counter()
        self.extra_modules: dict[str, Any] = {}  # e.g. PPO's value head (saved, optimised)
        self.module_lr: dict[str, float] = {}  # learning rates of extra modules (else the main)
        self.ent_boost = 0.0  # added to the entropy bonus while entropy is below min_entropy
        self.features_frozen = False  # after SFT the head keeps the demos' feature map
        self.best_eval: dict[str, Any] | None = None  # the best evaluation (keep_if_best)
        self.recent_successes: list[Any] = []  # turns that ``sft.during_rl`` trains on
        self.first_eval: dict[str, Any] | None = None  # the iteration-0 evaluation of train()
        #: Shuffles minibatches (and draws GRPO's branch points); checkpointed.
        self.np_rng = np.random.default_rng(run.seed + 1)
        if self.policy.head is not None:
            self.extra_modules["action_head"] = self.policy.head
            self.module_lr["action_head"] = config.optim.head_rate()
        self.setup()
        self.optimizer = self._make_optimizer()
        self.average = self._make_average()  # optim.average_decay's (llmgym.rl.averaging)
        self.logger: MetricsLogger | None = None
        self._seed_sampling()

    # ---- construction ----------------------------------------------------------------------

    def setup(self) -> None:
        """Hook for subclasses: build extra modules before the optimizer is created."""

    def _device_name(self) -> str:
        """``config.run.device``; with several GPU processes, this process's own GPU."""
        accelerator = self.processes.accelerator
        if accelerator is not None and self.config.run.device == "auto":
            return str(accelerator.device)
        return self.config.run.device

    def _seed_everything(self, seed: int) -> None:
        random.seed(seed)
        np.random.seed(seed)
        self.torch.manual_seed(seed)

    def _seed_sampling(self) -> None:
        """With several processes, a sampling stream of its own for each (from the seed, the
        iteration and the rank); one process keeps the stream its seed started."""
        if self.processes.num > 1:
            rank, iteration = self.processes.rank, self.iteration
            seed = (self.config.run.seed * 1_000_003 + iteration * 1009 + rank + 1) % 2**32
            self._seed_everything(seed)
            generator = getattr(self.policy, "generator", None)
            if generator is not None:
                generator.manual_seed(seed)

    def _make_policy(self, policy_config: Any = None) -> Any:
        from llmgym.policy import LLMPolicy

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
            policy_config or self.config.policy.acting(),
            head=head_for(self.model, self.config.policy),
            memoize=not self.config.optim.train_backbone,
            backend=self.vllm,
            layers=state_layers(self.model, self.config.policy),
        )

    # ---- collecting and updating -----------------------------------------------------------

    def next_seeds(self, n: int) -> list[int]:
        """Env seeds of the next ``n`` training episodes (deterministic in the episode index)."""
        base = self.config.run.seed * 100_003
        seeds = [base + self.seeds_used + i for i in range(n)]
        self.seeds_used += n
        return seeds

    def act(self, observations: list[str], infos: list[dict[str, Any]]) -> list[Any]:
        """The training rollouts' actor: the policy, sampling."""
        return self.policy.act(observations, infos, greedy=False)

    def collect(self) -> list[Episode]:
        """Episodes for one iteration (GRPO overrides this to form groups). They are complete
        unless the env-step budget runs out: the last collection stops when it is spent and the
        episodes it cuts end truncated (PPO bootstraps them from its value head)."""
        seeds = self.processes.shard(self.next_seeds(self.config.run.episodes_per_update))
        return play(
            self.act,
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

    def update(self, episodes: list[Episode], acted: list[Any] | None = None) -> dict[str, float]:
        """The algorithm: advantages, the loss, the optimizer steps; returns metrics.
        ``acted``: the samples' outputs under the acting weights, when already computed."""
        raise NotImplementedError

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
            self._init_lora(clean)
            self._refresh_head_features(clean)
            acted, gap = self._vllm_gap(clean)
            metrics = self.update(clean, acted) | gap
            self.adapt_entropy(metrics.get("charts/entropy"))
            if self.config.sft.during_rl > 0:
                from llmgym.rl.algorithms.sft import continued_sft

                metrics |= continued_sft(self, clean)
            self.average.update()
            self.sync_acting_weights()
        self.iteration += 1
        everyone = (
            episodes if self.processes.num == 1 else self.processes.gather(light_copies(episodes))
        )
        return (
            metrics
            | rollout_metrics(everyone)
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

    # ---- evaluation ------------------------------------------------------------------------

    def evaluate(self, episodes: int | None = None, seed_base: int = EVAL_SEED_BASE) -> dict:
        """Mean return, its 95 % CI, success rate and parse rate over fixed evaluation seeds
        (``EvalResult.summary``); or the greedy policy's exact expected return
        (``eval_method``). Of the weights' average where ``optim.average_decay`` keeps one."""
        with self.average.applied():
            return self._evaluate(episodes, seed_base)

    def _evaluate(self, episodes: int | None, seed_base: int) -> dict:
        return self.evaluation.run(self.policy, episodes, seed_base)

    def uses_exact_eval(self) -> bool:
        """Whether :meth:`evaluate` computes the exact value (see ``eval_method``)."""
        return self.evaluation.exact()

    # ---- the loop --------------------------------------------------------------------------

    def train(self, resume: bool = False, final_episodes: int | None = None) -> dict[str, Any]:
        """Run until the budget is spent; returns the final evaluation (over ``final_episodes``
        episodes, default ``eval_episodes``; the exact value needs none), made after the last
        checkpoint so that an interrupted final evaluation resumes without repeating an update."""
        cfg = self.config
        main = self.processes.is_main
        if resume:
            checkpoint = self.latest_checkpoint()
            self.load_checkpoint()
            self.sync_acting_weights()  # the server acts with the checkpoint's adapter
            self.say(
                f"Resumed from {checkpoint}: iteration {self.iteration}, {self.env_steps} env "
                f"steps, {self.episodes_done} episodes."
            )
        elif main:
            self.run_dir.mkdir(parents=True, exist_ok=True)
            checkpoints.start_fresh(self.run_dir)
            self.save_run_info()
        self.processes.wait()
        self.logger = MetricsLogger(self.run_dir, cfg.to_dict()) if main else None
        if resume and self.logger is not None:
            self.logger.truncate(self.env_steps)
        pbar = progress_bar(cfg.run.progress and main, total=self._budget(), initial=self._spent())
        try:
            if self.iteration == 0 and not resume:
                self._first_evaluation(pbar)
            while not self._done():
                self.run_iteration(pbar)
            self.check_trained()  # a run whose every step was skipped stops here, failed
            self.save_checkpoint()
            final = self.evaluate(final_episodes)
            self.keep_if_best(final)
            final_row = eval_metrics(final) | {"iteration": self.iteration}
            if self.logger is not None:
                checkpoints.log_once(self.logger, final_row, self.env_steps)
            return final
        finally:
            if pbar is not None:
                pbar.close()
            if self.logger is not None:
                self.logger.close()

    def _first_evaluation(self, pbar: Any) -> None:
        """Iteration 0: the SFT warm start when configured, then the start evaluation (unless
        ``eval.start`` is off)."""
        start = time.perf_counter()
        metrics: dict[str, Any] = {}
        warm = self.config.sft.source != "none"
        if warm:
            from llmgym.rl.algorithms.sft import warm_start

            metrics |= warm_start(self)
            self.sync_acting_weights()
        if self.config.eval.start:
            ev = self.evaluate()
            self.first_eval = ev  # after the SFT warm start, when there is one
            metrics |= eval_metrics(ev) | {"perf/eval_s": time.perf_counter() - start}
            self.say(f"iter 0: {eval_line(ev)}", pbar)
        if metrics and self.logger is not None:
            self.logger.log(metrics, self.env_steps)
        if warm:
            self.save_checkpoint()  # iter_000000 = the SFT warm start (RL can restart here)

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
            ev = self.evaluate()
            metrics |= eval_metrics(ev)
            self.keep_if_best(ev)
            stop = "; eval.stop_at is reached, so training stops" if self.reached_stop_at() else ""
            self.say(
                f"iter {self.iteration} ({self.env_steps} env steps): {eval_line(ev)}{stop}", pbar
            )
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

    def _done(self) -> bool:
        run = self.config.run
        episodes = run.total_episodes and self.episodes_done >= run.total_episodes
        return self.reached_stop_at() or bool(episodes) or self.env_steps >= run.total_env_steps

    # ---- diagnostics -----------------------------------------------------------------------

    def say(self, message: str, pbar: Any = None) -> None:
        """Print ``message`` (above the progress bar, if one is shown); one process speaks for
        all. ``run.progress=false`` (``--no-progress``) hides the bar, not these lines."""
        if not self.processes.is_main:
            return
        if pbar is not None:
            pbar.write(message)
        else:
            print(message, flush=True)

    def _warn(self, message: str, key: str | None = None) -> None:
        key = key or message
        self._warned[key] += 1
        if self._warned[key] in (1, 10, 100):
            warnings.warn(f"llmgym: {message}", RuntimeWarning, stacklevel=3)

    def diagnose(self, metrics: dict[str, Any], episodes: list[Episode]) -> None:
        """Collapse diagnostics (see :func:`~llmgym.rl.metrics.collapse_warnings`)."""
        if self.config.run.collapse_warn:
            for key, message in collapse_warnings(
                metrics, episodes, self.config.run.kl_warn
            ).items():
                self._warn(message, key)


__all__ = ["EVAL_SEED_BASE", "Trainer", "make_envs"]
