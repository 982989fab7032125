"""One training throughput config, spelled out, run at two commits in turn (issue 51 item 4).

The config is :data:`CONFIG`: every setting of the PPO trainer written out, flag by flag, with
no defaults and no recipe lookup (a setting one commit's config does not know is in
:data:`ONLY_WHERE_KNOWN`, passed only where it is). The benchmark's axes are the model
(``--models``) and the mode (``--modes``); everything else is fixed:

* PPO; LoRA r 16 (alpha 32) on the last 8 decoder layers (the tiny test model has 2: all of
  them); no action head; the LM trains;
* Text-Blackjack-v1, 256 envs, 256 episodes per update, 4 update epochs (target KL 0.05 may
  stop earlier: ``epochs run`` says), minibatch 32, micro-batch 16, max_new_tokens 24;
* seed 0, fp32 on the CPU, one torch thread (``--threads``), evaluation off, checkpoints off,
  the metrics logger on (as ``llmgym train`` has it).

Each (model, mode, commit) runs in its own process with ``PYTHONPATH`` on a detached
``git worktree`` of that commit (``HEAD`` too: the committed tree, not the working copy), with
this repository's ``.venv`` python. Repeats alternate the commits. A process builds the
trainer (``setup``), then runs ``--iterations`` iterations of ``trainer.run_iteration()``
(collect ``episodes_per_update`` episodes, one PPO update, log). **End to end** = the env
steps of iterations 2..N / the wall seconds from the end of iteration 1 to the end of the
last (iteration 1 is reported apart: it pays the first tokenizations and allocations). Acting
and the update are also timed in CPU seconds (``time.process_time``: one torch thread, so the
work done, whatever else runs on the shared machine). ``--evaluate MODE`` times one
evaluation (exact: Blackjack's greedy policy value from the env's model) after the
iterations, on the first repeat.

FLOPs are counted by hooks on the model: ``2 x params x tokens`` of each decoder layer that
computes (non-padding tokens; a layer the frozen-trunk fast path skips computes nothing),
``2 x output-layer params`` per row of logits, and with gradient twice that again for the
layers at or above the first trained one and the output layer. Share of peak = counted
FLOPs / wall seconds / a GEMM peak in the config's dtype (``--dtype``) measured in the same
run.

    python benchmarks/train_throughput.py --models tiny --modes score generate \\
        --commits a2d92ac HEAD --iterations 3 --repeats 2 --evaluate score generate --append
    python benchmarks/train_throughput.py --models smollm2-135m --modes score generate \\
        --commits a2d92ac HEAD --iterations 2 --repeats 1 --evaluate score --append

On a GPU (issue 51's GPU rows, run by ``make test-gpu``): ``--commits here`` measures the tree
in place (no worktree: the GPU machine gets a copy without git's history), ``--device cuda
--dtype bfloat16`` run the same config there, a model may be a path (random-init weights of an
architecture, built from its config), and the share of peak is of a bf16 GEMM measured in the
same run::

    python benchmarks/train_throughput.py --commits here --device cuda --dtype bfloat16 \\
        --threads 8 --models /tmp/smollm2-random --modes score generate --iterations 3 \\
        --output benchmarks/results/gpu/train_throughput.json

Prints the markdown tables and writes ``benchmarks/results/train_throughput.json``
(``--append`` keeps the rows of other (model, mode) pairs already there).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results" / "train_throughput.json"
PYTHON = ROOT / ".venv" / "bin" / "python"

#: The config, every flat key of the PPO trainer's config (``llmgym.rl.config.flat_view``).
#: ``model`` and ``mode`` are the benchmark's axes; ``num_threads`` is ``--threads``;
#: ``output_dir`` a scratch directory per run.
CONFIG: dict[str, Any] = {
    # run
    "env_id": "Text-Blackjack-v1",
    "env_kwargs": {},
    "num_envs": 256,
    "episodes_per_update": 256,
    "total_env_steps": 10**9,  # never the limit: the benchmark stops after --iterations
    "total_episodes": 0,
    "seed": 0,
    "device": "cpu",
    "checkpoint_every": 0,  # checkpoints off
    "log_every": 1,
    "collapse_warn": True,
    "kl_warn": 2.0,
    "progress": False,
    # policy
    "backend": "hf",
    "vllm_url": "",
    "vllm_model": "",
    "dtype": "float32",
    "backbone": "pretrained",
    "history": 0,
    "temperature": 1.0,
    "top_p": 1.0,
    "max_new_tokens": 24,
    "think": False,
    "prefill": True,
    "prefix_cache": True,
    "prefix_cache_grad": True,
    "stop_at_answer": True,
    "micro_batch_size": 16,
    "normalization": "sum",
    # (policy.greedy and policy.seed are the trainer's: sampling while training, seeded by seed)
    # heads: no action head (the value head reads the LM's hidden state)
    "action_head": False,
    "lm_prior": True,
    "head_layers": None,
    "head_lr": None,
    "head_optimizer": "sgd",
    "head_whiten_eps": 0.3,
    "value_hidden": 128,
    "value_lr": 0.001,
    "value_detach": True,
    "value_norm": False,
    "value_norm_decay": 0.9,
    "value_whiten": False,
    # LoRA
    "lora": True,
    "lora_r": 16,
    "lora_alpha": 32,
    "lora_dropout": 0.0,
    "lora_layers": 8,
    "lora_target_modules": None,
    "lora_init": "random",
    # optimizer
    "train_backbone": True,
    "learning_rate": 0.0005,
    "lm_optimizer": "adamw",
    "weight_decay": 0.0,
    "max_grad_norm": 1.0,
    "anneal_lr": False,
    "center_grad": False,
    "average_decay": 0.0,
    "mirror": False,
    # PPO
    "update_epochs": 4,
    "minibatch_size": 32,
    "clip_coef": 0.2,
    "clip_vloss": False,
    "ent_coef": 0.01,
    "min_entropy": 0.05,
    "vf_coef": 0.5,
    "gamma": 1.0,
    "gae_lambda": 0.95,
    "norm_adv": True,
    "target_kl": 0.05,
    "kl_coef": 0.0,
    # evaluation: off during the iterations; --evaluate times one exact evaluation after them
    "eval_every": 0,
    "eval_start": False,
    "eval_episodes": 100,
    "eval_greedy": True,
    "eval_method": "exact",
    "eval_stop_at": None,
    # SFT warm start: none
    "sft": "none",
    "sft_episodes": 200,
    "sft_epochs": 8,
    "sft_batch_size": 8,
    "sft_learning_rate": 0.003,
    "sft_during_rl": 0.0,
    "reference_after_sft": True,
}
#: Settings that only some commits' configs have, passed where the config knows them:
#: a2d92ac's PPO carries the Q-critic's switches (HEAD moved them to the ``qac`` algorithm);
#: HEAD's config records the recipe it came from (none here).
ONLY_WHERE_KNOWN: dict[str, Any] = {
    "q_critic": False,
    "q_ridge": 1.0,
    "q_step": 1.0,
    "q_target": "mirror",
    "q_window": 0,
    "recipe": "",
}
AXES = ("model", "mode", "num_threads", "output_dir")


# ---------------------------------------------------------------------------------------------
# One measurement (a subprocess with PYTHONPATH on the commit's worktree)


class FlopCounter:
    """Non-padding tokens and FLOPs of every forward of ``base`` (a Llama-style causal LM), by
    phase (``act``/``update``/``eval``) and by whether autograd records it."""

    def __init__(self, base: Any) -> None:
        import torch

        self.torch = torch
        self.phase = "act"
        self.tokens: dict[str, int] = {}
        self.flops: dict[str, float] = {}
        self.current = 0
        blocks = list(base.model.layers)
        trains = [any(p.requires_grad for p in b.parameters()) for b in blocks]
        self.first_trained = trains.index(True) if True in trains else len(blocks)
        self.handles = [base.model.register_forward_pre_hook(self._forward, with_kwargs=True)]
        for i, block in enumerate(blocks):
            size = sum(p.numel() for p in block.parameters())
            self.handles.append(block.register_forward_pre_hook(self._layer(block, size, i)))
        head = base.get_output_embeddings()
        self.head_params = sum(p.numel() for p in head.parameters())
        self.handles.append(head.register_forward_pre_hook(self._head))

    def _forward(self, module: Any, args: tuple, kwargs: dict) -> None:
        from throughput import forward_tokens

        real, positions = forward_tokens(args, kwargs)
        self.current = real
        grad = "grad" if self.torch.is_grad_enabled() else "nograd"
        self._add(self.tokens, f"{self.phase}_{grad}", real)
        self._add(self.tokens, f"{self.phase}_positions", positions)

    def _layer(self, block: Any, size: int, index: int) -> Any:
        def hook(module: Any, args: tuple) -> None:
            if "forward" in block.__dict__:  # stubbed out by a fast path: computes nothing
                return
            self._add(self.flops, self.phase, 2.0 * size * self.current)
            if index >= self.first_trained and self.torch.is_grad_enabled():
                self._add(self.flops, self.phase, 4.0 * size * self.current)

        return hook

    def _head(self, module: Any, args: tuple) -> None:
        rows = args[0].numel() // args[0].shape[-1]
        grad = 2 if self.torch.is_grad_enabled() else 1
        self._add(self.flops, self.phase, 2.0 * grad * self.head_params * rows)

    @staticmethod
    def _add(store: dict, key: str, n: float) -> None:
        store[key] = store.get(key, 0) + n

    def remove(self) -> None:
        for handle in self.handles:
            handle.remove()


def _counters(trainer: Any) -> Any:
    """Where the trainer keeps its env-step count: ``trainer.state`` since the engine was
    composed, the trainer itself at a2d92ac."""
    return getattr(trainer, "state", trainer)


def build_trainer(
    model: str,
    mode: str,
    threads: int,
    output_dir: str,
    device: str = "cpu",
    dtype: str = "float32",
) -> tuple[Any, dict]:
    """The trainer of :data:`CONFIG` (on ``device`` in ``dtype``) at whatever commit ``llmgym``
    imports from, and a note of the settings: those passed, those only some commits know, and
    any of the commit's own settings the config leaves at its default (``unspelled``; none at
    a2d92ac and HEAD)."""
    import torch

    from llmgym.rl import config_class, make_trainer
    from llmgym.rl.config import flat_view

    torch.set_num_threads(threads)
    known = set(flat_view(config_class("ppo")().to_dict()))
    settings = dict(CONFIG) | {
        "model": model,
        "mode": mode,
        "num_threads": threads,
        "output_dir": output_dir,
        "device": device,
        "dtype": dtype,
    }
    unknown = sorted(set(settings) - known)
    if unknown:
        raise SystemExit(f"This commit's PPO config has no {unknown}: map them in the benchmark.")
    settings |= {k: v for k, v in ONLY_WHERE_KNOWN.items() if k in known}
    trainer = make_trainer("ppo", **settings)
    flat = flat_view(trainer.config.to_dict())
    differs = {k: [v, flat[k]] for k, v in settings.items() if flat.get(k) != v}
    if differs:
        raise SystemExit(f"The built config differs from the one asked: {differs}")
    return trainer, {
        "passed": sorted(settings),
        "unspelled": sorted(known - set(settings)),
        "only_where_known": sorted(set(ONLY_WHERE_KNOWN) & known),
    }


def attach_logger(trainer: Any) -> None:
    """The metrics logger ``Trainer.train`` opens (metrics.jsonl, metrics.csv, TensorBoard)."""
    from llmgym.rl.logger import MetricsLogger

    trainer.run_dir.mkdir(parents=True, exist_ok=True)
    trainer.logger = MetricsLogger(trainer.run_dir, trainer.config.to_dict())


def timed_phases(trainer: Any, counter: FlopCounter | None) -> dict[str, float]:
    """Wrap ``trainer.collect`` (acting) and ``trainer.train_on_episodes`` (the update) to add
    their wall and CPU seconds to the returned dict, and to set the counter's phase."""
    clock = {"act_s": 0.0, "act_cpu_s": 0.0, "update_s": 0.0, "update_cpu_s": 0.0}

    def wrap(name: str, key: str) -> None:
        inner = getattr(trainer, name)

        def timed(*args: Any, **kwargs: Any) -> Any:
            if counter is not None:
                counter.phase = key
            wall, cpu = time.perf_counter(), time.process_time()
            try:
                return inner(*args, **kwargs)
            finally:
                clock[f"{key}_s"] += time.perf_counter() - wall
                clock[f"{key}_cpu_s"] += time.process_time() - cpu

        setattr(trainer, name, timed)

    wrap("collect", "act")
    wrap("train_on_episodes", "update")
    return clock


