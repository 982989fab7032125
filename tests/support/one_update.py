"""One update of the tiny model on a fixed Blackjack batch, in one process or in each process
of ``torchrun``: every process plays the same 16 episodes (same seeds, same sampler), keeps its
share (whole groups for GRPO) and takes the update; the main process saves the trained weights.

    python tests/support/one_update.py ALGO OUT_DIR
    torchrun --nproc_per_node 2 tests/support/one_update.py ALGO OUT_DIR
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch
from safetensors.torch import save_file

from llmgym.rl import make_trainer
from llmgym.rollout import play


def main(algo: str, out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    grpo = algo == "grpo"
    trainer = make_trainer(
        algo,
        model="tiny",
        env_id="Text-Blackjack-v1",
        num_envs=16,
        episodes_per_update=16,
        prefix_cache_grad=False,  # exact gradients: the cache's depend on the micro-batches
        temperature=5.0,  # mixed answers, so that returns (and GRPO groups) differ
        minibatch_size=64,
        micro_batch_size=4,
        update_epochs=1,
        learning_rate=1e-2,
        output_dir=str(out / "run"),
        progress=False,
        num_threads=1,
        **({"group_size": 4} if grpo else {}),
        # qac: the critic fitted before the update (else it is zero there, the actor's target is
        # the rollout policy itself, and Adam's first step turns rounding noise into full steps)
        **({"q_window": 1} if algo == "qac" else {}),
    )
    torch.manual_seed(0)
    trainer.policy.generator.manual_seed(0)
    groups = [g for g in range(4) for _ in range(4)] if grpo else None
    seeds = [100 + g for g in groups] if grpo else list(range(100, 116))
    with torch.no_grad():
        episodes = play(trainer.policy.act, trainer.envs, seeds, groups=groups)
    processes = trainer.processes
    mine = [e for e in episodes if (e.group if grpo else e.index) % processes.num == processes.rank]
    trainer.train_on_episodes(mine)
    if processes.is_main:
        modules = {"model": trainer.model, **trainer.learner.extra_modules}
        weights = {
            f"{name}.{key}": p.detach().contiguous()
            for name, module in modules.items()
            for key, p in module.named_parameters()
            if p.requires_grad
        }
        save_file(weights, str(out / "weights.safetensors"))
        (out / "env_steps").write_text(str(trainer.state.env_steps))


if __name__ == "__main__":
    main(sys.argv[1], Path(sys.argv[2]))
