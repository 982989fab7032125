"""The learning curve of one SB3 recipe: train it fresh (nothing cached) and evaluate the
deterministic policy every ``--every`` env steps on the bench's seeds, to see where a fixed
budget lands on it (e.g. DQN on CartPole, which swings between collapse and 500).

    python experiments/sb3_curve.py CartPole-v1 dqn --budget 100000 --every 5000 --episodes 10
    python experiments/sb3_curve.py Taxi-v4 dqn --budget 500000 --every 50000 \
        --output benchmarks/results/classic/sb3_curves/Taxi-v4-dqn-500000.json
    python experiments/sb3_curve.py Taxi-v4 ppo --budget 300000 --every 50000 --set ent_coef=0.05

Prints one ``env_steps value`` line per evaluation (and flushes it, so a long curve can be
watched): the exact expected return of the deterministic policy where the env's transition
model is known (Blackjack, FrozenLake, Taxi, CliffWalking: no noise, cheap), else the mean
return of ``--episodes`` episodes. The recipe is the catalog's for (env, algo), its
exploration schedule stretched over ``--budget``; ``--set KEY=VALUE`` changes one of its
hyperparameters (the value read as JSON where it parses, e.g. ``0.05``, else as text, e.g.
``lin_7e-4``) and ``--n-envs`` its number of envs, to record an attempt at another recipe.
``--output`` also writes the curve, the recipe (with its overrides) and the command as JSON:
the committed record of an attempt (``docs/baselines.md``, ``experiments/sb3_attempts.sh``).
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
from dataclasses import asdict, replace
from pathlib import Path

import gymnasium as gym
import numpy as np

# Keywords of the SB3 constructor that the recipe does not own, and what to do instead.
NOT_HYPERPARAMETERS = {
    "n_envs": "use --n-envs",
    "total_timesteps": "use --budget",
    "seed": "the curve's seed is fixed at 0",
    **{k: "llmgym sets it" for k in ("env", "policy", "verbose", "device")},
    **{k: "it is part of the recipe, not an SB3 keyword" for k in ("normalize", "norm_reward")},
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("env_id")
    parser.add_argument("algo", choices=["ppo", "dqn", "a2c"])
    parser.add_argument("--budget", type=int, default=100_000)
    parser.add_argument("--every", type=int, default=5_000)
    parser.add_argument("--episodes", type=int, default=10)
    parser.add_argument("--seed", type=int, default=1000, help="First evaluation seed.")
    parser.add_argument("--output", type=Path, help="Also write the curve here as JSON.")
    parser.add_argument(
        "--set", action="append", default=[], metavar="KEY=VALUE", help="Hyperparameter override."
    )
    parser.add_argument("--n-envs", type=int, help="Parallel envs instead of the recipe's.")
    args = parser.parse_args()
    try:
        overrides = dict(_override(item) for item in args.set)
    except ValueError as error:
        parser.error(str(error))
    if args.n_envs is not None and args.n_envs < 1:
        parser.error(f"--n-envs must be at least 1, not {args.n_envs}.")

    import torch

    import llmgym  # noqa: F401
    from llmgym.baselines import sb3
    from llmgym.evaluation.exact import agent_act, exact_value, supports_exact

    torch.set_num_threads(1)
    text_id = args.env_id if args.env_id.startswith("Text-") else f"Text-{args.env_id}"
    exact = supports_exact(text_id)

    def value(agent: sb3.SB3Agent) -> float:
        result = exact_value(text_id, agent_act(agent)).value if exact else mean_return(agent)
        print(f"{agent.model.num_timesteps} {result:.4f}", flush=True)
        return result

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

    recipe = sb3.config_for(sb3.base_env_id(args.env_id), args.algo)
    recipe = replace(
        recipe,
        n_timesteps=args.budget,
        hyperparams=recipe.hyperparams | overrides,
        n_envs=args.n_envs or recipe.n_envs,
    )
    curve = sb3.learning_curve(
        args.env_id, args.algo, args.budget, args.every, value, config=recipe
    )
    print("exact values" if exact else f"mean returns of {args.episodes} episodes", end=", ")
    print(f"trained {curve.train_seconds:.0f} s, evaluated {curve.eval_seconds:.0f} s")
    if args.output:
        record = asdict(curve) | {
            "evaluation": "exact" if exact else f"mean return of {args.episodes} episodes",
            "recipe": asdict(recipe),
            "overrides": overrides | ({"n_envs": args.n_envs} if args.n_envs else {}),
            "machine": f"{platform.machine()} CPU, one thread",
            "command": "python experiments/sb3_curve.py " + " ".join(sys.argv[1:]),
        }
        args.output.parent.mkdir(parents=True, exist_ok=True)
        args.output.write_text(json.dumps(record, indent=1, default=str) + "\n")
        print(f"wrote {args.output}")


def _override(item: str) -> tuple[str, object]:
    """``KEY=VALUE`` as a hyperparameter, the value parsed as JSON where it can be.

    Example:
        >>> _override("ent_coef=0.05"), _override("learning_rate=lin_7e-4")
        (('ent_coef', 0.05), ('learning_rate', 'lin_7e-4'))
    """
    key, sep, text = item.partition("=")
    if not sep or not key:
        raise ValueError(f"--set takes KEY=VALUE, not {item!r}.")
    if key in NOT_HYPERPARAMETERS:
        raise ValueError(
            f"--set {key} is not an algorithm hyperparameter here; {NOT_HYPERPARAMETERS[key]}."
        )
    try:
        return key, json.loads(text)
    except json.JSONDecodeError:
        return key, text


if __name__ == "__main__":
    main()
