"""One tokenizer call per acting step (issue 51): the prompts and every candidate answer are
tokenized in one batch, and the ids equal the one-text-at-a-time tokenization's."""

from __future__ import annotations

import pytest

from llmgym.policy.policy import LLMPolicy, PolicyConfig
from llmgym.policy.prompts import candidate_ids, encode, prompt_and_candidate_ids
from llmgym.policy.testing import text_observations, tiny_model


@pytest.fixture(scope="module")
def tokenizers():
    from llmgym.policy.models import load_tokenizer

    return {"tiny": tiny_model()[1], "smollm2-135m": load_tokenizer("smollm2-135m")}


@pytest.mark.parametrize("name", ["tiny", "smollm2-135m"])
@pytest.mark.parametrize("prefilled", [True, False])
def test_batched_ids_equal_one_text_at_a_time(tokenizers, name, prefilled):
    tokenizer = tokenizers[name]
    prompts = [
        "<|im_start|>user\nYour hand: 14, dealer shows 10.<|im_end|>\n<|im_start|>assistant\n",
        'Cart at -0.02, pole at 0.03. {"action": "',
        "trailing space ",
        "",
        "ünïcödé → 🃏",
    ]
    actions = [["stick", "hit"], ["push left", "push right"], ["a"], ["x y z"], ["stick"]]
    ids, candidates = prompt_and_candidate_ids(tokenizer, prompts, actions, prefilled)
    assert ids == [encode(tokenizer, p) for p in prompts]
    assert candidates == [
        [candidate_ids(tokenizer, p, i, a, prefilled) for a in acts]
        for p, i, acts in zip(prompts, ids, actions)
    ]


@pytest.mark.parametrize("mode", ["score", "generate"])
def test_a_step_calls_the_tokenizer_once(mode):
    model, tokenizer = tiny_model()
    policy = LLMPolicy(model, tokenizer, PolicyConfig(mode=mode, greedy=True, max_new_tokens=4))
    calls = []
    real = type(policy.tokenizer).__call__

    def counted(self, text, *args, **kwargs):
        calls.append(len(text) if isinstance(text, list) else 1)
        return real(self, text, *args, **kwargs)

    obs, infos = text_observations("Text-Blackjack-v1", 5)
    policy.act(obs, infos)  # the first call may tokenize fixed things (stop ids, a prefix)
    calls.clear()
    type(policy.tokenizer).__call__ = counted
    try:
        samples = policy.act(obs, infos)
    finally:
        type(policy.tokenizer).__call__ = real
    texts = 5 + (sum(len(s.valid_actions) for s in samples) if mode == "score" else 0)
    assert calls == [texts]  # one call over every prompt (and candidate)
