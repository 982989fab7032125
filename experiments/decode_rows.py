"""Generate mode's decode loop runs every row until the last one stops (issue 51 item 3): how
much of that work is rows that already stopped, and would dropping them change the numerics?

1. One collection of issue 51's throughput config (``benchmarks/train_throughput.py``'s
   ``CONFIG``, generate mode): each answer's length in tokens, the tokens kept, the decode
   positions the loop computed (batch x steps) and the prompt tokens it computed.
2. One decode step over a batch of prompts (a shared prefix, then 5-29 random tokens each),
   then the same step over subsets of its rows (the KV cache's rows selected): whether each
   row's logits are the same bits in the smaller batch.

    python experiments/decode_rows.py smollm2-135m
"""

from __future__ import annotations

import argparse
import collections
import copy
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
from train_throughput import build_trainer  # noqa: E402

from llmgym.policy.backends.hf import TransformersBackend  # noqa: E402
from llmgym.policy.backends.trunk import cache_kwargs  # noqa: E402
from llmgym.policy.models import load_model_for  # noqa: E402


def collection(model: str, workdir: str) -> None:
    trainer, _ = build_trainer(model, "generate", 1, workdir)
    episodes = trainer.collect()
    lengths = collections.Counter(len(s.sample.completion_ids) for e in episodes for s in e.steps)
    stats = trainer.policy.stats
    print(f"answer lengths (tokens: answers): {dict(sorted(lengths.items()))}")
    print(
        f"{sum(lengths.values())} answers: {stats['generated_tokens']} tokens kept, "
        f"{stats['decode_tokens']} decode positions computed; "
        f"{stats['prompt_tokens']} prompt tokens computed"
    )


def row_subsets(model_name: str, rows: int) -> None:
    model, tokenizer = load_model_for(model_name, "cpu")
    model.eval()
    backend = TransformersBackend(model, tokenizer.pad_token_id or 0, "cpu")
    g = torch.Generator().manual_seed(0)
    prefix = torch.randint(50, 200, (60,), generator=g).tolist()
    prompts = []
    for _ in range(rows):
        n = int(torch.randint(5, 30, (1,), generator=g))
        prompts.append(prefix + torch.randint(50, 200, (n,), generator=g).tolist())

    def step(cache, mask, tokens, positions):
        mask = torch.cat([mask, torch.ones_like(mask[:, :1])], 1)
        out = model(
            input_ids=tokens[:, None],
            attention_mask=mask,
            position_ids=positions[:, None],
            **cache_kwargs(model, cache),
            use_cache=True,
        )
        return out.logits[:, -1].float()

    with torch.no_grad():
        logits, cache, mask, _ = backend._encode_prompts(prompts, shared=True)
        tokens, positions = logits.argmax(-1), mask.sum(-1)
        full = step(copy.deepcopy(cache), mask, tokens, positions)
        for keep in (torch.arange(1, rows), torch.arange(0, rows, 3), torch.tensor([1, 2, 5]),
                     torch.tensor([1])):  # fmt: skip
            sub_cache = copy.deepcopy(cache)
            sub_cache.batch_select_indices(keep)
            sub = step(sub_cache, mask[keep], tokens[keep], positions[keep])
            same = sum(torch.equal(full[k], sub[i]) for i, k in enumerate(keep.tolist()))
            print(
                f"{len(keep)} of {rows} rows: {same} rows the same bits, "
                f"max |difference| {float((full[keep] - sub).abs().max()):.3g}"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model", help="tiny, smollm2-135m, ...")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--rows", type=int, default=64)
    parser.add_argument("--workdir", default="/tmp/llmgym-decode-rows")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    collection(args.model, args.workdir)
    row_subsets(args.model, args.rows)


if __name__ == "__main__":
    main()