def measure(args: argparse.Namespace) -> dict[str, Any]:
    """Setup, ``args.iterations`` iterations, and (``args.evaluate``) one evaluation."""
    wall, cpu = time.perf_counter(), time.process_time()
    import torch

    import llmgym

    import_s = time.perf_counter() - wall
    trainer, settings = build_trainer(
        args.model, args.mode, args.threads, args.output_dir, args.device, args.dtype
    )
    attach_logger(trainer)
    setup = {"s": time.perf_counter() - wall, "cpu_s": time.process_time() - cpu}
    setup["import_s"] = import_s
    base = trainer.model.get_base_model() if hasattr(trainer.model, "get_base_model") else None
    base = base if base is not None else trainer.model
    counter = FlopCounter(base)
    clock = timed_phases(trainer, counter)
    stats = trainer.policy.stats
    iterations = []
    for _ in range(args.iterations):
        before = dict(clock)
        tokens_before = dict(stats)
        steps_before = _counters(trainer).env_steps
        flops_before = dict(counter.flops)
        wall, cpu = time.perf_counter(), time.process_time()
        metrics = trainer.run_iteration()
        end = time.perf_counter()
        iterations.append(
            {
                "env_steps": _counters(trainer).env_steps - steps_before,
                "end": end,
                "s": end - wall,
                "cpu_s": time.process_time() - cpu,
                **{k: clock[k] - before[k] for k in clock},
                "epochs_run": metrics.get("losses/epochs"),
                "policy_stats": {k: stats[k] - tokens_before.get(k, 0) for k in stats},
                "flops": {k: v - flops_before.get(k, 0.0) for k, v in counter.flops.items()},
                "return": metrics.get("charts/episodic_return"),
            }
        )
    evaluation = None
    if args.evaluate:
        counter.phase = "eval"
        wall, cpu = time.perf_counter(), time.process_time()
        result = trainer.evaluate()
        evaluation = {
            "kind": "exact" if trainer.uses_exact_eval() else "sampled",
            "s": time.perf_counter() - wall,
            "cpu_s": time.process_time() - cpu,
            "value": result.get("mean_return"),
            "summary": {k: v for k, v in result.items() if isinstance(v, (int, float, str))},
        }
    counter.remove()
    if trainer.logger is not None:
        trainer.logger.close()
    return {
        "llmgym_file": llmgym.__file__,
        "torch": torch.__version__,
        "torch_threads": torch.get_num_threads(),
        "settings": settings,
        "params": sum(p.numel() for p in base.parameters()),
        "trainable_params": sum(p.numel() for p in trainer.model.parameters() if p.requires_grad),
        "first_trained_layer": counter.first_trained,
        "layers": len(base.model.layers),
        "setup": setup,
        "iterations": iterations,
        "tokens": counter.tokens,
        "evaluation": evaluation,
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }


