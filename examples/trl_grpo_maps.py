"""TRL's ``GRPOTrainer`` on FrozenLake's train maps, with the held-out maps' success as a curve.

The language model itself (LoRA, no head) plays whole multi-turn episodes through llmgym's
``rollout_func`` on ``Text-FrozenLakeMaps4x4-Train-v0`` (the 1,000 train maps, non-slippery
4x4, at most ``--max-turns`` moves); the reward is the episode return (1 on reaching the goal).
Every ``--eval-every`` steps, and before the first, its greedy policy plays each of the first
``--eval-maps`` held-out maps (``Text-FrozenLakeMaps4x4-Heldout-v0``, none of which training
plays) once, with the same prompts and move limit. The env and greedy decoding are deterministic,
so that one play per map is the policy's exact success on it; the curve's point is the mean.
Step 0 is the zero-shot model's.

    python examples/trl_grpo_maps.py --steps 60 --output runs/trl-maps-s0
    python examples/trl_grpo_maps.py --steps 60 --output runs/trl-maps-s0 --resume   # go on
    python examples/trl_grpo_maps.py --model tiny --steps 2 --eval-every 1 --eval-maps 2 \\
        --max-turns 2 --output /tmp/trl-maps-smoke                                 # a smoke run

The trainer checkpoints every ``--eval-every`` steps (LoRA weights, optimizer, step) into
``--output``; ``--resume`` goes on from the newest one. ``record.json`` there is rewritten at
every step: the settings, the commands, each step's mean reward, and the curve.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import sys
import time
import warnings
from pathlib import Path
from typing import Any

from llmgym.envs.maps import MAP_SETS

TRAIN_ID = "Text-FrozenLakeMaps4x4-Train-v0"
HELDOUT_ID = "Text-FrozenLakeMaps4x4-Heldout-v0"
RECORD = "record.json"


def heldout_success(model: Any, tokenizer: Any, maps: int, max_turns: int, new_tokens: int):
    """``(success, parse rate)`` of the greedy policy on the first ``maps`` held-out maps."""
    import torch

    from llmgym.integrations.trl import rollout_func
    from llmgym.policy import LLMPolicy, PolicyConfig

    config = PolicyConfig(mode="generate", greedy=True, max_new_tokens=new_tokens)
    policy = LLMPolicy(model, tokenizer, config)
    rollout = rollout_func(HELDOUT_ID, max_turns=max_turns, max_new_tokens=new_tokens)
    was_training = model.training
    model.eval()
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # one episode a seed: "flat" groups
        played = rollout.play(policy, range(maps))
    model.train(was_training)
    wins = sum(r > 0 for r in played["episode_return"])
    return wins / maps, rollout.stats["parsed"] / max(rollout.stats["turns"], 1)


def resumed_step(output: Path) -> int:
    """The step of the newest checkpoint in ``output`` (0 if there is none)."""
    from transformers.trainer_utils import get_last_checkpoint

    last = get_last_checkpoint(str(output)) if output.is_dir() else None
    if last is None:
        return 0
    return int(json.loads((Path(last) / "trainer_state.json").read_text())["global_step"])


def machine() -> dict[str, Any]:
    import torch
    import trl

    return {
        "platform": platform.platform(),
        "cpu_count": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "trl": trl.__version__,
    }


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="smollm2-135m", help="'tiny', a short name or a dir.")
    parser.add_argument("--steps", type=int, default=60, help="GRPO optimizer steps in all.")
    parser.add_argument("--generations", type=int, default=8, help="Episodes per map (group).")
    parser.add_argument("--seeds-per-step", type=int, default=2, help="Train maps a step.")
    parser.add_argument("--lr", type=float, default=3e-4, help="Learning rate (LoRA).")
    parser.add_argument("--lora-rank", type=int, default=16, help="LoRA rank (last 8 layers).")
    parser.add_argument("--max-turns", type=int, default=10, help="Moves per episode at most.")
    parser.add_argument("--max-new-tokens", type=int, default=6, help="Tokens per answer.")
    parser.add_argument("--eval-every", type=int, default=10, help="Steps between evaluations.")
    parser.add_argument("--eval-maps", type=int, default=50, help="Held-out maps evaluated.")
    parser.add_argument("--seed", type=int, default=0, help="Trainer and sampling seed.")
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads.")
    parser.add_argument("--output", required=True, help="Checkpoints and record.json go here.")
    parser.add_argument("--resume", action="store_true", help="Go on from the newest checkpoint.")
    args = parser.parse_args(argv)
    for name in ("steps", "generations", "seeds_per_step", "max_turns", "max_new_tokens"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be 1 or more")
    if not 1 <= args.eval_maps <= MAP_SETS["heldout"] or args.eval_every < 1:
        parser.error(
            f"--eval-maps must be 1-{MAP_SETS['heldout']} (the held-out set) and --eval-every 1 "
            "or more"
        )

    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    import torch
    from peft import LoraConfig
    from transformers import TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    from llmgym.integrations.trl import episode_dataset, episode_return, rollout_func
    from llmgym.policy.models import load_model_for

    torch.set_num_threads(args.threads)
    output = Path(args.output)
    record_path = output / RECORD
    start_step = resumed_step(output) if args.resume else 0
    if args.resume and record_path.is_file():
        record = json.loads(record_path.read_text())
        record["curve"] = [p for p in record["curve"] if p["step"] <= start_step]
    else:
        record = {"description": __doc__.splitlines()[0], "settings": vars(args), "curve": []}
    words = sys.argv[1:] if argv is None else argv
    record.setdefault("commands", []).append(
        shlex.join(["python", "examples/trl_grpo_maps.py", *words])
    )
    record["machine"] = machine()

    model, tokenizer = load_model_for(args.model, device="cpu")  # `tiny` too
    layers = model.config.num_hidden_layers
    batch = args.generations * args.seeds_per_step  # episodes a step
    rollout = rollout_func(
        TRAIN_ID, max_turns=args.max_turns, max_new_tokens=args.max_new_tokens, seed=args.seed
    )

    def evaluate(step: int, trainer_model: Any) -> None:
        begin = time.time()
        success, parsed = heldout_success(
            trainer_model, tokenizer, args.eval_maps, args.max_turns, args.max_new_tokens
        )
        point = {
            "step": step,
            "episodes": step * batch,
            "heldout_success": success,
            "heldout_parse_rate": round(parsed, 4),
            "eval_s": round(time.time() - begin, 1),
        }
        record["curve"].append(point)
        print(
            f"step {step}: held-out success {success:.2f} on {args.eval_maps} maps "
            f"(answers parsed {parsed:.2f}, {point['eval_s']:.0f} s)",
            flush=True,
        )
        save()

    def save() -> None:
        output.mkdir(parents=True, exist_ok=True)
        record["steps"] = [
            {"step": int(h["step"]), "reward": float(h["reward"]), "loss": float(h["loss"])}
            for h in trainer.state.log_history
            if "reward" in h
        ]
        record["rollout_stats"] = dict(rollout.stats)
        record_path.write_text(json.dumps(record, indent=2) + "\n")

    class HeldOut(TrainerCallback):
        def on_step_end(self, _args, state, control, **kwargs):
            if state.global_step % args.eval_every == 0 or state.global_step == args.steps:
                evaluate(state.global_step, trainer.model)

        def on_log(self, _args, state, control, **kwargs):
            save()  # each step's reward, as soon as TRL logs it

    config = GRPOConfig(
        output_dir=str(output),
        max_steps=args.steps,
        per_device_train_batch_size=batch,
        num_generations=args.generations,
        temperature=1.0,
        learning_rate=args.lr,
        lr_scheduler_type="constant",
        max_completion_length=args.max_turns * 96,
        bf16=False,
        use_cpu=True,
        gradient_checkpointing=False,
        report_to=[],
        logging_steps=1,
        save_strategy="steps",
        save_steps=args.eval_every,
        save_total_limit=1,
        seed=args.seed,
    )
    lora = LoraConfig(
        r=args.lora_rank,
        lora_alpha=2 * args.lora_rank,
        target_modules=["q_proj", "v_proj"],
        layers_to_transform=list(range(max(0, layers - 8), layers)),
    )
    trainer = GRPOTrainer(
        model=model,
        reward_funcs=episode_return,
        args=config,
        train_dataset=episode_dataset(TRAIN_ID, range(MAP_SETS["train"])),  # every train map
        processing_class=tokenizer,
        rollout_func=rollout,
        peft_config=lora,
        callbacks=[HeldOut()],
    )
    if not record["curve"]:
        evaluate(0, trainer.model)
    begin = time.time()
    trainer.train(resume_from_checkpoint=True if start_step else None)
    record["train_wall_s"] = record.get("train_wall_s", 0.0) + round(time.time() - begin, 1)
    save()
    for row in record["steps"]:
        print(f"step {row['step']:>3}  mean reward {row['reward']:.3f}  loss {row['loss']:+.4f}")
    print(f"wrote {record_path}")
    return record


if __name__ == "__main__":
    main()
