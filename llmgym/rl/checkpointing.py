"""What a run saves and restores (:class:`Checkpointer`): checkpoints (weights, merged
adapters, extra modules, optimizer, RNG states, counters, config) for ``--resume``, and the
small policy directory (``save_policy``) that ``llm:MODEL@PATH`` loads, also kept for the
run's best evaluation (``keep_if_best``). Where they go and how a kill at any point is
survived is ``checkpoints.py``.
"""

from __future__ import annotations

import json
import math
import random
import shutil
import time
from pathlib import Path
from typing import Any

import numpy as np

from llmgym.errors import TrainingError
from llmgym.files import WRITE_ERRORS, atomic_dir, output_error, write_text
from llmgym.rl import checkpoints
from llmgym.rl.algorithms import legacy_algo
from llmgym.rl.logger import library_versions
from llmgym.rl.weights import lora_state

REF_HEAD_FILE = "reference_head.safetensors"
AVERAGE_FILE = "weight_average.safetensors"  # optim.average_decay's average (llmgym.rl.averaging)
ALGORITHM_FILE = "algorithm_state.safetensors"  # the algorithm's tensors (extra_tensors)
#: The policy's memoised features (a frozen backbone's), in the newest checkpoint only.
MEMO_FILE = "memo.pt"
#: The states the policy keeps across calls (the cached prefix, the frozen trunk's states), in
#: the newest checkpoint only.
KEPT_FILE = "kept.pt"
TRAINING_STATS = ("count", "total", "outer")  # the whitener's statistics: only for training