# ---------------------------------------------------------------------------------------------
# The driver


def git(*args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=ROOT, check=True, capture_output=True, text=True
    ).stdout.strip()


def tree(name: str) -> tuple[str, Path, bool]:
    """(the commit, its source tree, whether a worktree was made for it): ``here`` is this
    tree in place (its commit from git where there is one, else ``unknown``), any other name a
    detached worktree of that commit."""
    if name != "here":
        sha = git("rev-parse", "--verify", f"{name}^{{commit}}")
        return (sha, *worktree(sha))
    try:
        return git("rev-parse", "HEAD"), ROOT, False
    except (OSError, subprocess.CalledProcessError):
        return "unknown", ROOT, False


def worktree(sha: str) -> tuple[Path, bool]:
    """A detached worktree of ``sha`` under /tmp (made if missing); whether it was made."""
    path = Path(f"/tmp/llmgym-bench-{sha[:12]}")
    if (path / "llmgym" / "__init__.py").exists():
        return path, False
    git("worktree", "add", "--detach", str(path), sha)
    return path, True


def with_path(path: Path, env: dict[str, str]) -> str:
    """``PYTHONPATH`` with the measured tree first (wheels installed beside it stay on it)."""
    return os.pathsep.join([str(path), *filter(None, env.get("PYTHONPATH", "").split(os.pathsep))])


