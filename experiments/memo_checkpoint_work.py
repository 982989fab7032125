"""The model work of a head run on the frozen tiny model across checkpoints: the prompt tokens
its backbone computed, with a checkpoint after every update and the held-out maps evaluated
exactly every other update. Run it on two trees to compare (``PYTHONPATH=TREE``): a tree whose
checkpoints forget the memoised features computes them again after each one.

    python experiments/memo_checkpoint_work.py
"""

from __future__ import annotations

import tempfile

import torch

from llmgym.rl import make_trainer

torch.set_num_threads(1)
with tempfile.TemporaryDirectory() as out:
    trainer = make_trainer(
        "ppo", model="tiny", env_id="Text-FrozenLakeMaps4x4-Train-v0", num_envs=8,
        episodes_per_update=16, total_episodes=96, total_env_steps=10**6, action_head=True,
        train_backbone=False, checkpoint_every=1, eval_every=2, progress=False,
        num_threads=1, output_dir=out,
        **{"eval.env_kwargs": {"map_set": "heldout"}, "eval.start": False},
    )  # fmt: skip
    trainer.train()
    stats = trainer.policy.stats
    print(
        f"{trainer.state.iteration} updates, {trainer.state.env_steps} env steps: "
        f"{stats['prompt_tokens']} prompt tokens computed, {stats['cached_tokens']} from the "
        f"cached prefix, {len(trainer.policy._memo)} prompts memoised"
    )
