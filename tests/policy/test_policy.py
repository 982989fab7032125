"""LLMPolicy on the tiny model: batching, padding, KV-cache scoring, forward_samples(), LoRA."""

from __future__ import annotations

import dataclasses

import gymnasium as gym
import numpy as np
import pytest
import torch

from llmgym.policy.policy import (
    PREFILL,
    LLMPolicy,
    PolicyConfig,
    build_messages,
    split_infos,
)
from llmgym.policy.testing import text_observations as observations
from llmgym.policy.testing import tiny_model


def plain_logprobs(model, ids: list[int], completion: list[int]) -> torch.Tensor:
    """Token log-probs of ``completion`` after ``ids``: one unpadded forward, no cache."""
    full = torch.tensor([ids + completion])
    with torch.no_grad():
        logp = torch.log_softmax(model(full).logits[0].float(), -1)
    positions = torch.arange(len(ids) - 1, len(ids) + len(completion) - 1)
    return logp[positions, torch.tensor(completion)]


@pytest.mark.parametrize("mode", ["score", "generate"])
def test_batched_equals_unbatched_under_greedy(tiny, blackjack, mode):
    model, tokenizer = tiny
    config = PolicyConfig(mode=mode, greedy=True, max_new_tokens=6)
    batched = LLMPolicy(model, tokenizer, config).act(*blackjack)
    for i, (obs, info) in enumerate(zip(*blackjack)):
        [single] = LLMPolicy(model, tokenizer, config).act([obs], [info])
        assert single.text == batched[i].text
        assert single.completion_ids == batched[i].completion_ids
        assert single.prompt_ids == batched[i].prompt_ids
        np.testing.assert_allclose(single.logprobs, batched[i].logprobs, atol=1e-4)


@pytest.mark.parametrize("normalization", ["sum", "token", "word"])
def test_score_logprobs_equal_a_plain_forward(tiny, normalization):
    model, tokenizer = tiny
    obs, infos = observations("Text-Blackjack-v1", 3)
    infos[1] = {**infos[1], "valid_actions": ["stick", "hit", "hit me twice"]}  # uneven sizes
    policy = LLMPolicy(model, tokenizer, PolicyConfig(normalization=normalization, temperature=7))
    for sample in policy.act(obs, infos):
        sums = torch.stack(
            [plain_logprobs(model, sample.prompt_ids, c).sum() for c in sample.candidate_ids]
        )
        if normalization == "token":
            sums = sums / torch.tensor([len(c) for c in sample.candidate_ids])
        elif normalization == "word":
            sums = sums / torch.tensor([len(a.split()) for a in sample.valid_actions])
        expected = torch.log_softmax(sums / 7, -1)[sample.action_index]
        assert sample.logprobs[0] == pytest.approx(float(expected), abs=1e-4)
        assert sample.completion_ids == sample.candidate_ids[sample.action_index]
        assert tokenizer.decode(sample.prompt_ids + sample.completion_ids).endswith(
            sample.text + ""
        )


@pytest.mark.parametrize("layers", [(0,), (1,), (1, 0), (-1,), (1, -1)])
@pytest.mark.parametrize("shared", [False, True])
def test_hidden_states_alone_equal_those_score_returns(tiny, layers, shared):
    from llmgym.policy.backends.hf import TransformersBackend

    model, tokenizer = tiny
    backend = TransformersBackend(model, tokenizer.pad_token_id, "cpu")
    prompts = [list(range(5, 20)) + [30, 31], list(range(5, 20)) + [40]]  # uneven, shared 15
    with torch.no_grad():
        want, _ = backend.score(prompts, [[[8]], [[9]]], hidden=True, shared=shared, layers=layers)
    got = backend.hidden_states(prompts, shared=shared, layers=layers)
    assert got.shape == (2, 64 * len(layers)) and got.requires_grad
    assert torch.allclose(got, want, atol=1e-5)


def test_score_is_always_valid_and_sampling_is_seeded(tiny, cartpole):
    model, tokenizer = tiny
    config = PolicyConfig(normalization="token", temperature=50, seed=3)
    first = [s.text for s in LLMPolicy(model, tokenizer, config).act(*cartpole)]
    again = [s.text for s in LLMPolicy(model, tokenizer, config).act(*cartpole)]
    assert first == again
    env = gym.make("Text-CartPole-v1")
    env.reset(seed=0)
    for text in first:
        assert env.step(text)[-1]["parse"]["method"] == "json"


