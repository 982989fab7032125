"""The loop every online RL run shares, composed of its parts.

One iteration, :meth:`Trainer.run_iteration`: the algorithm collects complete episodes with
the current policy (through the :class:`~llmgym.rl.collector.Collector`), the learner prepares
(feature statistics, ``lora.init``), the algorithm updates (its targets into a
:class:`~llmgym.rl.batch.RolloutBatch`, its loss through
:meth:`~llmgym.rl.learner.Learner.run_epochs`), then log, evaluate every ``eval.every``
iterations and checkpoint every ``run.checkpoint_every``. ``train()`` runs it until the
env-step or episode budget is spent; ``train(resume=True)`` continues from the newest
checkpoint, exactly.

The parts, each handed what it uses through its constructor:

- :class:`~llmgym.rl.state.RunState`: the counters and the minibatch stream;
- :class:`~llmgym.rl.learner.Learner`: the trained weights, optimizer and update steps;
- :class:`~llmgym.rl.collector.Collector`: the training episodes;
- the algorithm (``ALGORITHMS[config.algo]``, ``algorithms/``): targets and loss;
- :class:`~llmgym.rl.checkpointing.Checkpointer`: checkpoints and policy directories;
- :class:`~llmgym.rl.run_evaluation.RunEvaluation`: evaluations;
- :class:`~llmgym.rl.logger.MetricsLogger`: the metrics log (made by :meth:`Trainer.train`).

The acting policy, its vLLM engine and the random streams come from ``acting.py``.

Nothing writes into the rollout's records: an update reads episodes and builds its own batch.
"""

from __future__ import annotations

import math
import time
import warnings
from collections import Counter
from functools import partial
from pathlib import Path
from typing import Any

import llmgym  # noqa: F401  (registers the Text-* ids)
from llmgym.errors import TrainingError
from llmgym.evaluation.evaluator import evaluation_kwargs
from llmgym.policy.models import load_model_for
from llmgym.rl import checkpoints
from llmgym.rl.acting import acting_policy, seed_everything, seed_sampling, vllm_engine
from llmgym.rl.algorithms import algorithm
from llmgym.rl.checkpointing import Checkpointer
from llmgym.rl.collector import Collector
from llmgym.rl.config import TrainConfig
from llmgym.rl.distributed import Processes
from llmgym.rl.envs import make_envs
from llmgym.rl.learner import Learner
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
from llmgym.rl.state import RunState
from llmgym.rl.weights import Weights
from llmgym.rollout import Episode

EVAL_SEED_BASE = 1_000_000
"""Evaluation episodes use seeds ``EVAL_SEED_BASE + i``: disjoint from training seeds."""


