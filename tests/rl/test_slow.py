"""End to end with the real embedded model (offline): SmolLM2-135M acts on Text-Blackjack-v1.

The first run on a machine converts the GGUF into the cache (~1 minute); later runs load the
cached safetensors copy in seconds.
"""

from __future__ import annotations

import gymnasium as gym
import pytest
import torch

from llmgym.policy.models import load_model
from llmgym.policy.policy import PREFILL, LLMPolicy, PolicyConfig
from llmgym.policy.testing import text_observations as observations


@pytest.mark.slow
def test_embedded_model_acts_on_blackjack_in_both_modes(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    model, tokenizer = load_model("smollm2-135m", device="cpu")
    assert model.config.num_hidden_layers == 30 and model.dtype == torch.float32
    obs, infos = observations("Text-Blackjack-v1", 3)

    score = LLMPolicy(model, tokenizer, PolicyConfig(mode="score"))
    samples = score.act(obs, infos)
    for sample, info in zip(samples, infos):
        assert sample.text in [f'{PREFILL}{a}"}}' for a in info["valid_actions"]]
    torch.testing.assert_close(
        score.evaluate(samples).logprob.detach(),
        torch.tensor([s.logprobs[0] for s in samples]),
        atol=1e-3,
        rtol=0,
    )

    generate = LLMPolicy(model, tokenizer, PolicyConfig(mode="generate", greedy=True))
    env = gym.make("Text-Blackjack-v1")
    env.reset(seed=0)
    for sample in generate.act(obs, infos):
        assert sample.text.startswith(PREFILL) and sample.completion_ids
        # Without an example action in the prompt the zero-shot model's free answer need not
        # name a valid action; the env must still step it and say how it was read.
        parse = env.step(sample.text)[-1]["parse"]
        assert parse["method"] in ("json", "regex", "fuzzy", "fallback"), sample.text
        assert parse["ok"] == (parse["method"] != "fallback")
        env.reset(seed=0)
