"""Acting throughput on Text-CartPole-v1 with the embedded SmolLM2-135M.

Three ways to act, same envs and seeds:

(a) sequential: one env at a time, one ``generate`` over the whole growing chat history per
    step, with LlamaGym's generation settings (how LlamaGym acts);
(b) batched ``generate`` over 16 envs (LLMPolicy, one call per step for all envs);
(c) batched ``score`` over 16 envs (LLMPolicy: prompt encoded once, candidates on its KV cache).

For each: env-steps/s, tokens run through the model per env-step, peak RSS, and the share of
the FLOP ceiling (2 x params x tokens per step, against an fp32 GEMM peak measured in the same
run). Each way runs in its own process, so peak RSS is its own. Prints a table and writes
benchmarks/results/throughput.json.

With ``--vllm-url`` it compares instead (b) and (c) with the same batched acting through a
vLLM server (``PolicyConfig(backend="vllm")``), same envs and seeds, and writes
benchmarks/results/throughput_vllm.json (the server's tokens and memory are its own: those
columns are blank for the vLLM rows).

    python benchmarks/throughput.py            # ~5 minutes on a 2-core CPU
    python benchmarks/throughput.py --quick    # a smoke run
    benchmarks/with_vllm_server.sh sh -c '.venv/bin/python benchmarks/throughput.py \
        --vllm-url "$LLMGYM_VLLM_URL"'
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import time
from pathlib import Path

import gymnasium as gym

import llmgym  # noqa: F401  (registers the Text-* envs)

ENV_ID = "Text-CartPole-v1"
MODEL = "smollm2-135m"
RESULTS = Path(__file__).parent / "results" / "throughput.json"
VLLM_RESULTS = Path(__file__).parent / "results" / "throughput_vllm.json"
LLAMAGYM_GENERATE = {"max_new_tokens": 32, "do_sample": True, "top_p": 0.6, "top_k": 0}


def gemm_peak(
    threads: int, size: int = 1024, repeats: int = 12, device: str = "cpu", dtype: str = "float32"
) -> float:
    """Best matmul rate in GFLOP/s (fp32 on the CPU by default; on a GPU, e.g. ``device="cuda",
    dtype="bfloat16"`` with ``size=8192``)."""
    import torch

    torch.set_num_threads(threads)
    kind = getattr(torch, dtype)
    a = torch.randn(size, size, device=device, dtype=kind)
    b = torch.randn(size, size, device=device, dtype=kind)
    sync = torch.cuda.synchronize if a.is_cuda else (lambda: None)
    best = 0.0
    for _ in range(repeats):
        sync()
        start = time.perf_counter()
        for _ in range(4):
            a @ b
        sync()
        best = max(best, 4 * 2 * size**3 / (time.perf_counter() - start) / 1e9)
    return best


class Envs:
    """``n`` text envs with fixed seeds; a finished episode restarts with the next seed."""

    def __init__(self, n: int, seed: int = 0) -> None:
        self.envs = [gym.make(ENV_ID) for _ in range(n)]
        self.next_seed = seed + n
        self.obs, self.infos = [], []
        for i, env in enumerate(self.envs):
            obs, info = env.reset(seed=seed + i)
            self.obs.append(obs)
            self.infos.append(info)

    def step(self, answers: list[str]) -> list[bool]:
        """Step every env; return which ones started a new episode."""
        restarted = []
        for i, (env, answer) in enumerate(zip(self.envs, answers)):
            obs, _, terminated, truncated, info = env.step(answer)
            if terminated or truncated:
                obs, info = env.reset(seed=self.next_seed)
                self.next_seed += 1
            self.obs[i], self.infos[i] = obs, info
            restarted.append(terminated or truncated)
        return restarted


def run_sequential(model, tokenizer, steps: int) -> dict:
    """(a) LlamaGym's way: apply the template to the whole episode, generate, decode."""
    import torch

    envs = Envs(1)
    messages = [{"role": "system", "content": envs.infos[0]["system_prompt"]}]
    tokens = 0

    def one_step() -> None:
        nonlocal messages, tokens
        messages.append({"role": "user", "content": envs.obs[0]})
        prompt = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
        ids = tokenizer(prompt, return_tensors="pt", add_special_tokens=False).input_ids
        with torch.no_grad():
            out = model.generate(ids, attention_mask=torch.ones_like(ids), **LLAMAGYM_GENERATE)
        reply = tokenizer.decode(out[0, ids.shape[1] :], skip_special_tokens=True)
        tokens += out.shape[1]  # the prompt is re-encoded every step, plus the new tokens
        messages.append({"role": "assistant", "content": reply})
        if envs.step([reply])[0]:
            messages = messages[:1]

    one_step()  # warm-up
    tokens = 0
    torch.manual_seed(0)
    start = time.perf_counter()
    for _ in range(steps):
        one_step()
    wall = time.perf_counter() - start
    return {"env_steps": steps, "wall_s": wall, "tokens": tokens}