def test_action_scores_stay_finite_where_probabilities_round_to_zero(tiny, cartpole):
    model, tokenizer = tiny
    warm = LLMPolicy(model, tokenizer, PolicyConfig(temperature=1.0))
    scores = np.array(warm.action_scores(*cartpole))
    probs = np.array(warm.action_probabilities(*cartpole))
    assert np.allclose(probs, np.exp(scores) / np.exp(scores).sum(1, keepdims=True), atol=1e-6)
    cold = LLMPolicy(model, tokenizer, PolicyConfig(temperature=1e-6))
    assert (np.array(cold.action_probabilities(*cartpole)) == 0).any()
    assert np.allclose(cold.action_scores(*cartpole), scores, atol=1e-5)


def test_generate_logprobs_equal_a_plain_forward_and_left_padding(tiny, blackjack):
    model, tokenizer = tiny
    policy = LLMPolicy(model, tokenizer, PolicyConfig(mode="generate", max_new_tokens=5))
    samples = policy.act(*blackjack)
    assert len({len(s.prompt_ids) for s in samples}) > 1  # the batch really was padded
    for s in samples:
        expected = plain_logprobs(model, s.prompt_ids, s.completion_ids)
        np.testing.assert_allclose(s.logprobs, expected.numpy(), atol=1e-4)
        assert s.text.startswith(PREFILL)
        assert (
            tokenizer.decode(s.completion_ids, skip_special_tokens=True) == s.text[len(PREFILL) :]
        )


def test_generate_stops_at_end_of_turn(tiny, blackjack):
    model, tokenizer = tiny
    config = PolicyConfig(mode="generate", greedy=True, max_new_tokens=9, stop_at_answer=False)
    policy = LLMPolicy(model, tokenizer, config)
    free = policy.act(*blackjack)
    assert all(len(s.completion_ids) == 9 for s in free)
    stop = free[0].completion_ids[2]
    policy.stop_ids = [*policy.stop_ids, stop]
    stopped = policy.act(*blackjack)
    for before, after in zip(free, stopped):
        end = before.completion_ids.index(stop) + 1 if stop in before.completion_ids else 9
        assert after.completion_ids == before.completion_ids[:end]
    assert len(stopped[0].completion_ids) <= 3


@pytest.mark.parametrize("mode", ["score", "generate"])
def test_forward_samples_matches_act_and_has_gradients(tiny, blackjack, mode):
    model, tokenizer = tiny
    policy = LLMPolicy(model, tokenizer, PolicyConfig(mode=mode, temperature=3, max_new_tokens=4))
    samples = policy.act(*blackjack)
    out = policy.forward_samples(samples)
    acted = torch.tensor([sum(s.logprobs) for s in samples])
    torch.testing.assert_close(out.logprob.detach(), acted, atol=1e-4, rtol=0)
    assert out.entropy.shape == (4,) and bool((out.entropy >= 0).all())
    assert out.hidden.shape == (4, model.config.hidden_size)
    if mode == "generate":
        assert [len(t) for t in out.token_logprobs] == [len(s.completion_ids) for s in samples]
    (out.logprob.sum() + out.entropy.sum() + out.hidden.sum()).backward()
    assert model.model.layers[0].self_attn.q_proj.weight.grad.abs().sum() > 0


def test_evaluate_is_a_deprecated_alias_of_forward_samples(tiny, blackjack):
    model, tokenizer = tiny
    policy = LLMPolicy(model, tokenizer, PolicyConfig(mode="score"))
    samples = policy.act(*blackjack)
    message = r"^LLMPolicy\.evaluate is deprecated; use LLMPolicy\.forward_samples\.$"
    with pytest.warns(DeprecationWarning, match=message) as record:
        old = policy.evaluate(samples, shared_prefix=True)
    assert len(record) == 1 and record[0].filename == __file__  # points at the caller
    new = policy.forward_samples(samples, shared_prefix=True)
    for field in dataclasses.fields(new):
        torch.testing.assert_close(getattr(old, field.name), getattr(new, field.name))


