"""Whether a Q-critic run's limit is its critic or its actor: the exact value, on an env (e.g.
the held-out map set), of the greedy policy of the run's critic (each state's valid action of
highest Q) beside that of its actor (the language model's own greedy choice), from the run's
newest checkpoint (or the checkpoint given).

    python experiments/critic_greedy.py runs/rl/frozenlake-maps-lm-qac-s0/checkpoints/iter_000280 \\
        --env-kwarg map_set=heldout
"""

from __future__ import annotations

import argparse
import json

import torch

from llmgym.evaluation.exact import exact_value
from llmgym.rl import restore_trainer

parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
parser.add_argument("run")
parser.add_argument("--env-kwarg", action="append", default=[], help="KEY=VALUE (strings)")
parser.add_argument("--threads", type=int, default=1)
args = parser.parse_args()
torch.set_num_threads(args.threads)
trainer = restore_trainer(args.run, "cpu")
policy, critic = trainer.policy, trainer.algorithm.critic
config = trainer.config.run
env_kwargs = dict(config.env_kwargs or {}) | dict(kv.split("=", 1) for kv in args.env_kwarg)


def chooser(by_critic: bool):
    def act(observations: list[str], infos: list[dict]) -> list[str]:
        samples = [
            policy.score_sample(policy.messages_for(0, obs, info), info["valid_actions"], 0)
            for obs, info in zip(observations, infos)
        ]
        with torch.no_grad():
            out = policy.forward_samples(samples)
            scores = critic.q_values(out.hidden, samples) if by_critic else out.candidate_logprobs
        return [
            json.dumps({"action": s.valid_actions[int(torch.argmax(q))]})
            for s, q in zip(samples, scores)
        ]

    return act


trainer.model.eval()
state = trainer.state
print(f"{args.run}: update {state.iteration}, {state.episodes_done} episodes")
for name, by_critic in (("actor (the LM's greedy choice)", False), ("critic (argmax Q)", True)):
    result = exact_value(config.env_id, chooser(by_critic), env_kwargs)
    print(f"{name}: exact value {result.value:.4f} on {config.env_id} {env_kwargs}")
