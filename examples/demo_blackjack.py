"""`make demo`: online RL from scratch (no demos, no expert) makes the embedded SmolLM2-135M
play Text-Blackjack-v1 better, on a CPU in a few minutes, measured exactly.

PPO trains a zero-initialised action head on the frozen model's hidden state with SGD (the
policy at the start is the language model's own, zero-shot). The greedy policy's expected return is
computed exactly from Blackjack's rules (infinite deck, as in Gymnasium) before and after
training and printed next to fixed reference policies, then the learning curve is written.

    python examples/demo_blackjack.py                    # ~3 minutes on one CPU thread
    python examples/demo_blackjack.py --episodes 200 --model tiny   # a smoke run

The same run from the command line:

    llmgym train Text-Blackjack-v1 --algo ppo --episodes 2000 --steps 1000000 \
        --episodes-per-update 40 --eval-every 10 \
        --set train_backbone=false --set update_epochs=8 --set temperature=2.0 \
        --set ent_coef=0.05 --set anneal_lr=true --set value_lr=3e-3 --set gae_lambda=0.5 \
        --threads 1

(``bash benchmarks/rl_from_scratch.sh blackjack-ppo-s0`` is that run, recorded.)
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from llmgym.agents.registry import make_agent
from llmgym.evaluation.exact import exact_value
from llmgym.policy.models import load_model_for
from llmgym.rl import config_class
from llmgym.rl.plotting import plot_run
from llmgym.rl.trainer import Trainer

ENV_ID = "Text-Blackjack-v1"


def fixed_policy(stick_at: int):
    """Answers 'hit' below ``stick_at`` (the player's total), 'stick' from it on."""

    def act(observations: list[str], infos: list[dict]) -> list[str]:
        totals = [info["raw_obs"][0] for info in infos]
        return [f'{{"action": "{"hit" if t < stick_at else "stick"}"}}' for t in totals]

    return act


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=2000, help="RL training episodes")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=1, help="torch threads")
    parser.add_argument("--output", default="runs/demo-blackjack")
    parser.add_argument("--model", default="smollm2-135m", help="tiny = smoke test")
    args = parser.parse_args()

    start = time.perf_counter()
    print(f"Loading {args.model} (embedded, offline) ... PPO from scratch on {ENV_ID}")
    config = config_class("ppo").build(
        dict(
            env_id=ENV_ID,
            model=args.model,
            mode="score",
            num_envs=8,
            total_env_steps=10**9,
            total_episodes=args.episodes,
            episodes_per_update=40,
            train_backbone=False,  # the LM stays frozen; the action head learns
            update_epochs=8,
            gae_lambda=0.5,  # the critic's bootstrap cuts the variance of Blackjack's returns
            temperature=2.0,  # explore: zero-shot the model always hits
            ent_coef=0.05,
            anneal_lr=True,  # small last updates: the final policy is not its last batch's noise
            value_lr=3e-3,
            eval_every=10,
            seed=args.seed,
            output_dir=args.output,
            num_threads=args.threads,
            progress=True,
        )
    )
    model, tokenizer = load_model_for(config.policy.model)
    trainer = Trainer(config, model=model, tokenizer=tokenizer)
    before = trainer.evaluation.exact_value(trainer.policy)["mean_return"]
    print(f"zero-shot greedy policy, exact expected return: {before:+.4f}")
    trainer.train()
    after = trainer.evaluation.exact_value(trainer.policy)["mean_return"]
    weights = trainer.save_policy(Path(args.output) / "policy")
    wall = time.perf_counter() - start

    optimal = exact_value(ENV_ID, make_agent("optimal", ENV_ID).act_batch).value
    references = {
        "always stick": exact_value(ENV_ID, fixed_policy(0)).value,
        "hit below 12 (stick at 12+)": exact_value(ENV_ID, fixed_policy(12)).value,
        "hit below 17 (dealer's rule)": exact_value(ENV_ID, fixed_policy(17)).value,
        "optimal (dynamic programming)": optimal,
    }
    png = plot_run(
        args.output,
        references={"always stick": references["always stick"], "optimal": optimal},
        title=f"{ENV_ID}: {args.model}, PPO from scratch (action head, frozen LM)",
    )
    print("\nExpected return of the greedy policy, computed exactly (no sampling noise):")
    rows = [(f"{args.model} zero-shot", before), (f"{args.model} after PPO", after)]
    for name, value in rows + list(references.items()):
        print(f"  {name:<34} {value:+.4f}")
    print(
        f"\nTrained on {trainer.state.episodes_done} episodes / {trainer.state.env_steps} env "
        f"steps in "
        f"{wall / 60:.1f} min. Learning curve: {png}. Policy: {weights}"
    )
    summary = {
        "env_id": ENV_ID,
        "model": args.model,
        "algo": "ppo",
        "mode": "score",
        "sft": "none",
        "env_steps": trainer.state.env_steps,
        "episodes": trainer.state.episodes_done,
        "wall_s": round(wall, 1),
        "eval_method": "exact",
        "start_value": before,
        "eval_value": after,
        "references": references,
        "weights": str(weights),
        "command": "python examples/demo_blackjack.py "
        + " ".join(f"--{k.replace('_', '-')} {v}" for k, v in vars(args).items()),
    }
    Path(args.output, "demo_result.json").write_text(json.dumps(summary, indent=2))


if __name__ == "__main__":
    main()
