"""The frozen-trunk fast path (issue 35, item 2): with LoRA on the last 2 of 4 layers, the top
layers run alone over the kept trunk states and give the plain path's log-probs, entropies,
hidden states and gradients (LoRA and action head), in score mode (with and without the
shared prefix, the head reading a trunk layer, the first trained layer's input and a top layer)
and in generate mode; a PPO run is the same either way; models without findable decoder
layers, or whose trunk trains, take the plain path."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("peft")

from llmgym.policy import LLMPolicy, PolicyConfig  # noqa: E402
from llmgym.policy.action_head import ActionHead  # noqa: E402
from llmgym.policy.backends import trunk  # noqa: E402
from llmgym.policy.backends.trunk import TrunkStates  # noqa: E402
from llmgym.policy.testing import randomize_lora, text_observations, tiny_tokenizer  # noqa: E402

ATOL = 1e-5


def four_layer_lora(seed: int = 0):
    """A 4-layer tiny Llama with a random-valued LoRA (q, v) on layers 2 and 3, training."""
    from peft import LoraConfig, get_peft_model
    from transformers import LlamaConfig, LlamaForCausalLM

    tokenizer = tiny_tokenizer()
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=4,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=4096,
        tie_word_embeddings=True,
        initializer_range=0.1,
        pad_token_id=tokenizer.pad_token_id,
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        base = LlamaForCausalLM(config)
    targets = [f"model.layers.{i}.self_attn.{m}" for i in (2, 3) for m in ("q_proj", "v_proj")]
    model = get_peft_model(base, LoraConfig(r=4, lora_alpha=8, target_modules=targets))
    return randomize_lora(model, scale=0.2).train(), tokenizer


@pytest.fixture(scope="module")
def lora_model():
    return four_layer_lora()


@pytest.fixture(scope="module")
def states():
    obs, infos = text_observations("Text-Blackjack-v1", 6)
    return obs, infos


def outputs(model, tokenizer, states, *, fast, mode, shared=True, layers=(-1,), lm_prior=True):
    """(log-probs, entropies, hidden states, token log-probs, gradients by name, stats) of
    ``forward_samples`` over acted samples (two of them repeated), on the fast or the plain path."""
    trunk.FROZEN_TRUNK = fast
    try:
        head = None
        if mode == "score":
            head = ActionHead(64, 64, lm_prior=lm_prior, layers=layers)
            with torch.no_grad():
                head.weight.copy_(0.05 * torch.randn(head.weight.shape, generator=seeded()))
                head.whitener.update(torch.randn(32, head.feature_size, generator=seeded()))
                head.whitener.refresh()
        config = PolicyConfig(mode=mode, seed=0, max_new_tokens=6, temperature=1.5)
        policy = LLMPolicy(model, tokenizer, config, head=head)
        with torch.no_grad():
            samples = policy.act(*states)
        samples = samples + samples[:2]
        model.zero_grad(set_to_none=True)
        out = policy.forward_samples(samples, shared_prefix=shared)
        loss = out.logprob.sum() + out.entropy.sum() + 0.01 * out.hidden.float().pow(2).sum()
        loss.backward()
        grads = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
        if head is not None:
            grads["head"] = head.weight.grad.clone()
        tokens = [t.detach() for t in out.token_logprobs] if out.token_logprobs else None
        return out, tokens, grads, dict(policy.backend.stats), [s.logprobs for s in samples]
    finally:
        trunk.FROZEN_TRUNK = True


def seeded():
    return torch.Generator().manual_seed(3)


def assert_same(plain, fast, *, fast_acting=True, lora=True):
    """The same outputs and gradients within float noise (``fast_acting``: acting ran on the
    fast path too; ``lora``: gradients reach the LoRA weights)."""
    (a, ta, ga, _, acted_a), (b, tb, gb, stats, acted_b) = plain, fast
    assert stats["trunk_cached_tokens"] > 0 or not fast_acting, "the fast path did not run"
    torch.testing.assert_close(b.logprob, a.logprob, atol=ATOL, rtol=0)
    torch.testing.assert_close(b.entropy, a.entropy, atol=ATOL, rtol=0)
    torch.testing.assert_close(b.hidden, a.hidden, atol=ATOL, rtol=1e-5)
    for x, y in zip(acted_a, acted_b, strict=True):  # completions may differ in length
        torch.testing.assert_close(torch.tensor(y), torch.tensor(x), atol=ATOL, rtol=0)
    for x, y in zip(ta or [], tb or [], strict=True):
        torch.testing.assert_close(y, x, atol=ATOL, rtol=0)
    assert sorted(ga) == sorted(gb) and any("lora" in k for k in ga) == lora
    for name in ga:  # float noise relative to the largest gradient of the parameter group
        group = [g for k, g in ga.items() if ("lora" in k) == ("lora" in name)]
        scale = max(float(g.abs().max()) for g in group)
        torch.testing.assert_close(gb[name], ga[name], atol=1e-5 * max(scale, 1.0), rtol=0)


@pytest.mark.parametrize("shared", [True, False], ids=["shared-prefix", "prefix-grouper"])
@pytest.mark.parametrize(
    "layers", [(-1,), (1,), (2,), (1, 3, -1)], ids=["last", "trunk", "first-trained", "mixed"]
)
def test_score_mode_fast_path_equals_plain(lora_model, states, shared, layers):
    model, tokenizer = lora_model
    kwargs = dict(mode="score", shared=shared, layers=layers)
    plain = outputs(model, tokenizer, states, fast=False, **kwargs)
    fast = outputs(model, tokenizer, states, fast=True, **kwargs)
    assert_same(plain, fast)


@pytest.mark.parametrize("layers", [(1,), (3,)], ids=["trunk", "top"])
def test_head_without_lm_prior_fast_path_equals_plain(lora_model, states, layers):
    """The head alone: its hidden states only; from a trunk layer nothing above it runs (and
    no gradient reaches the LoRA weights, on either path)."""
    model, tokenizer = lora_model
    kwargs = dict(mode="score", layers=layers, lm_prior=False)
    plain = outputs(model, tokenizer, states, fast=False, **kwargs)
    fast = outputs(model, tokenizer, states, fast=True, **kwargs)
    in_trunk = layers == (1,)
    assert_same(plain, fast, fast_acting=not in_trunk, lora=not in_trunk)


def test_generate_mode_fast_path_equals_plain(lora_model, states):
    # shared=False: the plain path's exact gradient (with shared=True it would drop the system
    # prompt's, optim.prefix_cache_generate); the fast path gives the exact one either way.
    model, tokenizer = lora_model
    plain = outputs(model, tokenizer, states, fast=False, mode="generate", shared=False)
    fast = outputs(model, tokenizer, states, fast=True, mode="generate", shared=False)
    assert_same(plain, fast, fast_acting=False)  # generation runs whole; forward_samples is fast


def test_reference_with_the_adapter_off_equals_plain(lora_model, states):
    """The trunk is the same with the adapter disabled: the reference reuses it."""
    model, tokenizer = lora_model
    results = []
    for fast in (False, True):
        trunk.FROZEN_TRUNK = fast
        try:
            policy = LLMPolicy(model, tokenizer, PolicyConfig(mode="score"))
            with torch.no_grad():
                samples = policy.act(*states)
                with model.disable_adapter():
                    results.append(policy.forward_samples(samples, shared_prefix=True).logprob)
        finally:
            trunk.FROZEN_TRUNK = True
    torch.testing.assert_close(results[1], results[0], atol=ATOL, rtol=0)
    assert policy.backend.trunk.store.entries


def test_trunk_states_follow_a_trunk_weight_change_and_a_full_store(lora_model, states):
    model, tokenizer = lora_model
    policy = LLMPolicy(model, tokenizer, PolicyConfig(mode="score"))
    policy.backend.trunk.store.limit = 4096  # a few sequences: most are dropped and recomputed
    with torch.no_grad():
        samples = policy.act(*states)
        first = policy.forward_samples(samples, shared_prefix=True).logprob
        again = policy.forward_samples(samples, shared_prefix=True).logprob
        torch.testing.assert_close(again, first, atol=ATOL, rtol=0)
        weight = model.get_base_model().model.layers[0].mlp.down_proj.weight
        saved = weight.clone()
        try:
            weight.mul_(1.5)  # the trunk changed: its kept states are void
            changed = policy.forward_samples(samples, shared_prefix=True).logprob
            trunk.FROZEN_TRUNK = False
            want = policy.forward_samples(samples, shared_prefix=True).logprob
        finally:
            trunk.FROZEN_TRUNK = True
            weight.copy_(saved)
    torch.testing.assert_close(changed, want, atol=ATOL, rtol=0)
    assert not torch.allclose(changed, first)


def test_a_store_reads_earlier_positions_from_its_prefix_and_drops_the_oldest():
    store = TrunkStates(limit_mb=32 / 2**20)  # 32 bytes: eight floats
    store.put((1, 2), None, 0, torch.zeros(2, 2))
    store.put((1, 2, 3), (1, 2), 2, torch.ones(1, 2))
    assert store.states((1, 2, 3), 0, 3)[:, 0].tolist() == [0.0, 0.0, 1.0]
    store.pinned.clear()
    store.put((4,), None, 0, torch.ones(2, 2))  # over the limit: the least recently used goes
    assert store.entry((1, 2, 3)) is None  # its prefix was dropped: it is gone too


def test_the_fast_path_applies_only_over_a_frozen_trunk(tiny, lora_model):
    from llmgym.policy.backends.hf import TransformersBackend

    model, tokenizer = tiny  # every layer trains
    assert not TransformersBackend(model, tokenizer.pad_token_id, "cpu").trunk.active([5, 6])
    model, tokenizer = lora_model
    backend = TransformersBackend(model, tokenizer.pad_token_id, "cpu")
    assert backend.trunk.active([5, 6, 7]) and backend.trunk.first == 2
    trunk.FROZEN_TRUNK = False
    try:
        assert not backend.trunk.active([5, 6, 7])
    finally:
        trunk.FROZEN_TRUNK = True


def test_ppo_with_the_fast_path_equals_ppo_without(tmp_path):
    from llmgym.policy.testing import tiny_model_dir
    from llmgym.rl import make_trainer

    path = str(tiny_model_dir("llama", tmp_path / "llama", layers=4))
    weights, initial = [], None
    for fast in (False, True):
        trunk.FROZEN_TRUNK = fast
        try:
            trainer = make_trainer(
                "ppo",
                model=path,
                env_id="Text-Blackjack-v1",
                lora_layers=2,
                learning_rate=3e-3,
                num_envs=4,
                episodes_per_update=6,
                minibatch_size=4,
                micro_batch_size=2,
                update_epochs=2,
                target_kl=None,
                total_episodes=12,
                progress=False,
                device="cpu",
                num_threads=1,
                output_dir=str(tmp_path / f"run-{fast}"),
            )
            named = trainer.model.named_parameters()
            initial = initial or {n: p.detach().clone() for n, p in named}
            trainer.run_iteration()
            trainer.run_iteration()
        finally:
            trunk.FROZEN_TRUNK = True
        assert bool(trainer.policy.backend.trunk.store.entries) == fast
        weights.append({n: p.detach().clone() for n, p in trainer.model.named_parameters()})
        weights[-1]["head"] = trainer.policy.head.weight.detach().clone()
    plain, fast = weights
    initial["head"] = torch.zeros_like(plain["head"])
    moved = max(float((plain[n] - initial[n]).abs().max()) for n in plain)
    assert moved > 1e-3
    for name, value in plain.items():  # Adam's steps differ by float noise at most
        torch.testing.assert_close(fast[name], value, atol=1e-3 * moved, rtol=0)


def test_a_model_without_findable_decoder_layers_trains_on_the_plain_path(tmp_path):
    from llmgym.policy.testing import tiny_model_dir
    from llmgym.rl import make_trainer

    path = str(tiny_model_dir("gpt2", tmp_path / "gpt2", layers=4))
    trainer = make_trainer(
        "ppo",
        model=path,
        env_id="Text-Blackjack-v1",
        lora_layers=2,
        learning_rate=1e-2,
        num_envs=2,
        episodes_per_update=2,
        total_episodes=2,
        progress=False,
        device="cpu",
        num_threads=1,
        output_dir=str(tmp_path / "run"),
    )
    trained = [p for p in trainer.model.parameters() if p.requires_grad]
    before = [p.detach().clone() for p in trained]
    trainer.run_iteration()
    assert any(not torch.equal(b, p) for b, p in zip(before, trained))
    assert not trainer.policy.backend.trunk.active([5, 6, 7])
    assert not trainer.policy.backend.trunk.store.entries


def test_generation_keeps_the_trunk_states_its_update_reads(lora_model, states):
    """Generation captures the states entering the first trained layer: the update runs no
    trunk pass, and its log-probs are the plain path's."""
    model, tokenizer = lora_model
    policy = LLMPolicy(model, tokenizer, PolicyConfig(mode="generate", max_new_tokens=6))
    with torch.no_grad():
        samples = policy.act(*states)
        before = dict(policy.stats)
        fast = policy.forward_samples(samples)
        assert policy.stats == before  # every row was kept: nothing ran through the trunk
        trunk.FROZEN_TRUNK = False
        try:
            plain = policy.forward_samples(samples)
        finally:
            trunk.FROZEN_TRUNK = True
    torch.testing.assert_close(fast.logprob, plain.logprob, atol=ATOL, rtol=0)
    torch.testing.assert_close(fast.hidden, plain.hidden, atol=ATOL, rtol=1e-5)


