"""What a model answers on an env's first turn in generate mode: how many answers parse, the
action each parsed one names, and the commonest texts, greedy and sampled (temperature 1), with
the ``{"action": "`` prefill. A GRPO run on the plain language model starts from this.

    python experiments/first_answers.py Text-FrozenLakeMaps4x4-Train-v0 --states 64
    python experiments/first_answers.py Text-Blackjack-v1 --states 4 --model tiny   # a smoke run
"""

from __future__ import annotations

import argparse
from collections import Counter

import torch

from llmgym.integrations import make_text_env
from llmgym.policy import LLMPolicy, PolicyConfig
from llmgym.policy.models import load_model_for

parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
parser.add_argument("env")
parser.add_argument("--states", type=int, default=64, help="first turns of seeds 0..N-1")
parser.add_argument("--model", default="smollm2-135m")
parser.add_argument("--max-new-tokens", type=int, default=6)
parser.add_argument("--threads", type=int, default=1)
args = parser.parse_args()
torch.set_num_threads(args.threads)
model, tokenizer = load_model_for(args.model)
env = make_text_env(args.env)
firsts = [env.reset(seed=s) for s in range(args.states)]
names = list(firsts[0][1]["valid_actions"])
for greedy in (True, False):
    config = PolicyConfig(
        mode="generate", greedy=greedy, max_new_tokens=args.max_new_tokens, seed=0
    )
    policy = LLMPolicy(model, tokenizer, config)
    samples = policy.act_messages(
        [policy.messages_for(i, str(obs), info) for i, (obs, info) in enumerate(firsts)],
        [info["valid_actions"] for _, info in firsts],
        [policy.prefill_for(info) for _, info in firsts],
    )
    named: Counter[str] = Counter()
    for sample in samples:  # the parse does not depend on the map: step any
        env.reset(seed=0)
        parse = env.step(sample.text)[-1]["parse"]
        named[names[parse["action"]] if parse["ok"] else "(not parsed)"] += 1
    texts = Counter(sample.text for sample in samples).most_common(4)
    print(
        f"{'greedy' if greedy else 'sampled (temperature 1)'}: "
        f"{args.states - named['(not parsed)']} of {args.states} answers parse; "
        f"{dict(sorted(named.items()))}; commonest {texts}"
    )
