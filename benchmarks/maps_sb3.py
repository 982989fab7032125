"""SB3 PPO given the map, on FrozenLake's map sets (issue 53, deliverable 3's reference point).

A numeric policy that sees only FrozenLake's position cannot solve a map it has not seen. This
one sees the map: ``llmgym.envs.maps.MapGrid`` turns each observation into planes of frozen
cells, holes, the goal and the agent. SB3 PPO (an MLP) trains on the ``train`` maps and is
evaluated, greedily, on every map of the ``heldout`` set and on as many ``train`` maps. The
maps are not slippery, so one greedy episode a map is its exact success: the mean over the set
is the exact mean success that ``llmgym eval --exact`` reports for a text policy.

    python benchmarks/maps_sb3.py --timesteps 100000 1000000 --seeds 0 1 2

Each (timesteps, seed) run writes its curve (held-out and train success every
``--eval-every`` steps) into ``benchmarks/results/maps_sb3.json``; runs already there are
skipped, so an interrupted run resumes. ``--table`` prints the table only.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
OUTPUT = ROOT / "benchmarks" / "results" / "maps_sb3.json"
#: SB3 PPO's settings (its defaults but these), the same at every budget.
PPO_KWARGS = {"n_steps": 256, "batch_size": 256, "ent_coef": 0.01, "gamma": 0.95}
N_ENVS = 8


def make_env(map_set: str, size: int, seed: int = 0) -> Any:
    """One map-set env with the map as planes (``MapGrid``), non-slippery, 30 steps at most."""
    import gymnasium as gym

    import llmgym  # noqa: F401  (registers the map sets)
    from llmgym.envs.maps import MapGrid

    env = MapGrid(gym.make(f"FrozenLakeMaps{size}x{size}-{map_set.capitalize()}-v0"))
    env.reset(seed=seed)  # the first reset draws from this seed; later ones from its stream
    return env


def success(model: Any, map_set: str, size: int, maps: int | None = None) -> float:
    """The greedy policy's mean success over the first ``maps`` maps of a set (all by
    default): one episode a map, exact on non-slippery maps."""
    env = make_env(map_set, size)
    n = len(env.unwrapped.maps) if maps is None else maps
    wins = 0.0
    for index in range(n):
        obs, _ = env.reset(seed=index)
        done = False
        while not done:
            action, _ = model.predict(obs, deterministic=True)
            obs, reward, terminated, truncated, _ = env.step(int(action))
            done = terminated or truncated
        wins += float(reward)
    return wins / n


def train(timesteps: int, seed: int, size: int, eval_every: int) -> dict[str, Any]:
    """PPO on the train maps for ``timesteps`` steps; its curve and final successes."""
    import torch
    from stable_baselines3 import PPO
    from stable_baselines3.common.callbacks import BaseCallback
    from stable_baselines3.common.vec_env import DummyVecEnv

    torch.set_num_threads(1)
    heldout = len(make_env("heldout", size).unwrapped.maps)
    curve: list[dict[str, float]] = []

    episodes = [0]

    class Curve(BaseCallback):
        def _on_step(self) -> bool:
            episodes[0] += int(self.locals["dones"].sum())
            if self.num_timesteps % eval_every < N_ENVS:
                curve.append(point(self.model, self.num_timesteps))
            return True

    def point(model: Any, steps: int) -> dict[str, float]:
        return {
            "timesteps": steps,
            "episodes": episodes[0],
            "heldout": success(model, "heldout", size),
            "train": success(model, "train", size, maps=heldout),
        }

    envs = DummyVecEnv(
        [lambda i=i: make_env("train", size, seed * 1000 + i) for i in range(N_ENVS)]
    )
    model = PPO("MlpPolicy", envs, seed=seed, verbose=0, device="cpu", **PPO_KWARGS)
    start, cpu = time.perf_counter(), time.process_time()
    model.learn(timesteps, callback=Curve())
    final = point(model, model.num_timesteps)
    return {
        "timesteps": timesteps,
        "seed": seed,
        "size": size,
        "heldout_success": final["heldout"],
        "train_success": final["train"],
        "curve": [*curve, final],
        "episodes": episodes[0],
        "wall_s": round(time.perf_counter() - start, 1),
        "cpu_s": round(time.process_time() - cpu, 1),
    }


def table(results: dict[str, Any]) -> str:
    """The runs as a Markdown table."""
    lines = [
        "| map size | timesteps | episodes | seed | held-out success (100 maps) "
        "| train success (first 100) | CPU s |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for run in sorted(results["runs"], key=lambda r: (r["size"], r["timesteps"], r["seed"])):
        lines.append(
            f"| {run['size']}x{run['size']} | {run['timesteps']:,} | {run['episodes']:,} | "
            f"{run['seed']} | "
            f"{run['heldout_success']:.2f} | {run['train_success']:.2f} | {run['cpu_s']} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--timesteps", type=int, nargs="+", default=[100_000])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0])
    parser.add_argument("--size", type=int, default=4, choices=(4, 5))
    parser.add_argument("--eval-every", type=int, default=25_000, help="steps between points")
    parser.add_argument("--output", type=Path, default=OUTPUT)
    parser.add_argument("--table", action="store_true", help="print the table only")
    args = parser.parse_args(argv)
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    from llmgym.files import write_text

    results: dict[str, Any] = {"runs": []}
    if args.output.exists():
        results = json.loads(args.output.read_text())
    if not args.table:
        done = {(r["size"], r["timesteps"], r["seed"]) for r in results["runs"]}
        for timesteps in args.timesteps:
            for seed in args.seeds:
                if (args.size, timesteps, seed) in done:
                    continue
                run = train(timesteps, seed, args.size, args.eval_every)
                print(
                    f"{timesteps:,} steps, seed {seed}: held-out {run['heldout_success']:.2f}, "
                    f"train {run['train_success']:.2f} ({run['cpu_s']} CPU s)",
                    flush=True,
                )
                results["runs"].append(run)
                results["ppo_kwargs"] = PPO_KWARGS | {"n_envs": N_ENVS, "policy": "MlpPolicy"}
                results["machine"] = f"{platform.machine()} CPU, {os.cpu_count()} cores, 1 thread"
                results["command"] = "python benchmarks/maps_sb3.py " + " ".join(
                    sys.argv[1:] if argv is None else argv
                )
                write_text(args.output, json.dumps(results, indent=2) + "\n")  # all or nothing
    print(table(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