def test_without_gradient_a_row_scored_under_the_same_weights_is_reused(lora_model, states):
    """The update's old log-probs are the acting pass's (same weights); a weight change
    recomputes them."""
    model, tokenizer = lora_model
    head = ActionHead(64, 64)
    policy = LLMPolicy(model, tokenizer, PolicyConfig(mode="score"), head=head)
    with torch.no_grad():
        samples = policy.act(*states)
        ran = policy.stats["trunk_cached_tokens"]
        reused = policy.forward_samples(samples, shared_prefix=True)
        assert policy.stats["trunk_cached_tokens"] == ran
        trunk.FROZEN_TRUNK = False
        try:
            plain = policy.forward_samples(samples, shared_prefix=True)
        finally:
            trunk.FROZEN_TRUNK = True
        torch.testing.assert_close(reused.logprob, plain.logprob, atol=ATOL, rtol=0)
        torch.testing.assert_close(reused.hidden, plain.hidden, atol=ATOL, rtol=1e-5)
        lora = next(p for n, p in model.named_parameters() if "lora_B" in n)
        lora.add_(0.01)
        try:
            policy.forward_samples(samples, shared_prefix=True)
            assert policy.stats["trunk_cached_tokens"] > ran
        finally:
            lora.sub_(0.01)


@pytest.mark.parametrize("layers", [(1,), (-1,)], ids=["trunk", "last"])
def test_without_a_head_acting_keeps_the_features_its_update_reads(lora_model, states, layers):
    """The language model alone (no head; a critic reads ``layers``): acting computes the
    hidden states the update reads under the same weights, so the update's old log-probs run
    nothing and its pass with gradient runs no trunk pass (before, the trunk ran again for a
    trunk layer's features)."""
    model, tokenizer = lora_model
    policy = LLMPolicy(model, tokenizer, PolicyConfig(mode="score"), layers=layers)
    with torch.no_grad():
        samples = policy.act(*states)
        before = dict(policy.stats)
        old = policy.forward_samples(samples, shared_prefix=True)
        assert policy.stats == before  # the acting pass's rows, reused as they are
    model.zero_grad(set_to_none=True)
    out = policy.forward_samples(samples, shared_prefix=True)
    assert policy.stats["prompt_tokens"] == before["prompt_tokens"]  # no trunk pass
    (out.logprob.sum() + 0.01 * out.hidden.pow(2).sum()).backward()
    torch.testing.assert_close(out.logprob.detach(), old.logprob, atol=ATOL, rtol=0)
    torch.testing.assert_close(out.hidden.detach(), old.hidden, atol=ATOL, rtol=1e-5)
