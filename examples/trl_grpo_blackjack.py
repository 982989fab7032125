"""Train SmolLM2-135M on Text-Blackjack-v1 with TRL's ``GRPOTrainer`` on a CPU (extra ``[trl]``).

``rollout_func`` plays whole episodes with llmgym's policy on the plain language model; only the
model's own tokens are trained (``env_mask``) and the reward is the episode return. Each GRPO
group of ``--generations`` rollouts plays the same seed, so returns differ only by actions.

    python examples/trl_grpo_blackjack.py --steps 20
    python examples/trl_grpo_blackjack.py --steps 1 --output /tmp/trl-smoke   # a smoke run

It shows the pieces connect; a 135M model needs far more steps than a demo to learn Blackjack.
"""

from __future__ import annotations

import argparse
import os
import time

from llmgym.integrations.trl import episode_dataset, episode_return, rollout_func
from llmgym.policy.models import load_model

ENV_ID = "Text-Blackjack-v1"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="smollm2-135m", help="Short name, Hub id or dir.")
    parser.add_argument("--steps", type=int, default=20, help="GRPO optimizer steps.")
    parser.add_argument("--generations", type=int, default=4, help="Rollouts per seed (group).")
    parser.add_argument("--seeds-per-step", type=int, default=2, help="Groups in one step.")
    parser.add_argument("--lr", type=float, default=5e-5, help="Learning rate (LoRA).")
    parser.add_argument("--output", default="runs/trl-grpo-blackjack", help="Trainer output dir.")
    args = parser.parse_args()

    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    from peft import LoraConfig
    from trl import GRPOConfig, GRPOTrainer

    model, tokenizer = load_model(args.model, device="cpu")
    batch = args.generations * args.seeds_per_step
    config = GRPOConfig(
        output_dir=args.output,
        max_steps=args.steps,
        per_device_train_batch_size=batch,
        num_generations=args.generations,
        learning_rate=args.lr,
        max_completion_length=256,
        bf16=False,
        use_cpu=True,
        gradient_checkpointing=False,
        report_to=[],
        logging_steps=1,
        save_strategy="no",
        seed=0,
    )
    rollout = rollout_func(ENV_ID, max_new_tokens=8)
    trainer = GRPOTrainer(
        model=model,
        reward_funcs=episode_return,
        args=config,
        train_dataset=episode_dataset(ENV_ID, range(1000, 1000 + 64)),
        processing_class=tokenizer,
        rollout_func=rollout,
        peft_config=LoraConfig(r=8, lora_alpha=16, target_modules=["q_proj", "v_proj"]),
    )
    start = time.time()
    trainer.train()
    for row in trainer.state.log_history:
        if "reward" in row:
            print(
                f"step {row['step']:>3}  mean return {row['reward']:+.3f}  "
                f"spread {row['reward_std']:.3f}  loss {row['loss']:+.4f}"
            )
    stats = rollout.stats
    print(
        f"{args.steps} steps in {time.time() - start:.1f} s; {stats['episodes']} episodes, "
        f"{stats['parsed']}/{stats['turns']} answers parsed, "
        f"{stats['retokenized_turns']} turns re-encoded from text."
    )


if __name__ == "__main__":
    main()
