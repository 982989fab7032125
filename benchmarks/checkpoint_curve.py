"""A learning curve after the fact: evaluate every checkpoint of a training run the way the
sample-efficiency comparison evaluates SB3 (greedy episodes from seed 1,000,000, one env per
episode), for runs that evaluated only before and after training (the CartPole records).

Writes a CSV with one row per checkpoint (``env_steps``, ``eval/mean_return``, ``eval/ci95``,
``checkpoint``); saved as ``benchmarks/results/rl/NAME.checkpoints.csv`` beside a run's record,
``benchmarks/sample_efficiency.py`` draws its points with the record's. Checkpoints already in
the CSV are skipped, so an interrupted run resumes.

    python benchmarks/checkpoint_curve.py runs/rl/cartpole-ppo-layer8g-s0 \\
        --output benchmarks/results/rl/cartpole-ppo-layer8g-s0.checkpoints.csv
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import sys
from pathlib import Path

FIELDS = ["env_steps", "eval/mean_return", "eval/ci95", "checkpoint"]


def checkpoints(run_dir: Path) -> list[tuple[int, Path]]:
    """(env steps, directory) of each checkpoint of ``run_dir``, oldest first."""
    found = []
    for path in sorted((run_dir / "checkpoints").glob("iter_*")):
        state = path / "trainer_state.json"
        if state.is_file():
            found.append((int(json.loads(state.read_text())["env_steps"]), path))
    return sorted(found)


def done_steps(output: Path) -> set[int]:
    """The env steps already evaluated in ``output``."""
    if not output.is_file():
        return set()
    with output.open(newline="") as f:
        return {int(row["env_steps"]) for row in csv.DictReader(f)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run_dir", type=Path, help="an `llmgym train` output directory")
    parser.add_argument("--output", type=Path, required=True, help="the CSV to write or extend")
    parser.add_argument("--episodes", type=int, default=20, help="greedy episodes per checkpoint")
    parser.add_argument("--model", help="the model the run trained (default: its run.json's)")
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args(argv)
    if args.episodes < 1 or args.threads < 1:
        sys.exit("--episodes and --threads must be at least 1.")
    run_json = args.run_dir / "run.json"
    if not run_json.is_file():
        sys.exit(f"{args.run_dir} is not a training run (no run.json in it).")
    config = json.loads(run_json.read_text())["config"]
    env_id, env_kwargs = config["run"]["env_id"], config["run"]["env_kwargs"]
    model, mode = args.model or config["policy"]["model"], config["policy"]["mode"]
    found = checkpoints(args.run_dir)
    if not found:
        sys.exit(f"{args.run_dir} has no checkpoints (checkpoints/iter_*/trainer_state.json).")
    done = done_steps(args.output)
    todo = [(steps, path) for steps, path in found if steps not in done]

    os.environ.setdefault("OMP_NUM_THREADS", str(args.threads))
    import torch
    from tqdm.auto import tqdm

    from llmgym.agents.evaluate import evaluate
    from llmgym.agents.registry import make_agent
    from llmgym.rl.trainer import EVAL_SEED_BASE  # the trainer's evaluation seeds

    torch.set_num_threads(args.threads)
    new_file = not args.output.is_file()
    args.output.parent.mkdir(parents=True, exist_ok=True)
    with args.output.open("a", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=FIELDS)
        if new_file:
            writer.writeheader()
        for steps, path in tqdm(todo, desc="checkpoints", unit="ckpt"):
            agent = make_agent(f"llm:{model}@{path}", env_id, greedy=True, mode=mode)
            result = evaluate(
                env_id,
                agent,
                episodes=args.episodes,
                num_envs=args.episodes,
                seed=EVAL_SEED_BASE,
                progress=False,
                env_kwargs=env_kwargs,
            )
            row = [steps, result["mean_return"], result["ci95"], path.name]
            writer.writerow(dict(zip(FIELDS, row, strict=True)))
            f.flush()
            tqdm.write(f"{path.name}: {steps} env steps, {result['mean_return']:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
