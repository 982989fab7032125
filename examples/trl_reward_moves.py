"""A short TRL GRPO run whose reward moves: the tiny random model on a one-turn toy env (CPU).

The env is a two-action gymnasium bandit made a text env with ``llmgym.wrap`` and a parser of
its own: an answer whose first character (after the ``{"action": "`` prefill) is ASCII with an
even code pays 1, any other answer 0. The random byte-level model (``tiny_model``, 2 layers,
hidden 64) starts about 40% of its answers that way, so GRPO groups have a spread of rewards.
Training goes through llmgym's TRL helpers as docs/integrations.md shows them: ``rollout_func``,
``episode_dataset`` and ``episode_return`` with ``GRPOTrainer``, and the settings the docs
recommend for a spread (8 generations per seed, temperature 1, 4 seeds a step). The answer is
one token (only the first character is rewarded) and all the tiny model's weights train
(``--lora-rank 8`` puts LoRA on q_proj/v_proj instead, as the docs' SmolLM2 example does; on the
tiny model it moves the reward much less). It prints the mean reward of each step and of the
first and last quarter of steps, and writes a JSON record (per-step reward, settings, command,
wall time, machine) to ``--output``.

    python examples/trl_reward_moves.py
    python examples/trl_reward_moves.py --steps 4 --output /tmp/reward_moves.json   # a smoke run

A plumbing-level demonstration on a toy env, not a capability claim: the model learns to start
its answer with an even ASCII character, nothing about any real task.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import gymnasium as gym

import llmgym
from llmgym.parsing import ParseResult

ENV_ID = "LLMGymExample-EvenStart-v0"
PREFILL = '{"action": "'
DEFAULT_OUTPUT = "runs/trl-reward-moves/reward_moves.json"


class EvenStart(gym.Env):
    """One turn, one observation; action 0 ("even") pays 1, action 1 ("odd") pays 0."""

    observation_space = gym.spaces.Discrete(1)
    action_space = gym.spaces.Discrete(2)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        return 0, {}

    def step(self, action: int):
        return 0, float(action == 0), True, False, {}


def first_char_parity(text: str) -> ParseResult:
    """Action 0 when the answer's first character is ASCII with an even code, else 1."""
    answer = text.removeprefix(PREFILL)
    even = bool(answer) and ord(answer[0]) < 128 and ord(answer[0]) % 2 == 0
    return ParseResult(True, "parity", 0 if even else 1)


def make_env() -> gym.Env:
    return llmgym.wrap(
        EvenStart(),
        actions={
            "even": "start the answer with a character whose code point is even",
            "odd": "start it with any other character",
        },
        parser=first_char_parity,
    )


def register() -> str:
    if ENV_ID not in gym.registry:
        gym.register(ENV_ID, entry_point=make_env)
    return ENV_ID


def load(model_name: str, seed: int) -> tuple[Any, Any]:
    if model_name == "tiny":
        from llmgym.policy.testing import tiny_model

        return tiny_model(seed)
    from llmgym.policy.models import load_model

    return load_model(model_name, device="cpu")


def lora_config(settings: dict[str, Any] | None) -> Any:
    if not settings:
        return None
    from peft import LoraConfig

    return LoraConfig(**settings)


