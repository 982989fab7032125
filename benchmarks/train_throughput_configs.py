"""Training throughput: env steps per second of whole PPO iterations (act + update) with the
embedded SmolLM2-135M, and the share of the FLOP ceiling they reach.

Three configurations on Text-Blackjack-v1 and Text-CartPole-v1, each in its own process:

* ``score-head``: score mode, frozen backbone, only the action head (and the value head)
  learns (``train_backbone=false``; features memoised per prompt);
* ``score-lora-head``: score mode, LoRA in the last ``lora_layers`` layers plus the head;
* ``generate-lora``: generate mode, LoRA (generate mode has no action head);
* ``score-head-layer8``: ``score-head`` with the head alone (``lm_prior=false``) on hidden
  state 8, so each forward stops after 8 of the 30 decoder layers (not in the default set);
* ``score-lora4-head``: ``score-lora-head`` with LoRA in the last 4 layers instead of 8 (a
  recipe change: half the layers the update runs; not in the default set);
* ``score-lora-head-bf16``: ``score-lora-head`` with the model's weights in bfloat16 (the LoRA
  weights stay fp32; a precision change, compared with ``score-lora-head``'s fp32 old path
  where that ran; not in the default set).

Each iteration runs ``trainer.run_iteration()`` (collect ``episodes_per_update`` episodes,
one PPO update; no evaluation, no checkpoint). ``--paths old new`` runs each configuration
twice on the identical recipe (same seed, trained layers, epochs, minibatch size, episodes per
update): ``old`` with the frozen-trunk fast path switched off (every pass through the whole
model), ``new`` with it (``llmgym/policy/backends/trunk.py``: the top layers alone over the
kept trunk states), and prints how much faster the update and the whole iteration are, by
wall clock and by this process's CPU time (one torch thread: the work done, whatever else runs
on a shared machine).

Tokens are counted two ways: the policy's ``stats`` while acting (prompt tokens run through
the model + generated tokens), and hooks on the model: every non-padding position a forward
computes, split into acting and update, with and without gradient, and the layers it runs
through. FLOPs, per forward: ``2 x params x tokens`` of each decoder layer that computes (the
trunk's layers are skipped on the fast path, and a forward that stops early skips those
above) plus ``2 x output-layer params`` per row of logits; backward, with gradient: twice the
forward of the decoder layers at or above the first trained one (``4 x params x tokens``)
plus the output layer's input gradient; none when the backbone is frozen. The ceiling is an
fp32 GEMM peak measured in the same run. Writes ``benchmarks/results/train_throughput_configs.json``
and prints a markdown table.

    python benchmarks/train_throughput_configs.py --iterations 2   # ~10 min on a 2-core CPU
    python benchmarks/train_throughput_configs.py --quick          # tiny random model, smoke run
    python benchmarks/train_throughput_configs.py --iterations 2 --envs Text-Blackjack-v1 \
        --configs score-lora-head generate-lora --paths old new \
        --output benchmarks/results/train_throughput_trunk.json   # the fast path's gain
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

sys.path.insert(0, str(Path(__file__).parent))
from throughput import forward_tokens, gemm_peak, machine  # noqa: E402

RESULTS = Path(__file__).parent / "results" / "train_throughput.json"
ENVS = ("Text-Blackjack-v1", "Text-CartPole-v1")
#: name -> TrainConfig overrides (the head-only recipe of the RL runs: update_epochs=4,
#: temperature 2, ent_coef 0.05).
CONFIGS: dict[str, dict[str, Any]] = {
    "score-head": {"mode": "score", "train_backbone": False, "action_head": True},
    "score-lora-head": {"mode": "score", "train_backbone": True, "action_head": True},
    "generate-lora": {"mode": "generate", "train_backbone": True, "action_head": False},
    "score-head-layer8": {
        "mode": "score",
        "train_backbone": False,
        "action_head": True,
        "lm_prior": False,
        "head_layers": [8],
    },
    "score-lora4-head": {
        "mode": "score",
        "train_backbone": True,
        "action_head": True,
        "lora_layers": 4,
    },
    "score-lora-head-bf16": {
        "mode": "score",
        "train_backbone": True,
        "action_head": True,
        "dtype": "bfloat16",
    },
}
COMMON = {"update_epochs": 4, "temperature": 2.0, "ent_coef": 0.05}
#: Episodes per iteration: Blackjack episodes last ~1.5 steps, CartPole ones ~20.
EPISODES = {"Text-Blackjack-v1": 32, "Text-CartPole-v1": 4}
#: TrainConfig fields copied into the results.
REPORTED_FIELDS = (
    "mode",
    "train_backbone",
    "action_head",
    "lm_prior",
    "head_layers",
    "lora",
    "lora_r",
    "lora_layers",
    "num_envs",
    "episodes_per_update",
    "update_epochs",
    "micro_batch_size",
    "minibatch_size",
    "prefix_cache_grad",
    "max_new_tokens",
    "dtype",
)


class TokenCounter:
    """Counts the non-padding positions each forward of ``base`` (a causal LM) computes, by
    phase and by whether autograd records it, and the FLOPs of the decoder layers that run
    (a layer the fast path stubs out does not) and of the output layer."""

    def __init__(self, base: Any) -> None:
        import torch

        from llmgym.policy.backends.trunk import decoder_layers, first_trained_layer

        self.torch = torch
        self.phase = "act"
        self.counts: dict[str, int] = {}
        self.flops: dict[str, float] = {}
        self.tokens = 0  # the forward under way: its non-padding positions
        blocks = decoder_layers(base)
        self.first = first_trained_layer(base, blocks) if blocks is not None else 0
        decoder = base.model if blocks is not None else base
        self.handles = [decoder.register_forward_pre_hook(self._forward, with_kwargs=True)]
        for i, block in enumerate(blocks if blocks is not None else []):
            size = sum(p.numel() for p in block.parameters())
            hook = self._layer(block, size, i >= self.first)
            self.handles.append(block.register_forward_pre_hook(hook))
        head = base.get_output_embeddings()
        self.head_params = sum(p.numel() for p in head.parameters())
        self.handles.append(head.register_forward_pre_hook(self._head))
        self.depth = len(blocks) if blocks is not None else 1

    def _forward(self, module: Any, args: tuple, kwargs: dict) -> None:
        real, positions = forward_tokens(args, kwargs)
        self.tokens = real
        grad = "grad" if self.torch.is_grad_enabled() else "nograd"
        self._add(f"{self.phase}_{grad}", real)  # tokens (padding left out)
        self._add(f"{self.phase}_computed", positions)  # positions, padding included

    def _layer(self, block: Any, size: int, trained: bool) -> Any:
        def hook(module: Any, args: tuple) -> None:
            if "forward" in block.__dict__:  # stubbed out by the fast path: nothing computed
                return
            self._flop("forward", 2 * size * self.tokens)
            self._add(f"{self.phase}_layer_tokens", self.tokens)
            if trained and self.torch.is_grad_enabled():
                self._flop("backward", 4 * size * self.tokens)

        return hook

    def _head(self, module: Any, args: tuple) -> None:
        rows = args[0].numel() // args[0].shape[-1]
        self._flop("forward", 2 * self.head_params * rows)
        if self.torch.is_grad_enabled():
            self._flop("backward", 2 * self.head_params * rows)

    def _add(self, key: str, n: int) -> None:
        self.counts[key] = self.counts.get(key, 0) + int(n)

    def _flop(self, kind: str, n: float) -> None:
        key = f"{self.phase}_{kind}"
        self.flops[key] = self.flops.get(key, 0.0) + float(n)

    def remove(self) -> None:
        for handle in self.handles:
            handle.remove()


def span_params(model: Any, lora_layers: int) -> int:
    """Parameters of the layers a LoRA gradient flows back through: the adapted (last
    ``lora_layers``) decoder layers and the final norm."""
    layers = model.model.layers
    first = len(layers) - lora_layers if 0 < lora_layers < len(layers) else 0
    modules = list(layers[first:]) + [model.model.norm]
    return sum(p.numel() for m in modules for p in m.parameters())


def forward_params(model: Any, flat: dict[str, Any]) -> int:
    """Parameters a forward pass runs through: all, or where the head alone reads early hidden
    states, the decoder layers below the deepest one it reads."""
    from llmgym.policy.backends.hf import decoder_layers, stop_before

    blocks = decoder_layers(model)
    stop = stop_before(len(blocks), flat["head_layers"] or [-1]) if blocks is not None else None
    if flat["action_head"] and not flat["lm_prior"] and stop is not None:
        return sum(p.numel() for block in blocks[:stop] for p in block.parameters())
    return sum(p.numel() for p in model.parameters())


def phase(env_id: str, name: str, path: str, args: argparse.Namespace) -> dict[str, Any]:
    """Build the trainer, run ``args.iterations`` iterations on the ``path`` (``old``: the
    fast path off, ``new``: on), return the measurements."""
    import torch

    from llmgym.policy.backends import trunk
    from llmgym.rl import make_trainer
    from llmgym.rl.config import flat_view

    trunk.FROZEN_TRUNK = path == "new"
    torch.set_num_threads(args.threads)
    episodes = args.episodes or EPISODES[env_id]
    start = time.perf_counter()
    trainer = make_trainer(
        "ppo",
        env_id=env_id,
        model=args.model,
        device=args.device,
        num_envs=min(8, episodes),
        episodes_per_update=episodes,
        total_env_steps=10**9,
        eval_every=0,
        checkpoint_every=0,
        progress=False,
        num_threads=args.threads,
        output_dir=str(Path(args.workdir) / f"{env_id}-{name}"),
        seed=0,
        **COMMON,
        **CONFIGS[name],
    )
    setup_s = time.perf_counter() - start
    cfg = trainer.config
    base = (
        trainer.model.get_base_model()
        if hasattr(trainer.model, "get_base_model")
        else trainer.model
    )
    params = forward_params(base, flat_view(cfg.to_dict()))
    counter = TokenCounter(base)
    collect = trainer.collect
    stats_act = dict.fromkeys(trainer.policy.stats, 0)

    train_on_episodes = trainer.train_on_episodes
    cpu = {"act": 0.0, "update": 0.0}  # this process's CPU seconds: robust to other jobs

    def counted_collect() -> Any:
        counter.phase = "act"
        before = dict(trainer.policy.stats)
        start = time.process_time()
        try:
            return collect()
        finally:
            cpu["act"] += time.process_time() - start
            for k, v in trainer.policy.stats.items():
                stats_act[k] += v - before[k]
            counter.phase = "update"

    def timed_update(episodes: Any) -> Any:
        start = time.process_time()
        try:
            return train_on_episodes(episodes)
        finally:
            cpu["update"] += time.process_time() - start

    trainer.collect = counted_collect
    trainer.train_on_episodes = timed_update
    iterations = []
    for _ in range(args.iterations):
        steps_before = trainer.state.env_steps
        cpu_before = dict(cpu)
        metrics = trainer.run_iteration()
        iterations.append(
            {
                "env_steps": trainer.state.env_steps - steps_before,
                "act_s": metrics["perf/rollout_s"],
                "update_s": metrics["perf/update_s"],
                "iteration_s": metrics["perf/iteration_s"],
                "act_cpu_s": cpu["act"] - cpu_before["act"],
                "update_cpu_s": cpu["update"] - cpu_before["update"],
                "update_epochs_run": metrics.get("losses/epochs"),
            }
        )
    counter.remove()
    trained_span = span_params(base, cfg.lora.layers) if cfg.optim.train_backbone else 0
    return {
        "env_id": env_id,
        "config": name,
        "path": path,
        "fast_path_used": bool(trainer.policy.backend.trunk.store.entries),
        "trunk_layers": counter.first if counter.first < counter.depth else 0,
        "depth": counter.depth,
        "train_config": {k: flat_view(cfg.to_dict())[k] for k in REPORTED_FIELDS},
        "setup_s": setup_s,
        "iterations": iterations,
        "params": params,
        "trainable_params": sum(p.numel() for p in trainer.learner.trainable_parameters()),
        "backward_span_params": trained_span,
        "policy_stats_act": stats_act,
        "tokens": dict(counter.counts),
        "flops": dict(counter.flops),
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }


def summarize(r: dict[str, Any], peak: float) -> dict[str, Any]:
    """Rates and FLOP shares of one configuration's measurements."""
    its = r["iterations"]
    steps = sum(i["env_steps"] for i in its)
    act_s, update_s = sum(i["act_s"] for i in its), sum(i["update_s"] for i in its)
    wall = act_s + update_s
    act_cpu = sum(i.get("act_cpu_s", i["act_s"]) for i in its)
    update_cpu = sum(i.get("update_cpu_s", i["update_s"]) for i in its)
    t, f = r["tokens"], r["flops"]
    s = r["policy_stats_act"]
    act_tokens_stats = s["prompt_tokens"] + s["generated_tokens"]
    act_tokens = t.get("act_grad", 0) + t.get("act_nograd", 0)
    update_fwd = t.get("update_grad", 0) + t.get("update_nograd", 0)
    grad_tokens = t.get("update_grad", 0) if r["backward_span_params"] else 0
    act_flops = f.get("act_forward", 0.0) + f.get("act_backward", 0.0)
    update_flops = f.get("update_forward", 0.0) + f.get("update_backward", 0.0)
    gflops = (act_flops + update_flops) / wall / 1e9
    return {
        "env_steps": steps,
        "env_steps_per_s": steps / wall,
        "act_env_steps_per_s": steps / act_s,
        "update_env_steps_per_s": steps / update_s,
        "update_s": update_s,
        "act_s": act_s,
        "env_steps_per_cpu_s": steps / (act_cpu + update_cpu),
        "update_env_steps_per_cpu_s": steps / update_cpu,
        "update_cpu_s": update_cpu,
        "act_cpu_s": act_cpu,
        "update_share_of_time": update_s / wall,
        "act_tokens_per_step_stats": act_tokens_stats / steps,
        "act_tokens_per_step_hook": act_tokens / steps,
        "cached_prompt_tokens_per_step": s["cached_tokens"] / steps,
        "trunk_cached_act_tokens_per_step": s.get("trunk_cached_tokens", 0) / steps,
        "update_forward_tokens_per_step": update_fwd / steps,
        "update_layer_tokens_per_step": t.get("update_layer_tokens", 0) / r["depth"] / steps,
        "update_backward_tokens_per_step": grad_tokens / steps,
        "update_gflop_per_step": update_flops / steps / 1e9,
        "model_gflop_per_s": gflops,
        "flop_ceiling_fraction": gflops / peak,
        "flop_ceiling_fraction_cpu": (act_flops + update_flops)
        / (act_cpu + update_cpu)
        / 1e9
        / peak,
        "act_gflop_per_s": act_flops / act_s / 1e9,
        "update_gflop_per_s": update_flops / max(update_s, 1e-9) / 1e9,
    }