def test_prefix_cache_follows_weight_updates(tiny, cartpole):
    model, tokenizer = tiny
    config = PolicyConfig(normalization="token", temperature=100)
    policy = LLMPolicy(model, tokenizer, config)
    policy.act(*cartpole)
    assert policy.stats["cached_tokens"] > 0
    optimizer = torch.optim.AdamW(model.parameters(), lr=0.05)
    policy.forward_samples(policy.act(*cartpole)).logprob.sum().backward()
    optimizer.step()
    after = policy.act(*cartpole)
    fresh = LLMPolicy(model, tokenizer, config).act(*cartpole)
    np.testing.assert_allclose([s.logprobs for s in after], [s.logprobs for s in fresh], atol=1e-5)


def test_history_keeps_the_last_turns(tiny):
    model, tokenizer = tiny
    policy = LLMPolicy(model, tokenizer, PolicyConfig(history=1))
    env = gym.make("Text-CartPole-v1")
    obs, info = env.reset(seed=0)
    [first] = policy.act([obs], [info])
    obs2, *_, info = env.step(first.text)
    [second] = policy.act([obs2], [info])
    roles = [m["role"] for m in second.messages]
    assert roles == ["system", "user", "assistant", "user"]
    assert second.messages[1]["content"] == obs and second.messages[2]["content"] == first.text
    policy.reset([0])
    assert len(policy.act([obs2], [info])[0].messages) == 2


@pytest.mark.parametrize("system_role", [True, False])
def test_a_chat_kept_by_the_env_reads_as_the_policys_own(tiny, system_role):
    """``gym.make(..., history=k)`` (how training keeps the history) gives the prompts the
    policy's own history gives, for a model with or without a system role."""
    model, tokenizer = tiny
    own, kept = (LLMPolicy(model, tokenizer, PolicyConfig(history=1)) for _ in range(2))
    for policy in (own, kept):
        policy.defaults = dataclasses.replace(policy.defaults, system_role=system_role)
    plain, wrapped = gym.make("Text-CartPole-v1"), gym.make("Text-CartPole-v1", history=1)
    (obs, info), (_, env_info) = plain.reset(seed=0), wrapped.reset(seed=0)
    for _ in range(3):
        [a], [b] = own.act([obs], [info]), kept.act([obs], [env_info])
        assert a.messages == b.messages and a.prompt_ids == b.prompt_ids
        obs, *_, info = plain.step(a.text)
        _, *_, env_info = wrapped.step(a.text)
    assert len(a.messages) == (4 if system_role else 3) and not kept.histories


def test_vector_env_infos_are_split(tiny):
    model, tokenizer = tiny
    envs = gym.make_vec("Text-Blackjack-v1", num_envs=3)
    obs, infos = envs.reset(seed=0)
    per_env = split_infos(infos, 3)
    assert per_env[0]["valid_actions"] == ["stick", "hit"]
    samples = LLMPolicy(model, tokenizer).act(list(obs), infos)
    _, _, _, _, infos = envs.step([s.text for s in samples])
    assert all(split_infos(infos, 3)[i]["parse"]["ok"] for i in range(3))


def test_messages_and_config_validation():
    assert build_messages("S", "o", think=True)[0]["content"].startswith("S\n\nFirst think")
    with pytest.raises(ValueError, match="mode must be one of"):
        PolicyConfig(mode="sample")
    with pytest.raises(ValueError, match="normalization"):
        PolicyConfig(normalization="mean")


def test_score_mode_refuses_continuous_envs(tiny):
    model, tokenizer = tiny
    with pytest.raises(ValueError, match="generate"):
        LLMPolicy(model, tokenizer).act(["o"], [{"system_prompt": "s", "valid_actions": []}])


