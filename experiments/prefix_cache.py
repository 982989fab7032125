"""Does the shared-prefix KV cache pay? LLMPolicy on 16 Text-CartPole-v1 envs, with and without.

Prints, per mode, the best of 3 calls (after a warm-up call that fills the cache).

    python experiments/prefix_cache.py
"""

from __future__ import annotations

import argparse
import json
import time

import torch

from llmgym.policy import LLMPolicy, PolicyConfig
from llmgym.policy.models import load_model
from llmgym.policy.testing import text_observations


def main(threads: int = 1, num_envs: int = 16, calls: int = 3) -> dict:
    torch.set_num_threads(threads)
    model, tokenizer = load_model()
    obs, infos = text_observations("Text-CartPole-v1", num_envs)
    results = {}
    for mode in ("score", "generate"):
        for cache in (True, False):
            policy = LLMPolicy(
                model, tokenizer, PolicyConfig(mode, prefix_cache=cache, greedy=True)
            )
            policy.act(obs, infos)  # warm-up; fills the cache
            policy.stats.update(dict.fromkeys(policy.stats, 0))  # the backend's counters
            best = float("inf")
            for _ in range(calls):
                start = time.perf_counter()
                policy.act(obs, infos)
                best = min(best, time.perf_counter() - start)
            results[f"{mode} prefix_cache={cache}"] = {
                "best_s_per_call": round(best, 2),
                "env_steps_per_s": round(num_envs / best, 2),
                "prompt_tokens_per_call": policy.stats["prompt_tokens"] / calls,
            }
            print(mode, cache, results[f"{mode} prefix_cache={cache}"], flush=True)
    return results


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--num-envs", type=int, default=16)
    parser.add_argument(
        "--calls", type=int, default=3, help="timed calls per mode (the best is kept)"
    )
    args = parser.parse_args()
    print(json.dumps(main(args.threads, args.num_envs, args.calls)))