class Trainer:
    """Online RL over text envs with the algorithm ``config.algo`` names; see the module
    docstring."""

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
        from llmgym.rl.machine import check_machine, size_auto  # (llmgym train's plan runs them)

        if "auto" in (config.run.num_envs, config.optim.micro_batch_size):
            print(size_auto(config), flush=True)
        if model is None:  # the model it loads fits this machine, or a sentence says why not
            check_machine(config)
        self.config = config
        self.algo: str = getattr(config, "algo", "")
        entry = algorithm(self.algo)
        run = config.run
        #: The vLLM engine the policy acts through (``policy.uses_vllm``), else None.
        self.vllm: Any = vllm_engine(config)
        if run.num_threads > 0:
            torch.set_num_threads(run.num_threads)
        self.run_dir = Path(run.output_dir)
        seed_everything(run.seed)  # the same in every process: the same initial weights
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
        self._warned: Counter[str] = Counter()
        self.state = RunState(seed=run.seed)
        weights = Weights(config)
        model = weights.prepare(model)
        self.policy = acting_policy(
            config, model, tokenizer, self.vllm, self.run_dir, self, policy_config
        )
        self.learner = Learner(
            config, model, self.policy, weights, self.processes, self.state, self._warn, self.vllm
        )
        # No env_id: the trainer only updates on episodes handed to it (llmgym.Agent). The envs
        # keep the chat history (policy.history), so it follows each env's episodes.
        make = partial(make_envs, run.env_id, run.num_envs, history=config.policy.history)
        self.envs = make(run.env_kwargs) if run.env_id else []
        # Evaluation runs under the registered step limit, on held-out problems where split,
        # with the evaluation's own kwargs over the run's (another map set, a rewording).
        eval_kwargs = evaluation_kwargs({**run.env_kwargs, **config.eval.env_kwargs})
        eval_envs = make(eval_kwargs) if run.env_id and eval_kwargs != run.env_kwargs else None
        show = run.progress and self.processes.is_main
        envs = eval_envs or self.envs
        self.evaluation = RunEvaluation(config, envs, eval_kwargs, self.torch, show_progress=show)
        self.collector = Collector(config, self.envs, self.policy, self.processes, self.state)
        self.algorithm = entry.algorithm_class()(config, self.learner, self.collector, self.state)
        self.learner.start()  # after the algorithm added its modules (a critic)
        self.checkpointer = Checkpointer(
            config, self.algo, self.run_dir, self.learner, self.state, self.algorithm,
            self.processes,
        )  # fmt: skip
        self.logger: MetricsLogger | None = None
        seed_sampling(self.processes, run.seed, self.state.iteration, self.policy)

    @property
    def model(self) -> Any:
        """The model being trained (the learner's; a reference refresh replaces it)."""
        return self.learner.model

    # ---- construction ----------------------------------------------------------------------

    def _device_name(self) -> str:
        """``config.run.device``; with several GPU processes, this process's own GPU."""
        accelerator = self.processes.accelerator
        if accelerator is not None and self.config.run.device == "auto":
            return str(accelerator.device)
        return self.config.run.device

    # ---- collecting and updating -----------------------------------------------------------

    def collect(self) -> list[Episode]:
        """Episodes for one iteration: the algorithm's (GRPO forms groups), else the
        collector's."""
        collect = getattr(self.algorithm, "collect", self.collector.collect)
        return collect()

    def train_on_episodes(self, episodes: list[Episode]) -> dict[str, Any]:
        """One update on finished episodes (collected by :meth:`collect` or handed in by
        ``llmgym.Agent``); advances the counters and returns the metrics."""
        state, learner = self.state, self.learner
        if self.config.optim.anneal_lr and self.envs:
            learner.anneal(max(0.0, 1.0 - self._spent() / max(self._budget(), 1)))
        steps, count = self.processes.sum([sum(e.length for e in episodes), len(episodes)])
        state.env_steps += int(steps)
        state.episodes_done += int(count)
        if self.config.optim.train_backbone:
            learner.model.train()
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
            acted, gap = learner.prepare(clean)
            metrics = self.algorithm.update(clean, acted) | gap
            learner.adapt_entropy(metrics.get("charts/entropy"))
            if self.config.sft.during_rl > 0:
                from llmgym.rl.algorithms.sft import continued_sft

                metrics |= continued_sft(self, clean)
            learner.average.update()
            learner.sync_acting_weights()
        state.iteration += 1
        everyone = (
            episodes if self.processes.num == 1 else self.processes.gather(light_copies(episodes))
        )
        return (
            metrics
            | rollout_metrics(everyone)
            | {
                "llmgym/nonfinite_rewards": nonfinite,
                "iteration": state.iteration,
                "episodes": state.episodes_done,
                "train/skipped_updates": state.skipped_updates,
                "train/ent_coef": learner.ent_coef,
                "train/lr": learner.optimizer.param_groups[0]["lr"],
                **learner.module_rates(),
            }
        )

    def _budget(self) -> int:
        """What the run will spend (the progress bar's total, ``anneal_lr``'s horizon): env
        steps, or the episodes of the whole updates that an episode budget allows."""
        run = self.config.run
        if not run.total_episodes:
            return run.total_env_steps
        return math.ceil(run.total_episodes / run.episodes_per_update) * run.episodes_per_update

    def _spent(self) -> int:
        return self.state.episodes_done if self.config.run.total_episodes else self.state.env_steps

    # ---- checkpoints -----------------------------------------------------------------------

    def save_policy(self, path: str | Path) -> Path:
        """The acting policy as a small directory that ``llm:MODEL@PATH`` loads
        (:meth:`Checkpointer.save_policy`)."""
        return self.checkpointer.save_policy(path)

    def load_checkpoint(self, path: str | Path | None = None) -> None:
        """Restore a checkpoint (the newest of the run by default) and, with several
        processes, each one's sampling stream at its iteration."""
        self.checkpointer.load_checkpoint(path)
        seed_sampling(self.processes, self.config.run.seed, self.state.iteration, self.policy)

    # ---- evaluation ------------------------------------------------------------------------

    def evaluate(self, episodes: int | None = None, seed_base: int = EVAL_SEED_BASE) -> dict:
        """Mean return, its 95 % CI, success rate and parse rate over fixed evaluation seeds
        (``EvalResult.summary``); or the greedy policy's exact expected return
        (``eval_method``). Of the weights' average where ``optim.average_decay`` keeps one."""
        with self.learner.average.applied():
            return self._evaluate(episodes, seed_base)

    def _evaluate(self, episodes: int | None, seed_base: int) -> dict:
        return self.evaluation.run(self.policy, episodes, seed_base)

    def uses_exact_eval(self) -> bool:
        """Whether :meth:`evaluate` computes the exact value (see ``eval_method``)."""
        return self.evaluation.exact()

    # ---- the loop --------------------------------------------------------------------------

    def train(
        self,
        resume: bool = False,
        final_episodes: int | None = None,
        start_eval: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        """Run until the budget is spent; returns the final evaluation (over ``final_episodes``
        episodes, default ``eval_episodes``; the exact value needs none), made after the last
        checkpoint so that an interrupted final evaluation resumes without repeating an update.
        ``start_eval``: an evaluation of the weights before training (``llmgym train``'s start
        value), reused at iteration 0 where it measures the same thing."""
        cfg, state, checkpointer = self.config, self.state, self.checkpointer
        main = self.processes.is_main
        if resume:
            checkpoint = self.checkpointer.latest_checkpoint()
            self.load_checkpoint()
            self.learner.sync_acting_weights()  # the server acts with the checkpoint's adapter
            self.say(
                f"Resumed from {checkpoint}: iteration {state.iteration}, {state.env_steps} env "
                f"steps, {state.episodes_done} episodes."
            )
        elif main:
            self.run_dir.mkdir(parents=True, exist_ok=True)
            checkpoints.start_fresh(self.run_dir)
            checkpointer.save_run_info()
        self.processes.wait()
        self.logger = MetricsLogger(self.run_dir, cfg.to_dict()) if main else None
        if resume and self.logger is not None:
            self.logger.truncate(state.env_steps)
        pbar = progress_bar(cfg.run.progress and main, total=self._budget(), initial=self._spent())
        try:
            if state.iteration == 0 and not resume:
                self._first_evaluation(pbar, start_eval)
            while not self._done():
                self.run_iteration(pbar)
            checkpointer.check_trained()  # a run whose every step was skipped stops here, failed
            checkpointer.save_checkpoint()
            final = self.evaluate(final_episodes)
            checkpointer.keep_if_best(final)
            final_row = eval_metrics(final) | {"iteration": state.iteration}
            if self.logger is not None:
                checkpoints.log_once(self.logger, final_row, state.env_steps)
            return final
        finally:
            if pbar is not None:
                pbar.close()
            if self.logger is not None:
                self.logger.close()

    def _first_evaluation(self, pbar: Any, start_eval: dict[str, Any] | None) -> None:
        """Iteration 0: the SFT warm start when configured, then the start evaluation (unless
        ``eval.start`` is off; ``start_eval`` where :meth:`_same_start` holds)."""
        start = time.perf_counter()
        metrics: dict[str, Any] = {}
        warm = self.config.sft.source != "none"
        if warm:
            from llmgym.rl.algorithms.sft import warm_start

            metrics |= warm_start(self)
            self.learner.sync_acting_weights()
        if self.config.eval.start:
            ev = start_eval if self._same_start(start_eval, warm) else self.evaluate()
            self.state.first_eval = ev  # after the SFT warm start, when there is one
            metrics |= eval_metrics(ev) | {"perf/eval_s": time.perf_counter() - start}
            self.say(f"iter 0: {eval_line(ev)}", pbar)
        if metrics and self.logger is not None:
            self.logger.log(metrics, self.state.env_steps)
        if warm:
            # iter_000000: the SFT warm start (RL can restart here)
            self.checkpointer.save_checkpoint()

    def _same_start(self, start_eval: dict[str, Any] | None, warm: bool) -> bool:
        """Whether ``start_eval`` is what iteration 0 would measure: no SFT warm start since,
        a greedy policy (no random draws to repeat) and the exact value, or as many episodes on
        the same seeds."""
        if start_eval is None or warm or not self.config.eval.greedy:
            return False
        exact = start_eval.get("method") == "exact"
        return exact or start_eval.get("episodes") == self.config.eval.episodes

    def run_iteration(self, pbar: Any = None) -> dict[str, Any]:
        """Collect, update, log, maybe evaluate and checkpoint. Returns the logged metrics."""
        cfg, state, checkpointer = self.config, self.state, self.checkpointer
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
        if cfg.eval.every and state.iteration % cfg.eval.every == 0 and not self._done():
            ev = self.evaluate()
            metrics |= eval_metrics(ev)
            checkpointer.keep_if_best(ev)
            reached = checkpointer.reached_stop_at()
            stop = "; eval.stop_at is reached, so training stops" if reached else ""
            self.say(
                f"iter {state.iteration} ({state.env_steps} env steps): {eval_line(ev)}{stop}",
                pbar,
            )
        self.diagnose(metrics, episodes)
        if self.logger is not None and state.iteration % cfg.run.log_every == 0:
            self.logger.log(metrics, state.env_steps)
        if cfg.run.checkpoint_every and state.iteration % cfg.run.checkpoint_every == 0:
            checkpointer.save_checkpoint()
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
        run, state = self.config.run, self.state
        episodes = run.total_episodes and state.episodes_done >= run.total_episodes
        reached = self.checkpointer.reached_stop_at()
        return reached or bool(episodes) or state.env_steps >= run.total_env_steps

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