def test_works_with_a_lora_model_and_its_disabled_adapter(blackjack):
    peft = pytest.importorskip("peft")
    base, tokenizer = tiny_model(1)
    reference = LLMPolicy(base, tokenizer, PolicyConfig(mode="generate", max_new_tokens=4))
    samples = reference.act(*blackjack)
    base_logprob = reference.forward_samples(samples).logprob.detach()
    lora_config = peft.LoraConfig(r=4, target_modules=["q_proj", "v_proj"], init_lora_weights=False)
    model = peft.get_peft_model(base, lora_config)
    policy = LLMPolicy(model, tokenizer, reference.config)
    out = policy.forward_samples(samples)
    assert not torch.allclose(out.logprob.detach(), base_logprob, atol=1e-4)
    out.logprob.sum().backward()
    lora_grads = [p.grad for n, p in model.named_parameters() if "lora_" in n]
    assert lora_grads and all(g is not None for g in lora_grads)
    policy.act(*blackjack)  # fills the prefix cache under the adapter
    with model.disable_adapter(), torch.no_grad():
        torch.testing.assert_close(
            policy.forward_samples(samples).logprob, base_logprob, atol=1e-4, rtol=0
        )
        policy.generator.manual_seed(reference.config.seed)
        again = policy.act(*blackjack)  # the cache must follow the adapter switch
    assert [s.completion_ids for s in again] == [s.completion_ids for s in samples]


def test_generate_stops_when_the_answer_closes(tiny, cartpole):
    model, tokenizer = tiny
    config = PolicyConfig(mode="generate", temperature=3, max_new_tokens=60)
    policy = LLMPolicy(model, tokenizer, config)
    samples = policy.act(*cartpole) + policy.act(*cartpole)
    assert any("}" in s.text for s in samples), "expected a brace within 60 tokens at T=3"
    for s in samples:
        body = s.text[len(PREFILL) :]
        ended = s.completion_ids[-1] in policy.stop_ids or len(s.completion_ids) == 60
        assert s.text.endswith("}") or ("}" not in body and ended)
        assert "}" not in body[:-1]


def test_shared_prefix_forward_matches_the_plain_one():
    import gymnasium as gym
    import torch

    from llmgym.policy import LLMPolicy, PolicyConfig
    from llmgym.policy.testing import tiny_model

    model, tokenizer = tiny_model()
    policy = LLMPolicy(model, tokenizer, PolicyConfig(mode="score"))
    envs = [gym.make("Text-Blackjack-v1") for _ in range(3)]
    obs, infos = zip(*(env.reset(seed=i) for i, env in enumerate(envs)))
    samples = policy.act(list(obs), list(infos))
    plain = policy.forward_samples(samples)
    shared = policy.forward_samples(samples, shared_prefix=True)
    assert torch.allclose(plain.logprob, shared.logprob, atol=1e-4)
    assert torch.allclose(plain.entropy, shared.entropy, atol=1e-4)
    assert shared.logprob.requires_grad


def test_shared_prefix_in_generate_mode_matches_the_plain_forward():
    """Generate mode's update through the shared system prompt's KV cache
    (``optim.prefix_cache_generate``): the same log-probs, entropies and hidden states as the
    plain forward, and gradients through every completion's own tokens."""
    import gymnasium as gym

    from llmgym.policy import LLMPolicy, PolicyConfig
    from llmgym.policy.testing import tiny_model

    model, tokenizer = tiny_model()
    policy = LLMPolicy(model, tokenizer, PolicyConfig(mode="generate", max_new_tokens=6))
    envs = [gym.make("Text-Blackjack-v1") for _ in range(4)]
    obs, infos = zip(*(env.reset(seed=i) for i, env in enumerate(envs)))
    samples = policy.act(list(obs), list(infos))
    assert len({len(s.prompt_ids) for s in samples}) > 1  # padded after the shared prefix
    widths: list[int] = []
    hook = model.register_forward_pre_hook(
        lambda module, args, kwargs: widths.append(kwargs["input_ids"].shape[1]),
        with_kwargs=True,
    )
    plain = policy.forward_samples(samples)
    shared = policy.forward_samples(samples, shared_prefix=True)
    hook.remove()
    assert widths[-1] < widths[0] // 2, widths  # the system prompt's tokens ran once, cached
    for a, b in zip(plain.token_logprobs, shared.token_logprobs):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=0)
    torch.testing.assert_close(plain.entropy, shared.entropy, atol=1e-5, rtol=0)
    torch.testing.assert_close(plain.hidden, shared.hidden, atol=1e-5, rtol=0)
    shared.logprob.sum().backward()
    assert model.model.layers[0].self_attn.q_proj.weight.grad.abs().sum() > 0


