"""One exact evaluation of a trained policy in float32 and in bfloat16 on the CPU (issue 51 item
4: exact evaluation of a SmolLM2-135M policy in score mode within 20 s): each dtype's value,
CPU and wall seconds of the evaluation alone (model loading apart), and how many of the greedy
actions differ. bf16 matmuls are fast only on CPUs with native bf16 (AVX-512 BF16, AMX).

    python experiments/exact_eval_dtype.py benchmarks/weights/rl/blackjack-lm-ppo-ema-s0
"""

from __future__ import annotations

import argparse
import time

import torch

from llmgym.agents.registry import LLMAgent
from llmgym.evaluation.exact import agent_act, exact_value
from llmgym.rl import load_trained_policy


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("policy", help="A trained policy or run directory.")
    parser.add_argument("--env", default="Text-Blackjack-v1")
    parser.add_argument("--dtypes", nargs="+", default=["float32", "bfloat16"])
    args = parser.parse_args()
    torch.set_num_threads(1)
    actions = {}
    for name in args.dtypes:
        start = time.perf_counter()
        policy = load_trained_policy(args.policy, device="cpu")
        policy.model.to(getattr(torch, name))  # the LoRA adapter too: the whole model in `name`
        load_s = time.perf_counter() - start
        wall, cpu = time.perf_counter(), time.process_time()
        result = exact_value(args.env, agent_act(LLMAgent(policy)))
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        actions[name] = result.actions
        print(
            f"{name}: exact value {result.value:.4f} over {result.states} states; evaluation "
            f"{cpu:.1f} CPU s, {wall:.1f} s wall (loading {load_s:.1f} s)",
            flush=True,
        )
    first, *others = args.dtypes
    for name in others:
        differ = sum(actions[first][k] != actions[name][k] for k in actions[first])
        print(f"{name} against {first}: {differ} of {len(actions[first])} greedy actions differ")


if __name__ == "__main__":
    main()
