"""Which head-only recipe (PPO, or GRPO) learns Blackjack from scratch: the exact greedy value
after 2,000 training episodes for a few variants x seeds, with the real trainer on the embedded
SmolLM2-135M.

The language model is frozen (``train_backbone=false``), so every run sees the same features:
the runs share one loaded model and one feature memo (the first run fills it), and a run costs
about 20 s on one CPU thread instead of 90 s. The base recipe is that of
``benchmarks/rl_from_scratch.sh`` before the variant's changes (temperature 2, entropy bonus
0.05, rates annealed to 0, 40 episodes per update, critic rate 3e-3). Writes
``benchmarks/results/head_sweep.json`` and prints a markdown table.

    python experiments/head_sweep.py                         # every variant, seeds 0-5
    python experiments/head_sweep.py --variants sgd --seeds 0,1
    python experiments/head_sweep.py --variants grpo,grpo-t1 --seeds 0,1,2 \
        --output benchmarks/results/head_sweep_grpo.json
    python experiments/head_sweep.py --model tiny --episodes 80 --seeds 0   # smoke run
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().parents[1] / "benchmarks" / "results" / "head_sweep.json"
#: GRPO's recipe until groups of 4 (groups of 8 episodes on one deal; no critic), and the current
#: one (``benchmarks/rl_from_scratch.sh``: groups of 4, 2 per update).
GRPO: dict[str, Any] = {"algo": "grpo", "group_size": 8, "update_epochs": 8}
GRPO_G4: dict[str, Any] = GRPO | {"group_size": 4, "episodes_per_update": 8}
#: name -> config overrides of the base recipe (``algo``: the trainer, PPO by default).
VARIANTS: dict[str, dict[str, Any]] = {
    "adamw": {"head_optimizer": "adamw", "head_lr": 3e-3, "update_epochs": 4},
    "sgd": {"head_optimizer": "sgd", "update_epochs": 4},
    "sgd-lambda0.5": {"head_optimizer": "sgd", "update_epochs": 4, "gae_lambda": 0.5},
    "sgd-lambda0.5-epochs8": {"head_optimizer": "sgd", "update_epochs": 8, "gae_lambda": 0.5},
    # GRPO: the earlier recipe, then changes to it.
    "grpo": GRPO,
    "grpo-head1.0": GRPO | {"head_lr": 1.0},
    "grpo-head0.1": GRPO | {"head_lr": 0.1},
    "grpo-t1": GRPO | {"temperature": 1.0},
    "grpo-ent0.01": GRPO | {"ent_coef": 0.01},
    # More, smaller updates (GRPO's value was still rising at 2,000 episodes; on slippery
    # FrozenLake 16 episodes per update instead of 64 helped PPO). gN: episodes per group (one
    # deal); epuN: episodes per update.
    "grpo-epu16": GRPO | {"episodes_per_update": 16},
    "grpo-g8-epu8": GRPO | {"episodes_per_update": 8},
    "grpo-g4-epu16": GRPO | {"group_size": 4, "episodes_per_update": 16},
    "grpo-g4-epu8": GRPO_G4,
    "grpo-g4-epu4": GRPO | {"group_size": 4, "episodes_per_update": 4},
    "grpo-g2-epu8": GRPO | {"group_size": 2, "episodes_per_update": 8},
    "grpo-g4-epu8-epochs4": GRPO_G4 | {"update_epochs": 4},
    "grpo-g4-epu8-head0.1": GRPO_G4 | {"head_lr": 0.1},
    "grpo-g4-epu8-head0.6": GRPO_G4 | {"head_lr": 0.6},
    "grpo-g4-epu8-ent0.02": GRPO_G4 | {"ent_coef": 0.02},
    "grpo-g4-epu8-t1.5": GRPO_G4 | {"temperature": 1.5},
    "grpo-g4-epu8-step": GRPO_G4 | {"group_level": "step"},
    # Hotter sampling (temperature 1 -> 1.5 -> 2 helped so far), more passes per batch (4 -> 8
    # helped PPO), a larger entropy bonus.
    "grpo-g4-epu8-t2.5": GRPO_G4 | {"temperature": 2.5},
    "grpo-g4-epu8-t3": GRPO_G4 | {"temperature": 3.0},
    "grpo-g4-epu8-epochs16": GRPO_G4 | {"update_epochs": 16},
    "grpo-g4-epu8-ent0.1": GRPO_G4 | {"ent_coef": 0.1},
    # Unscaled advantages (Dr. GRPO; worse at 8 x 5), a tighter ratio clip, a rate between.
    "grpo-g4-epu8-noscale": GRPO_G4 | {"scale_rewards": False},
    "grpo-g4-epu8-clip0.1": GRPO_G4 | {"clip_coef": 0.1},
    "grpo-g4-epu8-head0.45": GRPO_G4 | {"head_lr": 0.45},
}
BASE: dict[str, Any] = {
    "env_id": "Text-Blackjack-v1",
    "mode": "score",
    "train_backbone": False,
    "temperature": 2.0,
    "ent_coef": 0.05,
    "anneal_lr": True,
    "value_lr": 3e-3,
    "total_env_steps": 10**9,
    "episodes_per_update": 40,
    "num_envs": 8,
    "eval_every": 0,
    "checkpoint_every": 0,
    "progress": False,
    "num_threads": 1,
}


def run(loaded: Any, memo: dict, variant: str, seed: int, model: str, episodes: int) -> float:
    """The exact greedy value of one run of ``variant`` with training seed ``seed``."""
    from llmgym.rl import config_class, make_trainer
    from llmgym.rl.config import is_key

    with tempfile.TemporaryDirectory() as out:
        config = BASE | VARIANTS[variant]
        algo = config.pop("algo", "ppo")
        config = {
            k: v for k, v in config.items() if is_key(config_class(algo), k)
        }  # GRPO: no critic
        trainer = make_trainer(
            algo, loaded, model=model, seed=seed, total_episodes=episodes, output_dir=out, **config
        )
        trainer.policy.share_memo(memo)  # the frozen model's features, shared by every run
        trainer.train()
        return float(trainer.evaluation.exact_value(trainer.policy)["mean_return"])


def table(results: dict[str, dict[str, float]]) -> str:
    """Markdown: one row per variant with the mean, min, max and every seed's value.

    Example:
        >>> print(table({"sgd": {"0": -0.07, "1": -0.08}}))
        | variant | mean | min | max | seeds |
        |---|---|---|---|---|
        | sgd | -0.0750 | -0.0800 | -0.0700 | -0.0700, -0.0800 |
    """
    rows = ["| variant | mean | min | max | seeds |", "|---|---|---|---|---|"]
    for name, by_seed in results.items():
        values = list(by_seed.values())
        rows.append(
            f"| {name} | {statistics.mean(values):.4f} | {min(values):.4f} | {max(values):.4f} "
            f"| {', '.join(f'{v:.4f}' for v in values)} |"
        )
    return "\n".join(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--variants", default=",".join(VARIANTS), help="comma-separated")
    parser.add_argument("--seeds", default="0,1,2,3,4,5", help="comma-separated")
    parser.add_argument("--episodes", type=int, default=2000)
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--output", default=str(RESULTS))
    args = parser.parse_args()
    variants = args.variants.split(",")
    unknown = [v for v in variants if v not in VARIANTS]
    if unknown:
        sys.exit(f"Unknown variant {unknown[0]!r}; choose from {', '.join(VARIANTS)}.")
    seeds = [int(s) for s in args.seeds.split(",")]

    from llmgym.policy.models import load_model_for

    loaded, memo = load_model_for(args.model, "cpu"), {}
    results: dict[str, dict[str, float]] = {}
    start = time.perf_counter()
    for variant in variants:
        for seed in seeds:
            value = run(loaded, memo, variant, seed, args.model, args.episodes)
            results.setdefault(variant, {})[str(seed)] = value
            print(f"{variant} seed {seed}: {value:.4f}", flush=True)
    print(table(results))
    record = {
        "env_id": BASE["env_id"],
        "model": args.model,
        "episodes": args.episodes,
        "base": BASE,
        "variants": {v: VARIANTS[v] for v in variants},
        "exact_values": results,
        "wall_s": round(time.perf_counter() - start, 1),
        "command": "python experiments/head_sweep.py " + " ".join(sys.argv[1:]),
    }
    Path(args.output).parent.mkdir(parents=True, exist_ok=True)
    Path(args.output).write_text(json.dumps(record, indent=2) + "\n")


if __name__ == "__main__":
    main()