def run_batched(model, tokenizer, mode: str, steps: int, num_envs: int, **backend) -> dict:
    """(b)/(c): LLMPolicy over ``num_envs`` envs, one call per step (``backend``: the
    PolicyConfig fields that act through a vLLM server)."""
    from llmgym.policy import LLMPolicy, PolicyConfig

    envs = Envs(num_envs)
    policy = LLMPolicy(model, tokenizer, PolicyConfig(mode=mode, seed=0, **backend))
    envs.step([s.text for s in policy.act(envs.obs, envs.infos)])  # warm-up
    policy.stats = dict.fromkeys(policy.stats, 0)
    start = time.perf_counter()
    for _ in range(steps):
        envs.step([s.text for s in policy.act(envs.obs, envs.infos)])
    wall = time.perf_counter() - start
    stats = policy.stats
    return {
        "env_steps": steps * num_envs,
        "wall_s": wall,
        "tokens": stats["prompt_tokens"] + stats["generated_tokens"],
        "cached_prompt_tokens": stats["cached_tokens"],
        "generated_tokens": stats["generated_tokens"],
        "decode_positions_computed": stats["decode_tokens"],
    }


def phase(name: str, args: argparse.Namespace) -> dict:
    """Run one way of acting in this process and return its measurements."""
    import torch

    from llmgym.policy.models import load_model, load_tokenizer

    torch.set_num_threads(args.threads)
    if name.startswith("vllm-"):
        tokenizer = load_tokenizer(MODEL)
        server = {"backend": "vllm", "vllm_url": args.vllm_url}
        result = run_batched(None, tokenizer, name[5:], args.batched_steps, args.num_envs, **server)
        result["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        return result | {"tokens": None, "params": None}
    model, tokenizer = load_model(MODEL, device="cpu")
    params = sum(p.numel() for p in model.parameters())
    if name == "sequential":
        result = run_sequential(model, tokenizer, args.sequential_steps)
    else:
        result = run_batched(model, tokenizer, name, args.batched_steps, args.num_envs)
    result["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    result["params"] = params
    return result


def forward_tokens(args: tuple, kwargs: dict) -> tuple[int, int]:
    """A causal LM forward's non-padding tokens and its computed positions (padding included),
    from what a forward pre-hook (``with_kwargs=True``) sees."""
    ids = kwargs.get("input_ids", args[0] if args else None)
    if ids is None:
        ids = kwargs["inputs_embeds"][..., 0]
    mask = kwargs.get("attention_mask")
    width = ids.shape[1]
    real = int(mask[:, -width:].sum()) if mask is not None and mask.ndim == 2 else ids.numel()
    return int(real), int(ids.numel())


def machine(threads: int, device: str = "cpu") -> str:
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    gpu = "no GPU"
    if device.startswith("cuda"):
        import torch

        gpu = f"GPU {torch.cuda.get_device_name(torch.device(device))}"
    return (
        f"{cpu}, {os.cpu_count()} logical CPUs, {threads} torch threads, {gpu}, "
        f"{platform.system()}; load average {load:.1f} at start (shared machine)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description="Acting throughput of llmgym's LLM policy.")
    # 1 thread by default: on the shared 2-core machine, 2 torch threads stalled in OpenMP waits
    # (a --quick run: 0.01 sequential steps/s with 2 threads, 0.15 with 1).
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--num-envs", type=int, default=16)
    parser.add_argument("--sequential-steps", type=int, default=8)
    parser.add_argument("--batched-steps", type=int, default=4)
    parser.add_argument("--quick", action="store_true", help="A few steps only (smoke test).")
    parser.add_argument("--output", type=Path, default=RESULTS)
    parser.add_argument("--vllm-url", help="Compare batched acting with a vLLM server there.")
    parser.add_argument("--phase", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.vllm_url and args.output == RESULTS:
        args.output = VLLM_RESULTS
    if args.quick:
        args.sequential_steps, args.batched_steps, args.num_envs = 2, 1, 4
    if args.phase:
        print(json.dumps(phase(args.phase, args)))
        return

    described = machine(args.threads)
    peaks = [gemm_peak(args.threads)]
    results = {}
    ways = ("sequential", "generate", "score")
    if args.vllm_url:
        ways = ("generate", "vllm-generate", "score", "vllm-score")
    for name in ways:
        command = [sys.executable, __file__, "--phase", name, *sys.argv[1:]]
        out = subprocess.run(command, check=True, capture_output=True, text=True).stdout
        results[name] = json.loads(out.strip().splitlines()[-1])
        peaks.append(gemm_peak(args.threads))
    peak = max(peaks)

    labels = {
        "sequential": "(a) sequential generate, growing history (LlamaGym)",
        "generate": f"(b) batched generate, {args.num_envs} envs",
        "score": f"(c) batched score, {args.num_envs} envs",
        "vllm-generate": f"(b) batched generate, {args.num_envs} envs, vLLM server",
        "vllm-score": f"(c) batched score, {args.num_envs} envs, vLLM server",
    }
    rows = {}
    for name in ways:
        r = results[name]
        steps_per_s = r["env_steps"] / r["wall_s"]
        measured = r["tokens"] is not None  # the vLLM server's own work is not seen here
        tokens_per_step = r["tokens"] / r["env_steps"] if measured else None
        flops = 2 * r["params"] * r["tokens"] / r["wall_s"] / 1e9 if measured else None
        rows[name] = {
            "label": labels[name],
            "env_steps_per_s": steps_per_s,
            "tokens_per_step": tokens_per_step,
            "model_gflop_per_s": flops,
            "flop_ceiling_fraction": flops / peak if measured else None,
            **r,
        }
    if args.vllm_url:
        report = {
            "env_id": ENV_ID,
            "model": MODEL,
            "machine": described,
            "settings": vars(args) | {"output": str(args.output)},
            "results": rows,
            "vllm_vs_transformers": {
                mode: rows[f"vllm-{mode}"]["env_steps_per_s"] / rows[mode]["env_steps_per_s"]
                for mode in ("generate", "score")
            },
        }
        print(f"{ENV_ID}, {MODEL}; {described}")
        for row in rows.values():
            print(f"{row['label']:<56}{row['env_steps_per_s']:>9.2f} env-steps/s")
        ratios = report["vllm_vs_transformers"]
        print(", ".join(f"vLLM / transformers, {k}: {v:.2f}x" for k, v in ratios.items()))
        args.output.parent.mkdir(parents=True, exist_ok=True)
        args.output.write_text(json.dumps(report, indent=2) + "\n")
        return
    report = {
        "env_id": ENV_ID,
        "model": MODEL,
        "machine": described,
        "gemm_peak_gflop_per_s": peak,
        "gemm_peaks_measured": peaks,
        "settings": vars(args) | {"output": str(args.output)},
        "results": rows,
        "score_vs_sequential": rows["score"]["env_steps_per_s"]
        / rows["sequential"]["env_steps_per_s"],
        "generate_vs_sequential": rows["generate"]["env_steps_per_s"]
        / rows["sequential"]["env_steps_per_s"],
    }
    print(f"{ENV_ID}, {MODEL}; {described}; fp32 GEMM peak {peak:.0f} GFLOP/s")
    header = f"{'way of acting':<56}{'steps/s':>9}{'tok/step':>10}{'GFLOP/s':>9}{'of peak':>9}"
    print(header + f"{'RSS MB':>8}")
    for row in rows.values():
        print(
            f"{row['label']:<56}{row['env_steps_per_s']:>9.2f}{row['tokens_per_step']:>10.1f}"
            f"{row['model_gflop_per_s']:>9.1f}{100 * row['flop_ceiling_fraction']:>8.1f}%"
            f"{row['peak_rss_mb']:>8.0f}"
        )
    print(
        f"score vs sequential {report['score_vs_sequential']:.1f}x, "
        f"generate vs sequential {report['generate_vs_sequential']:.1f}x"
    )
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()
