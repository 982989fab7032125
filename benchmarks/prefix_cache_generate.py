"""Generate mode's update with and without the shared system prompt's KV cache
(``optim.prefix_cache_generate``), in one run, alternating: issue 51's throughput config
(PPO, LoRA r 16 on the tiny model's 2 layers, no head, 256 envs, 256 episodes per update,
4 epochs, minibatch 32, max_new_tokens 24, Blackjack, one thread), timed over iterations 2-3.
Prints env steps per wall second and per CPU second (robust on a shared machine), best of
``--repeats``, and writes ``benchmarks/results/prefix_cache_generate.json``.

    python benchmarks/prefix_cache_generate.py            # ~8 min on a 2-core CPU
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from throughput import machine  # noqa: E402

RESULTS = Path(__file__).parent / "results" / "prefix_cache_generate.json"


def measure(setting: str, model: str, iterations: int, workdir: str) -> dict[str, float]:
    import torch

    from llmgym.rl import make_trainer

    torch.set_num_threads(1)
    trainer = make_trainer(
        "ppo", env_id="Text-Blackjack-v1", model=model, device="cpu", mode="generate",
        num_envs=256, episodes_per_update=256, total_env_steps=10**9, eval_every=0,
        checkpoint_every=0, progress=False, num_threads=1, output_dir=f"{workdir}/{setting}",
        seed=0, action_head=False, lora=True, lora_r=16, lora_layers=2, update_epochs=4,
        minibatch_size=32, max_new_tokens=24, **{"optim.prefix_cache_generate": setting},
    )  # fmt: skip
    trainer.run_iteration()  # iteration 1 is not timed
    steps, wall, cpu = trainer.state.env_steps, time.perf_counter(), time.process_time()
    for _ in range(iterations):
        metrics = trainer.run_iteration()
    steps = trainer.state.env_steps - steps
    return {
        "env_steps": steps,
        "env_steps_per_s": steps / (time.perf_counter() - wall),
        "env_steps_per_cpu_s": steps / (time.process_time() - cpu),
        "epochs_run": metrics["losses/epochs"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="tiny")
    parser.add_argument("--iterations", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--workdir", default="/tmp/llmgym-prefix-cache-generate")
    parser.add_argument("--output", default=str(RESULTS))
    args = parser.parse_args()
    runs: dict[str, list[dict[str, float]]] = {"off": [], "on": []}
    for _ in range(args.repeats):
        for setting in runs:
            runs[setting].append(measure(setting, args.model, args.iterations, args.workdir))
            print(setting, runs[setting][-1], flush=True)
    best = {k: max(v, key=lambda r: r["env_steps_per_cpu_s"]) for k, v in runs.items()}
    ratio_cpu = best["on"]["env_steps_per_cpu_s"] / best["off"]["env_steps_per_cpu_s"]
    ratio_wall = best["on"]["env_steps_per_s"] / best["off"]["env_steps_per_s"]
    print(f"on / off: {ratio_cpu:.2f}x per CPU second, {ratio_wall:.2f}x per wall second")
    record = {
        "machine": machine(1),
        "command": "python benchmarks/prefix_cache_generate.py " + " ".join(sys.argv[1:]),
        "runs": runs,
        "best": best,
        "ratio_cpu": ratio_cpu,
        "ratio_wall": ratio_wall,
    }
    Path(args.output).write_text(json.dumps(record, indent=2))


if __name__ == "__main__":
    main()
