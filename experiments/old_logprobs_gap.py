"""How far the log-probs acting recorded are from the PPO update's recompute of the old log-probs
under the same weights (issue 51 item 4): tiny model, PPO, no head, 64 envs, one collection.

    python experiments/old_logprobs_gap.py
"""

import time

import torch

from llmgym.rl import make_trainer

torch.set_num_threads(1)
for mode in ("score", "generate"):
    t = make_trainer(
        "ppo",
        model="tiny",
        mode=mode,
        num_envs=64,
        episodes_per_update=64,
        action_head=False,
        progress=False,
        num_threads=1,
        max_new_tokens=24,
        output_dir=f"/tmp/ova-{mode}",
        device="cpu",
        dtype="float32",
    )
    eps = t.collect()
    samples = [s.sample for e in eps for s in e.steps]
    t.learner.model.train()
    c0 = time.process_time()
    logps, tokens, _ = t.learner.old_logprobs(samples)
    c1 = time.process_time()
    acted = torch.tensor([sum(s.logprobs) for s in samples])
    diff = (logps - acted).abs()
    print(
        f"{mode}: {len(samples)} samples, max |old - acted| log-prob {float(diff.max()):.3g}, "
        f"mean {float(diff.mean()):.3g}, equal bitwise {int((diff == 0).sum())}/{len(samples)}; "
        f"recompute {c1 - c0:.2f} CPU s"
    )