def table(rows: list[dict[str, Any]]) -> str:
    """The markdown table printed and stored in the JSON (``upd layer tok/step``: the update's
    tokens times the decoder layers they ran through, over the model's depth)."""
    lines = [
        "| env | config | path | steps/s | act steps/s | update steps/s | update steps/CPU s "
        "| update share "
        "| act tok/step | upd fwd tok/step | upd layer tok/step | upd bwd tok/step "
        "| upd GFLOP/step | GFLOP/s | of peak | of peak (CPU time) | RSS MB |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        s = r["summary"]
        lines.append(
            f"| {r['env_id']} | {r['config']} | {r.get('path', 'old')} | "
            f"{s['env_steps_per_s']:.2f} | {s['act_env_steps_per_s']:.2f} | "
            f"{s['update_env_steps_per_s']:.2f} | {s['update_env_steps_per_cpu_s']:.2f} | "
            f"{100 * s['update_share_of_time']:.0f} % | "
            f"{s['act_tokens_per_step_stats']:.1f} | {s['update_forward_tokens_per_step']:.1f} | "
            f"{s['update_layer_tokens_per_step']:.1f} | "
            f"{s['update_backward_tokens_per_step']:.1f} | {s['update_gflop_per_step']:.2f} | "
            f"{s['model_gflop_per_s']:.1f} | {100 * s['flop_ceiling_fraction']:.1f} % | "
            f"{100 * s['flop_ceiling_fraction_cpu']:.1f} % | "
            f"{r['peak_rss_mb']:.0f} |"
        )
    return "\n".join(lines)


def speedups(rows: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], str]:
    """The new path against the old one for each (env, config) run both ways (a ``-bf16``
    config against its fp32 config's old path where that ran): how many times faster the
    update (update env steps/s) and the whole iteration (env steps/s) are."""
    found = {(r["env_id"], r["config"], r.get("path")): r["summary"] for r in rows}
    out = []
    for (env_id, name, path), new in found.items():
        old = found.get((env_id, name.removesuffix("-bf16"), "old")) or found.get(
            (env_id, name, "old")
        )
        if path != "new" or old is None:
            continue
        out.append(
            {
                "env_id": env_id,
                "config": name,
                "update_speedup": new["update_env_steps_per_s"] / old["update_env_steps_per_s"],
                "end_to_end_speedup": new["env_steps_per_s"] / old["env_steps_per_s"],
                "update_speedup_cpu": new["update_env_steps_per_cpu_s"]
                / old["update_env_steps_per_cpu_s"],
                "end_to_end_speedup_cpu": new["env_steps_per_cpu_s"] / old["env_steps_per_cpu_s"],
                "update_gflop_ratio": old["update_gflop_per_step"] / new["update_gflop_per_step"],
            }
        )
    lines = [
        "| env | config | update x faster (wall) | (CPU) | end to end x faster (wall) | (CPU) "
        "| update FLOPs / step, old/new |",
        "|---|---|---|---|---|---|---|",
    ]
    lines += [
        f"| {o['env_id']} | {o['config']} | {o['update_speedup']:.2f} | "
        f"{o['update_speedup_cpu']:.2f} | {o['end_to_end_speedup']:.2f} | "
        f"{o['end_to_end_speedup_cpu']:.2f} | {o['update_gflop_ratio']:.2f} |"
        for o in out
    ]
    return out, "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description="Training throughput of llmgym's PPO.")
    parser.add_argument("--iterations", type=int, default=2)
    parser.add_argument("--envs", nargs="+", default=list(ENVS), choices=list(ENVS))
    parser.add_argument("--configs", nargs="+", default=list(CONFIGS)[:3], choices=list(CONFIGS))
    parser.add_argument("--episodes", type=int, default=0, help="Episodes per iteration.")
    parser.add_argument(
        "--paths",
        nargs="+",
        default=["new"],
        choices=["old", "new"],
        help="old: the frozen-trunk fast path off; new: on (both: the same recipe twice).",
    )
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--device", default="cpu", help="cpu, cuda or cuda:N (the trainer's).")
    parser.add_argument("--quick", action="store_true", help="Tiny random model, 1 iteration.")
    parser.add_argument("--output", type=Path, default=RESULTS)
    parser.add_argument("--workdir", default="/tmp/llmgym-train-throughput")
    parser.add_argument("--phase", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.quick:
        args.model, args.iterations, args.episodes = "tiny", 1, args.episodes or 2
    if args.phase:
        env_id, name, path = args.phase.split(":")
        print(json.dumps(phase(env_id, name, path, args)))
        return

    env = dict(os.environ, OMP_NUM_THREADS=str(args.threads))
    described = machine(args.threads)
    if args.device != "cpu":  # the trainer on a GPU; the GEMM peak below stays the CPU's
        import torch

        gpu = torch.cuda.get_device_name(torch.device(args.device))
        described = described.replace("no GPU, ", "") + (
            f"; the trainer on {args.device} ({gpu}): 'of peak' compares with the CPU's peak"
        )
    peaks = [gemm_peak(args.threads)]
    rows = []
    for env_id in args.envs:
        for name in args.configs:
            for path in args.paths:
                where = f"{env_id}:{name}:{path}"
                command = [sys.executable, __file__, "--phase", where, *sys.argv[1:]]
                done = subprocess.run(command, check=True, capture_output=True, text=True, env=env)
                rows.append(json.loads(done.stdout.strip().splitlines()[-1]))
                peaks.append(gemm_peak(args.threads))
                print(f"{env_id} {name} {path}: {rows[-1]['iterations']}", flush=True)
    peak = max(peaks)
    for r in rows:
        r["summary"] = summarize(r, peak)
    text = table(rows)
    gains, gains_text = speedups(rows)
    report = {
        "model": args.model,
        "algo": "ppo",
        "machine": described,
        "device": args.device,
        "gemm_peak_gflop_per_s": peak,
        "gemm_peaks_measured": peaks,
        "flop_model": (
            "forward: 2 x params x non-padding tokens of each decoder layer that computes (the "
            "fast path's stubbed trunk layers do not; a forward stopped early skips the layers "
            "above) + 2 x output-layer params per row of logits; backward, with gradient: 4 x "
            "params x tokens of the decoder layers at or above the first trained one + 2 x "
            "output-layer params per row of logits (frozen backbone: none). Attention scores, "
            "norms, action/value heads are not counted."
        ),
        "settings": vars(args) | {"output": str(args.output), "common": COMMON},
        "table": text,
        "speedups": gains,
        "speedup_table": gains_text,
        "results": rows,
    }
    print(f"{args.model}; {described}; fp32 GEMM peak {peak:.0f} GFLOP/s")
    print(text)
    if gains:
        print(gains_text)
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()