class Checkpointer:
    """Saves and restores a run: the learner's weights, modules, optimizer and average, the
    run state, the algorithm's own state (its optional ``extra_state``, ``extra_tensors`` and
    ``load_extra_state``) and the RNG streams. The main process writes; with several processes
    the others wait for it."""

    def __init__(
        self,
        config: Any,
        algo: str,
        run_dir: Path,
        learner: Any,
        state: Any,
        algorithm: Any,
        processes: Any,
    ) -> None:
        self.config = config
        self.algo = algo  # the --algo name a checkpoint records
        self.run_dir = run_dir
        self.learner = learner
        self.state = state  # RunState
        self.algorithm = algorithm
        self.processes = processes

    def save_run_info(self) -> None:
        """``run.json``: the config, versions and seed formulas of a fresh run."""
        info = {
            "config": self.config.to_dict(),
            "algo": self.algo,
            "versions": library_versions(),
            "train_seed_formula": "seed * 100003 + i (i counts seeds drawn; one per GRPO group)",
            "eval_seeds": "1000000 + i",
            "num_processes": self.processes.num,
            "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        }
        write_text(self.run_dir / "run.json", json.dumps(info, indent=2, default=str))

    def save_checkpoint(self) -> Path:
        """Adapter (safetensors) + extra modules + optimizer + RNG states + counters + config
        + the policy's memoised features and kept states (written by the main process; the
        others wait for it). A run resumed here reads them back, so resuming is exact and a
        checkpoint changes nothing in the run. They are kept in the newest checkpoint only
        (they grow with the distinct prompts seen; a resume from an older one computes them
        afresh). With several processes, whose kept states the checkpoint does not hold, each
        forgets them here instead, as a resumed run starts without them."""
        path = self.run_dir / "checkpoints" / f"iter_{self.state.iteration:06d}"
        if self.processes.is_main:
            self._write_checkpoint(path)
            for name in (MEMO_FILE, KEPT_FILE):
                for older in path.parent.glob(f"iter_*/{name}"):
                    if older.parent != path:
                        older.unlink(missing_ok=True)
        self.processes.wait()
        if self.processes.num > 1:
            self.learner.policy.forget_kept_states()
        return path

    def _write_checkpoint(self, path: Path) -> None:
        """Write the checkpoint into ``iter_N.tmp`` and commit it; a write that fails (a full
        disk: torch.save's "unexpected pos", a read-only folder) removes the temporary folder
        and raises ``OutputError`` in one sentence."""
        tmp = path.with_name(path.name + ".tmp")
        try:
            self._fill_checkpoint(tmp)
            checkpoints.commit(tmp, path)  # rename-aside replacement, atomic `latest`
        except WRITE_ERRORS as error:
            shutil.rmtree(tmp, ignore_errors=True)
            raise output_error(path, error) from None

    def _fill_checkpoint(self, tmp: Path) -> None:
        import torch
        from safetensors.torch import save_file

        learner = self.learner
        self._save_weights(tmp, policy_only=False)
        if learner.weights.ref_head is not None:
            ref_head = learner.weights.ref_head.state_dict()
            save_file(_contiguous(ref_head), str(tmp / REF_HEAD_FILE))
        average = learner.average.state_dict()
        if average:
            save_file(_contiguous(average), str(tmp / AVERAGE_FILE))
        extra_tensors = getattr(self.algorithm, "extra_tensors", dict)
        tensors = extra_tensors()
        if tensors:
            save_file(_contiguous(tensors), str(tmp / ALGORITHM_FILE))
        torch.save(learner.optimizer.state_dict(), tmp / "optimizer.pt")
        memo = learner.policy.memo_state()
        if memo["keys"]:
            torch.save(memo, tmp / MEMO_FILE)
        kept = learner.policy.kept_state() if self.processes.num == 1 else []
        if kept:  # a policy with no transformers backend here (vLLM) keeps nothing
            torch.save(kept, tmp / KEPT_FILE)
        kind, keys, pos, has_gauss, gauss = np.random.get_state()
        rng = {  # plain types and tensors only, so it loads with torch.load(weights_only=True)
            "python": random.getstate(),
            "numpy": (kind, torch.from_numpy(keys.astype(np.int64)), pos, has_gauss, gauss),
            "torch": torch.get_rng_state(),
        }
        if torch.cuda.is_available():
            rng["cuda"] = torch.cuda.get_rng_state_all()
        generator = getattr(learner.policy, "generator", None)
        if generator is not None:
            rng["policy"] = generator.get_state()
        torch.save(rng, tmp / "rng.pt")
        state = self._state() | self.state.counters()
        extra_state = getattr(self.algorithm, "extra_state", dict)
        (tmp / "trainer_state.json").write_text(json.dumps(state | extra_state(), indent=2))

    def save_policy(self, path: str | Path) -> Path:
        """A small directory that restores the acting policy completely (the adapter, merged
        adapters, the action head; no optimizer, RNG or critic; the weights' average where
        ``optim.average_decay`` keeps one): ``llm:MODEL@PATH`` and
        :func:`~llmgym.rl.load_trained_policy` load it. Refused (``check_trained``) when every
        update of the run was skipped."""
        path = Path(path)
        self.check_trained()
        self._write_policy(path)
        return path

    def keep_if_best(self, evaluation: dict[str, Any]) -> None:
        """Save the acting policy to ``RUN_DIR/best_policy`` (``save_policy``'s format) when
        ``evaluation`` (made of it now) beats every earlier one of the run, and note it in
        ``best_eval``, as SB3's ``EvalCallback`` keeps its best model. Exact evaluations give
        the kept policy's true value; the best of sampled ones is an optimistic estimate."""
        value = evaluation.get("mean_return")
        if value is None or math.isnan(value):
            return
        value = self.processes.sum([value])[0] / self.processes.num  # one decision for all
        best = self.state.best_eval
        if best is not None and value <= best["value"]:
            return
        path = self.run_dir / checkpoints.BEST_POLICY
        record = {
            "value": value,
            "method": evaluation.get("method", "sampled"),
            "iteration": self.state.iteration,
            "episodes": self.state.episodes_done,
            "env_steps": self.state.env_steps,
            "weights": str(path),
        }
        self._write_policy(path, {"best_eval": record})  # the record travels with the weights
        self.state.best_eval = record

    def reached_stop_at(self) -> bool:
        """Whether a periodic evaluation reached ``eval.stop_at`` (as SB3's
        ``StopTrainingOnRewardThreshold``). ``best_eval`` holds it, so a resumed run knows, and
        all processes decide alike (``keep_if_best`` averages their values)."""
        goal, best = self.config.eval.stop_at, self.state.best_eval
        return goal is not None and best is not None and best["value"] >= goal

    def _write_policy(self, path: Path, extra: dict[str, Any] | None = None) -> None:
        if self.processes.is_main:
            with atomic_dir(path) as tmp, self.learner.average.applied():  # whole or not at all
                self._save_weights(tmp, policy_only=True)
                state = self._state() | {"policy_only": True} | (extra or {})
                (tmp / checkpoints.STATE_FILE).write_text(json.dumps(state, indent=2))
        self.processes.wait()

    def check_trained(self) -> None:
        """Raise ``TrainingError`` when this session attempted updates and skipped every step
        (a non-finite loss or gradient each time: the optimizer never stepped): the policy is
        the one the session started from, and saving it as the trained one would make a run
        that trained nothing look like a success."""
        skipped = self.state.skipped_updates - self.state.skipped_at_load
        learner = self.learner
        stepped = getattr(learner.optimizer, "steps", 1) or learner.weights.merged_adapters  # a
        # reference refresh merges what was trained and restarts the optimizer
        if skipped > 0 and not stepped:
            raise TrainingError(
                f"All {skipped} update steps of this run were skipped (a non-finite loss or "
                "gradient each time), so nothing was trained; scale the rewards down (PPO: "
                "--set value_norm=true) and train again."
            )

    def _state(self) -> dict[str, Any]:
        return {
            "iteration": self.state.iteration,
            "env_steps": self.state.env_steps,
            "episodes_done": self.state.episodes_done,
            "merged_adapters": len(self.learner.weights.merged_adapters),
            "algo": self.algo,
            "lora": self.config.lora.enabled,
        }

    def _save_weights(self, path: Path, policy_only: bool) -> None:
        """The trained language-model weights, merged adapters, extra modules (a policy
        directory keeps only the action head, without its training statistics) and config."""
        from safetensors.torch import save_file

        path.mkdir(parents=True, exist_ok=True)
        save_file(_contiguous(self.model_state()), str(path / "model.safetensors"))
        for i, state in enumerate(self.learner.weights.merged_adapters):
            save_file(_contiguous(state), str(path / f"merged_{i:03d}.safetensors"))
        for name, module in self.learner.extra_modules.items():
            if policy_only and name != "action_head":
                continue
            state = module.state_dict()
            if policy_only:
                state = {k: v for k, v in state.items() if k.split(".")[-1] not in TRAINING_STATS}
            save_file(_contiguous(state), str(path / f"{name}.safetensors"))
        (path / "config.json").write_text(json.dumps(self.config.to_dict(), indent=2, default=str))

    def model_state(self) -> dict[str, Any]:
        """The trained weights of the model: none (a frozen backbone), the LoRA adapter's, or
        every unique tensor of a full fine-tune."""
        model = self.learner.model
        if not self.config.optim.train_backbone:
            return {}
        if self.config.lora.enabled:
            return lora_state(model)
        state, seen = {}, set()
        for key, value in model.state_dict().items():
            if value.data_ptr() not in seen:  # a tied weight (lm_head = embeddings) once
                seen.add(value.data_ptr())
                state[key] = value
        return state

    def latest_checkpoint(self) -> Path | None:
        return checkpoints.latest(self.run_dir / "checkpoints")

    def load_checkpoint(self, path: str | Path | None = None) -> None:
        """Restore everything :meth:`save_checkpoint` wrote; the next iteration then matches
        the uninterrupted run."""
        import pickle

        from safetensors import SafetensorError

        ckpt = Path(path) if path else self.latest_checkpoint()
        if ckpt is None or not ckpt.exists():
            raise TrainingError(
                f"No checkpoint to resume in {self.run_dir}; drop --resume or point --output at "
                "an earlier run directory."
            )
        checkpoints.check_contained(ckpt, root=None if path else self.run_dir)
        try:
            self._load_checkpoint(ckpt)
        except TrainingError:
            raise  # already one sentence (e.g. another algo's or model's checkpoint)
        except (
            OSError,
            EOFError,
            ValueError,  # json.JSONDecodeError too
            KeyError,
            TypeError,
            RuntimeError,  # torch.load, load_state_dict
            SafetensorError,
            pickle.UnpicklingError,  # torch.load(weights_only=True) of a cut file
        ) as error:
            why = (str(error).splitlines() or [type(error).__name__])[0][:200]
            raise TrainingError(
                f"The checkpoint {ckpt} is damaged ({type(error).__name__}: {why}); delete it to "
                "resume from an earlier one, or start afresh without --resume."
            ) from None

    def _load_checkpoint(self, ckpt: Path) -> None:
        """The body of :meth:`load_checkpoint`, which turns its errors into one sentence."""
        import torch
        from safetensors.torch import load_file

        learner, run_state = self.learner, self.state

        state = json.loads((ckpt / "trainer_state.json").read_text())
        saved = None
        written = state.get("algo")
        if (ckpt / "config.json").exists():
            saved = json.loads((ckpt / "config.json").read_text())
            written, _ = legacy_algo(written, saved)  # PPO with q_critic=true: qac
        if written != self.algo:
            raise TrainingError(
                f"The checkpoint in {ckpt} was written by {written!r}, not "
                f"{self.algo!r}; resume with --algo {written}."
            )
        if saved is not None:  # the same env and model as the run's
            run, model = self.config.run, self.config.policy.model
            asked = {"env_id": run.env_id, "env_kwargs": run.env_kwargs, "model": model}
            checkpoints.check_resume(self.run_dir, saved, asked)
        for i in range(state.get("merged_adapters", 0)):
            merged = load_file(str(ckpt / f"merged_{i:03d}.safetensors"))
            learner.model = learner.policy.model = learner.weights.merge(learner.model, merged)
        model = learner.model
        weights = load_file(str(ckpt / "model.safetensors"), device=str(learner.device))
        if not self.config.optim.train_backbone:
            pass
        elif self.config.lora.enabled:
            from peft import set_peft_model_state_dict

            set_peft_model_state_dict(model, weights)
        else:
            # Every unique tensor, and nothing the model lacks (older checkpoints stored
            # both names of a tied weight).
            saved, needed = set(weights), set(self.model_state())
            if not needed <= saved <= set(model.state_dict()):
                raise TrainingError(
                    f"The checkpoint {ckpt} holds weights for another model "
                    f"({len(needed - saved)} missing, {len(saved - set(model.state_dict()))} "
                    "unexpected); resume with the model it was trained with."
                )
            model.load_state_dict(weights, strict=False)  # tied weights come along
        policy_only = state.get("policy_only", False)
        for name, module in learner.extra_modules.items():
            file = ckpt / f"{name}.safetensors"
            if policy_only and not file.exists():
                continue  # a policy directory keeps the action head only
            module.load_state_dict(load_file(str(file)), strict=not policy_only)
        if policy_only:
            run_state.iteration, run_state.env_steps = state["iteration"], state["env_steps"]
            run_state.episodes_done = state["episodes_done"]
            return
        if (ckpt / REF_HEAD_FILE).exists() and learner.policy.head is not None:
            import copy

            ref_head = copy.deepcopy(learner.policy.head).requires_grad_(False)
            ref_head.load_state_dict(load_file(str(ckpt / REF_HEAD_FILE)))
            learner.weights.ref_head = ref_head
        learner.optimizer = learner.make_optimizer()
        learner.optimizer.load_state_dict(torch.load(ckpt / "optimizer.pt", weights_only=True))
        average = ckpt / AVERAGE_FILE
        learner.average.load_state_dict(load_file(str(average)) if average.exists() else {})
        rng = torch.load(ckpt / "rng.pt", weights_only=True)
        random.setstate(rng["python"])
        kind, keys, pos, has_gauss, gauss = rng["numpy"]
        np.random.set_state((kind, keys.numpy().astype(np.uint32), pos, has_gauss, gauss))
        torch.set_rng_state(rng["torch"])
        if "cuda" in rng and torch.cuda.is_available():
            torch.cuda.set_rng_state_all(rng["cuda"])
        if "policy" in rng and getattr(learner.policy, "generator", None) is not None:
            learner.policy.generator.set_state(rng["policy"])
        run_state.restore(state)
        best = self.run_dir / checkpoints.BEST_POLICY / checkpoints.STATE_FILE
        run_state.best_eval = None
        if best.exists():  # its weights are where the run is now (a run copied or moved)
            run_state.best_eval = json.loads(best.read_text())["best_eval"] | {
                "weights": str(best.parent)
            }
        if (ckpt / MEMO_FILE).exists():  # main process: the features the run had memoised
            memo = torch.load(ckpt / MEMO_FILE, map_location="cpu", weights_only=True)
            learner.policy.load_memo_state(memo)
        algorithm = ckpt / ALGORITHM_FILE
        load_extra_state = getattr(self.algorithm, "load_extra_state", None)
        if load_extra_state is not None:
            load_extra_state(state, load_file(str(algorithm)) if algorithm.exists() else {})
        learner.weights.cache.clear()
        if (ckpt / KEPT_FILE).exists() and self.processes.num == 1:  # last: the weights are
            kept = torch.load(ckpt / KEPT_FILE, map_location=learner.device, weights_only=True)
            learner.policy.load_kept_state(kept)  # as the run goes on


def _contiguous(state: dict[str, Any]) -> dict[str, Any]:
    return {k: v.detach().contiguous().cpu() for k, v in state.items()}


__all__ = ["KEPT_FILE", "MEMO_FILE", "REF_HEAD_FILE", "TRAINING_STATS", "Checkpointer"]