def test_generate_writes_the_env_answer_prefill(tiny):
    """Math names ``{"answer": `` as its answer start: the prompt ends with it, the action
    text starts with it, and the log-prob recomputation sees the same tokens."""
    pytest.importorskip("reasoning_gym")
    import llmgym  # noqa: F401 (registers the envs)

    model, tokenizer = tiny
    env = gym.make("Text-Arithmetic-v0")
    obs, info = env.reset(seed=0)
    assert info["answer_prefill"] == '{"answer": '
    policy = LLMPolicy(model, tokenizer, PolicyConfig(mode="generate", max_new_tokens=6))
    [sample] = policy.act([obs], [info])
    prompt = tokenizer.decode(sample.prompt_ids)
    assert prompt.endswith('{"answer": ') and sample.text.startswith('{"answer": ')
    assert PREFILL not in prompt
    out = policy.forward_samples([sample])
    assert torch.allclose(out.token_logprobs[0], torch.tensor(sample.logprobs), atol=1e-4)
    # prefill off: nothing written for the model; score mode keeps the action prefill
    off = LLMPolicy(model, tokenizer, PolicyConfig(mode="generate", prefill=False))
    assert off.prefill_for(info) == ""
    assert LLMPolicy(model, tokenizer).prefill_for(info) == PREFILL


@pytest.mark.parametrize("mode", ["score", "generate"])
def test_a_backend_passed_in_does_the_model_work(tiny, blackjack, mode):
    from llmgym.policy.backends import Backend
    from llmgym.policy.backends.hf import TransformersBackend

    model, tokenizer = tiny
    calls = []

    class Recording(TransformersBackend):
        def score(self, *args, **kwargs):
            calls.append("score")
            return super().score(*args, **kwargs)

        def generate(self, *args, **kwargs):
            calls.append("generate")
            return super().generate(*args, **kwargs)

        def completion_logprobs(self, *args, **kwargs):
            calls.append("completion_logprobs")
            return super().completion_logprobs(*args, **kwargs)

    backend = Recording(model, tokenizer.pad_token_id, "cpu")
    assert isinstance(backend, Backend)
    config = PolicyConfig(mode=mode, greedy=True, max_new_tokens=6)
    policy = LLMPolicy(model, tokenizer, config, backend=backend)
    samples = policy.act(*blackjack)
    default = LLMPolicy(model, tokenizer, config).act(*blackjack)
    assert [s.text for s in samples] == [s.text for s in default]
    policy.forward_samples(samples)
    acting = "score" if mode == "score" else "generate"
    training = "score" if mode == "score" else "completion_logprobs"
    assert calls == [acting, training]
    assert policy.stats is backend.stats and backend.stats["prompt_tokens"] > 0


def test_greedy_generation_is_memoised_per_prompt_and_sampling_is_not(tiny, blackjack):
    """With memoize (fixed weights), a greedy generate-mode policy generates each distinct
    prompt once and answers as without the memo; sampled identical prompts stay separate."""
    model, tokenizer = tiny
    obs, infos = blackjack
    obs, infos = [obs[0], obs[1], obs[0]], [infos[0], infos[1], infos[0]]
    config = PolicyConfig(mode="generate", greedy=True, max_new_tokens=6)
    plain = [s.completion_ids for s in LLMPolicy(model, tokenizer, config).act(obs, infos)]
    memo = LLMPolicy(model, tokenizer, config, memoize=True)
    calls = []
    generate = memo.backend.generate
    memo.backend.generate = lambda prompts, *a: calls.append(len(prompts)) or generate(prompts, *a)
    first = memo.act(obs, infos)
    again = memo.act(obs, infos)
    assert [s.completion_ids for s in first] == [s.completion_ids for s in again] == plain
    assert calls == [2]  # two distinct prompts, generated once
    sampled = LLMPolicy(
        model, tokenizer, PolicyConfig(mode="generate", max_new_tokens=6), memoize=True
    )
    sampled.backend.generate = lambda prompts, *a: (
        calls.append(len(prompts)) or generate(prompts, *a)
    )
    sampled.act(obs, infos)
    assert calls[-1] == 3