def summarize(row: dict[str, Any], peak: float) -> dict[str, Any]:
    """End to end over iterations 2..N; acting and update per iteration; FLOP share."""
    its = row["iterations"]
    timed = its[1:] if len(its) > 1 else its
    steps = sum(i["env_steps"] for i in timed)
    wall = its[-1]["end"] - its[0]["end"] if len(its) > 1 else its[0]["s"]
    n = len(timed)
    act_s, upd_s = sum(i["act_s"] for i in timed), sum(i["update_s"] for i in timed)
    act_cpu, upd_cpu = sum(i["act_cpu_s"] for i in timed), sum(i["update_cpu_s"] for i in timed)
    cpu = sum(i["cpu_s"] for i in timed)
    flops = sum(sum(i["flops"].values()) for i in timed)
    epochs = [i["epochs_run"] for i in timed if i["epochs_run"] is not None]
    return {
        "timed_iterations": n,
        "env_steps": steps,
        "wall_s": wall,
        "cpu_s": cpu,
        "env_steps_per_s": steps / wall,
        "env_steps_per_cpu_s": steps / cpu,
        "act_s_per_iteration": act_s / n,
        "act_cpu_s_per_iteration": act_cpu / n,
        "update_s_per_iteration": upd_s / n,
        "update_cpu_s_per_iteration": upd_cpu / n,
        "other_s_per_iteration": (wall - act_s - upd_s) / n,
        "update_share": upd_s / wall,
        "steps_per_iteration": steps / n,
        "epochs_run": sum(epochs) / len(epochs) if epochs else None,
        "iteration1_s": its[0]["s"],
        "setup_s": row["setup"]["s"],
        "gflop_per_step": flops / steps / 1e9,
        "gflop_per_s": flops / wall / 1e9,
        "share_of_peak": flops / wall / 1e9 / peak,
        "share_of_peak_cpu_time": flops / cpu / 1e9 / peak,
    }


