"""The learning curve of one SB3 recipe: train it fresh (nothing cached) and evaluate the
deterministic policy every ``--every`` env steps on the bench's seeds, to see where a fixed
budget lands on it (e.g. DQN on CartPole, which swings between collapse and 500).

    python benchmarks/sb3_curve.py CartPole-v1 dqn --budget 100000 --every 5000 --episodes 10

Prints one ``env_steps mean_return`` line per evaluation. The recipe is the catalog's for
(env, algo), its exploration schedule stretched over ``--budget``.
"""

from __future__ import annotations

import argparse

import gymnasium as gym
import numpy as np


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("env_id")
    parser.add_argument("algo", choices=["ppo", "dqn", "a2c"])
    parser.add_argument("--budget", type=int, default=100_000)
    parser.add_argument("--every", type=int, default=5_000)
    parser.add_argument("--episodes", type=int, default=10)
    parser.add_argument("--seed", type=int, default=1000, help="First evaluation seed.")
    args = parser.parse_args()

    import torch

    import llmgym  # noqa: F401
    from llmgym.agents import sb3

    torch.set_num_threads(1)

    def mean_return(agent: sb3.SB3Agent) -> float:
        env, returns = gym.make(args.env_id), []
        for i in range(args.episodes):
            obs, _ = env.reset(seed=args.seed + i)
            total, done = 0.0, False
            while not done:
                obs, reward, terminated, truncated, _ = env.step(agent.act(obs))
                total, done = total + float(reward), terminated or truncated
            returns.append(total)
        return float(np.mean(returns))

    curve = sb3.learning_curve(args.env_id, args.algo, args.budget, args.every, mean_return)
    for steps, value in zip(curve.env_steps, curve.values):
        print(f"{steps} {value:.1f}")
    print(f"trained {curve.train_seconds:.0f} s, evaluated {curve.eval_seconds:.0f} s")


if __name__ == "__main__":
    main()
