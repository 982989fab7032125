"""The model work of a run across checkpoints: the prompt tokens run through the model, with a
checkpoint after every update and an exact evaluation every other update. ``--policy head``: a
head on the frozen tiny model, on FrozenLake's train maps, evaluated on the held-out maps (its
backbone's features memoised). ``--policy lora``: the Q-critic LM-alone shape on Blackjack, LoRA
on the tiny model's top layer (its frozen trunk's states kept). Run it on two trees to compare
(``PYTHONPATH=TREE``): a tree whose checkpoints forget what the policy keeps computes it again
after each one.

    python experiments/memo_checkpoint_work.py --policy head
    python experiments/memo_checkpoint_work.py --policy lora
"""

from __future__ import annotations

import argparse
import tempfile

import torch

from llmgym.rl import make_trainer

RUNS = {
    "head": dict(
        algo="ppo", env_id="Text-FrozenLakeMaps4x4-Train-v0", action_head=True,
        train_backbone=False, **{"eval.env_kwargs": {"map_set": "heldout"}},
    ),
    "lora": dict(
        algo="qac", env_id="Text-Blackjack-v1", action_head=False, lora_layers=1,
        head_layers=[1], minibatch_size=8, learning_rate=3e-3, q_window=40, q_step=3.0,
        q_ridge=0.0, update_epochs=1, gae_lambda=1.0, target_kl=None,
    ),
}  # fmt: skip

parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
parser.add_argument("--policy", choices=sorted(RUNS), default="head")
settings = dict(RUNS[parser.parse_args().policy])
torch.set_num_threads(1)
with tempfile.TemporaryDirectory() as out:
    trainer = make_trainer(
        settings.pop("algo"), model="tiny", num_envs=8, episodes_per_update=16,
        total_episodes=96, total_env_steps=10**6, checkpoint_every=1, eval_every=2,
        progress=False, num_threads=1, output_dir=out, **{"eval.start": False}, **settings,
    )  # fmt: skip
    trainer.train()
    stats = trainer.policy.stats
    print(
        f"{trainer.state.iteration} updates, {trainer.state.env_steps} env steps: "
        f"{stats['prompt_tokens']} prompt tokens computed, {stats['cached_tokens']} from the "
        f"cached prefix, {len(trainer.policy._memo)} prompts memoised"
    )