def best_rows(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per (model, mode, commit): the repeat with the most env steps per wall second, with
    the best rate per CPU second among the repeats beside it."""
    groups: dict[tuple, list] = {}
    for r in rows:
        groups.setdefault((r["model"], r["mode"], r["commit"]), []).append(r)
    out = []
    for group in groups.values():
        best = max(group, key=lambda r: r["summary"]["env_steps_per_s"])
        cpu = max(r["summary"]["env_steps_per_cpu_s"] for r in group)
        evals = [r["evaluation"] for r in group if r.get("evaluation")]
        out.append(
            best
            | {"repeats": len(group), "best_cpu_rate": cpu, "eval": evals[0] if evals else None}
        )
    order = {"tiny": 0, "smollm2-135m": 1}
    return sorted(out, key=lambda r: (order.get(r["model"], 2), r["model"], r["mode"], r["order"]))


def tables(rows: list[dict[str, Any]]) -> str:
    best = best_rows(rows)
    lines = [
        "| model | mode | commit | repeats | timed its | steps/it | env-steps/s (wall) "
        "| env-steps/CPU s | act s/it (CPU) | update s/it (CPU) | update share | epochs run "
        "| setup s | iter 1 s | exact eval s (CPU) | GFLOP/step | of peak |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in best:
        s = r["summary"]
        ev = r["eval"]
        evs = f"{ev['s']:.1f} ({ev['cpu_s']:.1f})" if ev else "not run"
        lines.append(
            f"| {r['model']} | {r['mode']} | {r['commit']} ({r['sha'][:7]}) | {r['repeats']} | "
            f"{s['timed_iterations']} | {s['steps_per_iteration']:.0f} | "
            f"{s['env_steps_per_s']:.2f} | {r['best_cpu_rate']:.2f} | "
            f"{s['act_s_per_iteration']:.1f} ({s['act_cpu_s_per_iteration']:.1f}) | "
            f"{s['update_s_per_iteration']:.1f} ({s['update_cpu_s_per_iteration']:.1f}) | "
            f"{100 * s['update_share']:.0f} % | "
            f"{s['epochs_run'] if s['epochs_run'] is None else round(s['epochs_run'], 1)} | "
            f"{s['setup_s']:.1f} | {s['iteration1_s']:.1f} | {evs} | "
            f"{s['gflop_per_step']:.3f} | {100 * s['share_of_peak']:.1f} % |"
        )
    lines += ["", *ratio_table(best)]
    return "\n".join(lines)


def ratio_table(best: list[dict[str, Any]]) -> list[str]:
    """The later commit against the first, per (model, mode): end to end by wall clock and
    by CPU time, and the update alone."""
    lines = [
        "| model | mode | ratio | end to end (wall) | end to end (CPU) | update (wall) "
        "| update (CPU) | acting (wall) | acting (CPU) |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    groups: dict[tuple, list] = {}
    for r in best:
        groups.setdefault((r["model"], r["mode"]), []).append(r)
    for (model, mode), group in groups.items():
        group.sort(key=lambda r: r["order"])
        first = group[0]
        for other in group[1:]:
            a, b = first["summary"], other["summary"]
            gain = {
                k: (a[k] / a["steps_per_iteration"]) / (b[k] / b["steps_per_iteration"])
                for k in (
                    "update_s_per_iteration",
                    "update_cpu_s_per_iteration",
                    "act_s_per_iteration",
                    "act_cpu_s_per_iteration",
                )
            }
            lines.append(
                f"| {model} | {mode} | {other['commit']} / {first['commit']} | "
                f"{b['env_steps_per_s'] / a['env_steps_per_s']:.2f}x | "
                f"{other['best_cpu_rate'] / first['best_cpu_rate']:.2f}x | "
                f"{gain['update_s_per_iteration']:.2f}x | "
                f"{gain['update_cpu_s_per_iteration']:.2f}x | "
                f"{gain['act_s_per_iteration']:.2f}x | {gain['act_cpu_s_per_iteration']:.2f}x |"
            )
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", nargs="+", default=["tiny"], help="tiny, smollm2-135m, ...")
    parser.add_argument("--modes", nargs="+", default=["score", "generate"])
    parser.add_argument(
        "--commits", nargs="+", default=["a2d92ac", "HEAD"], help="Commits, or here: this tree."
    )
    parser.add_argument("--iterations", type=int, default=4, help="Iteration 1 is not timed.")
    parser.add_argument("--repeats", type=int, default=1, help="Best of these, commits in turn.")
    parser.add_argument(
        "--evaluate", nargs="*", default=[], help="Modes whose first repeat times one evaluation."
    )
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--device", default="cpu", help="cpu, cuda or cuda:N (the config's).")
    parser.add_argument("--dtype", default="float32", help="The config's dtype (and the GEMM's).")
    parser.add_argument("--output", type=Path, default=RESULTS)
    parser.add_argument("--append", action="store_true", help="Keep other (model, mode) rows.")
    parser.add_argument("--workdir", default="/tmp/llmgym-train-throughput")
    parser.add_argument("--keep-worktrees", action="store_true")
    parser.add_argument("--measure", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--model", help=argparse.SUPPRESS)
    parser.add_argument("--mode", help=argparse.SUPPRESS)
    parser.add_argument("--output-dir", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.measure:
        args.evaluate = bool(args.evaluate)
        print(json.dumps(measure(args)))
        return

    sys.path.insert(0, str(Path(__file__).parent))
    from throughput import gemm_peak, machine

    python = str(PYTHON if PYTHON.exists() else Path(sys.executable))
    env = dict(os.environ, OMP_NUM_THREADS=str(args.threads), MKL_NUM_THREADS=str(args.threads))
    trees, made = {}, []
    for name in args.commits:
        sha, path, new = tree(name)
        trees[name] = (sha, path)
        made += [path] if new else []
    described = machine(args.threads, args.device)
    size = 8192 if args.device.startswith("cuda") else 1024

    def peak_now() -> float:
        return gemm_peak(args.threads, size=size, device=args.device, dtype=args.dtype)

    peaks = [peak_now()]
    rows = []
    try:
        for repeat in range(args.repeats):
            for model in args.models:
                for mode in args.modes:
                    for order, name in enumerate(args.commits):
                        sha, path = trees[name]
                        out = Path(args.workdir) / f"{Path(model).name}-{mode}-{sha[:7]}-{repeat}"
                        evaluate = repeat == 0 and mode in args.evaluate
                        command = [
                            python, __file__, "--measure", "--model", model, "--mode", mode,
                            "--threads", str(args.threads), "--iterations", str(args.iterations),
                            "--output-dir", str(out), "--device", args.device,
                            "--dtype", args.dtype, *(["--evaluate", "yes"] if evaluate else []),
                        ]  # fmt: skip
                        load = os.getloadavg()[0]
                        start = time.perf_counter()
                        done = subprocess.run(
                            command, env=env | {"PYTHONPATH": with_path(path, env)}, cwd=path,
                            capture_output=True, text=True,
                        )  # fmt: skip
                        if done.returncode:
                            sys.stderr.write(done.stderr[-4000:])
                            raise SystemExit(f"{model} {mode} {name}: exit {done.returncode}")
                        row = json.loads(done.stdout.strip().splitlines()[-1])
                        assert row["llmgym_file"].startswith(str(path)), row["llmgym_file"]
                        row |= {
                            "model": model, "mode": mode, "commit": name, "sha": sha,
                            "order": order, "repeat": repeat, "load_at_start": load,
                            "process_s": time.perf_counter() - start,
                        }  # fmt: skip
                        peaks.append(peak_now())
                        rows.append(row)
                        its = ", ".join(
                            f"{i['env_steps']} steps {i['s']:.1f} s" for i in row["iterations"]
                        )
                        ev = row["evaluation"]
                        ev = f"; eval {ev['s']:.1f} s ({ev['value']})" if ev else ""
                        print(
                            f"[{repeat}] {model} {mode} {name}: setup {row['setup']['s']:.1f} s; "
                            f"{its}{ev}; load {load:.1f}",
                            flush=True,
                        )
    finally:
        if not args.keep_worktrees:
            for path in made:
                git("worktree", "remove", "--force", str(path))
    peak = max(peaks)
    for r in rows:
        r["summary"] = summarize(r, peak)
    report = {
        "machine": described,
        "gemm_peak_gflop_per_s": peak,
        "gemm_dtype": args.dtype,
        "gemm_peaks_measured": peaks,
        "config": CONFIG,
        "only_where_known": ONLY_WHERE_KNOWN,
        "settings": {
            k: v
            for k, v in vars(args).items()
            if k not in {"measure", "model", "mode", "output_dir"}
        }
        | {"output": str(args.output)},
        "command": "python benchmarks/train_throughput.py " + " ".join(sys.argv[1:]),
        "flop_model": (
            "forward: 2 x params x non-padding tokens of each decoder layer that computes + 2 x "
            "output-layer params per row of logits; with gradient, twice that again for the "
            "layers at or above the first trained one and for the output layer. Attention "
            "scores, norms, embeddings and the value head are not counted."
        ),
        "results": rows,
    }
    if args.append and args.output.exists():
        old = json.loads(args.output.read_text())
        ran = {(r["model"], r["mode"]) for r in rows}
        kept = [r for r in old["results"] if (r["model"], r["mode"]) not in ran]
        report["earlier_runs"] = old.get("earlier_runs", []) + [
            {k: old[k] for k in ("machine", "gemm_peak_gflop_per_s", "command") if k in old}
        ]
        report["results"] = kept + rows
    report["table"] = tables(report["results"])
    print(f"{described}; {args.dtype} GEMM peak {peak:.0f} GFLOP/s (max of {len(peaks)})")
    print(report["table"])
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()