def cpu_name() -> str:
    """The CPU's model name (Linux), else what ``platform`` knows."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def quarter_means(values: list[float]) -> tuple[float, float]:
    """Mean of the first and of the last quarter of ``values`` (at least one value each)."""
    k = max(1, len(values) // 4)
    return sum(values[:k]) / k, sum(values[-k:]) / k


def run(
    *,
    steps: int = 20,
    generations: int = 8,
    seeds_per_step: int = 4,
    lr: float = 1e-3,
    lora_rank: int = 0,
    max_new_tokens: int = 1,
    temperature: float = 1.0,
    model_name: str = "tiny",
    seed: int = 0,
) -> dict[str, Any]:
    """Train ``steps`` GRPO steps on the toy env; the record ``main`` writes as JSON."""
    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    import torch
    import trl
    from trl import GRPOConfig, GRPOTrainer

    from llmgym.integrations.trl import episode_dataset, episode_return, rollout_func

    env_id = register()
    model, tokenizer = load(model_name, seed)
    batch = generations * seeds_per_step
    settings = {
        "env": ENV_ID,
        "model": model_name,
        "steps": steps,
        "num_generations": generations,
        "seeds_per_step": seeds_per_step,
        "per_device_train_batch_size": batch,
        "temperature": temperature,
        "learning_rate": lr,
        "lr_scheduler_type": "constant",
        "lora": (
            {"r": lora_rank, "lora_alpha": 2 * lora_rank, "target_modules": ["q_proj", "v_proj"]}
            if lora_rank
            else None
        ),
        "max_new_tokens": max_new_tokens,
        "max_completion_length": 16,
        "seed": seed,
    }
    rollout = rollout_func(env_id, max_new_tokens=max_new_tokens, seed=seed)
    load_at_start = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
    start = time.time()
    with tempfile.TemporaryDirectory() as out:
        config = GRPOConfig(
            output_dir=out,
            max_steps=steps,
            per_device_train_batch_size=batch,
            num_generations=generations,
            temperature=temperature,
            learning_rate=lr,
            lr_scheduler_type="constant",
            max_completion_length=settings["max_completion_length"],
            bf16=False,
            use_cpu=True,
            gradient_checkpointing=False,
            report_to=[],
            logging_steps=1,
            save_strategy="no",
            seed=seed,
        )
        trainer = GRPOTrainer(
            model=model,
            reward_funcs=episode_return,
            args=config,
            train_dataset=episode_dataset(env_id, range(steps * seeds_per_step)),
            processing_class=tokenizer,
            rollout_func=rollout,
            peft_config=lora_config(settings["lora"]),
        )
        trainer.train()
    wall = time.time() - start
    rows = [
        {
            "step": int(h["step"]),
            "reward": float(h["reward"]),
            "reward_std": float(h["reward_std"]),
            "frac_reward_zero_std": float(h["frac_reward_zero_std"]),
            "loss": float(h["loss"]),
        }
        for h in trainer.state.log_history
        if "reward" in h
    ]
    rewards = [r["reward"] for r in rows]
    first, last = quarter_means(rewards)
    return {
        "description": (
            "TRL GRPOTrainer with llmgym's rollout_func/episode_dataset/episode_return on a "
            "one-turn toy env (reward 1 when the answer's first character is ASCII with an "
            f"even code), model {model_name!r}; a plumbing-level demonstration, not a "
            "capability claim"
        ),
        "command": "",
        "settings": settings,
        "steps": rows,
        "reward_first_quarter": first,
        "reward_last_quarter": last,
        "reward_first_step": rewards[0] if rewards else None,
        "reward_last_step": rewards[-1] if rewards else None,
        "frac_reward_zero_std_mean": (
            sum(r["frac_reward_zero_std"] for r in rows) / len(rows) if rows else None
        ),
        "rollout_stats": dict(rollout.stats),
        "wall_time_s": round(wall, 1),
        "machine": {
            "platform": platform.platform(),
            "processor": cpu_name(),
            "cpu_count": os.cpu_count(),
            "torch_threads": torch.get_num_threads(),
            "load_average_1m_at_start": load_at_start,
            "python": platform.python_version(),
            "torch": torch.__version__,
            "trl": trl.__version__,
        },
    }


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=20, help="GRPO optimizer steps.")
    parser.add_argument("--generations", type=int, default=8, help="Rollouts per seed (group).")
    parser.add_argument("--seeds-per-step", type=int, default=4, help="Groups in one step.")
    parser.add_argument("--lr", type=float, default=1e-3, help="Learning rate.")
    parser.add_argument("--lora-rank", type=int, default=0, help="LoRA rank; 0: all weights.")
    parser.add_argument("--model", default="tiny", help="'tiny' (random, 2 layers) or a model.")
    parser.add_argument("--seed", type=int, default=0, help="Model, sampling and trainer seed.")
    parser.add_argument("--output", default=DEFAULT_OUTPUT, help="Where the JSON record goes.")
    args = parser.parse_args(argv)
    record = run(
        steps=args.steps,
        generations=args.generations,
        seeds_per_step=args.seeds_per_step,
        lr=args.lr,
        lora_rank=args.lora_rank,
        model_name=args.model,
        seed=args.seed,
    )
    words = sys.argv[1:] if argv is None else argv
    record["command"] = shlex.join(["python", "examples/trl_reward_moves.py", *words])
    for row in record["steps"]:
        print(
            f"step {row['step']:>3}  mean reward {row['reward']:.3f}  "
            f"frac_reward_zero_std {row['frac_reward_zero_std']:.2f}  loss {row['loss']:+.1e}"
        )
    print(
        f"mean reward: first quarter {record['reward_first_quarter']:.3f}, last quarter "
        f"{record['reward_last_quarter']:.3f} ({len(record['steps'])} steps, "
        f"{record['wall_time_s']:.0f} s)"
    )
    output = Path(args.output)
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(json.dumps(record, indent=2) + "\n")
    print(f"wrote {output}")
    return record


if __name__ == "__main__":
    main()
