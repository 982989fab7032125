"""The action head: zero-initialised (the language model's policy at init), state-specific
learning on a two-state contextual bandit, exploration that cannot silently die, and small
policy directories that restore the trained policy."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("peft")

sys.path.insert(0, str(Path(__file__).parents[1] / "support"))
from bandit import register, register_contextual  # noqa: E402

from llmgym.policy import LLMPolicy, PolicyConfig  # noqa: E402
from llmgym.policy.action_head import ActionHead  # noqa: E402
from llmgym.policy.testing import tiny_model  # noqa: E402
from llmgym.rl import ALGOS, load_trained_policy, make_trainer  # noqa: E402

CONTEXTUAL = register_contextual()
FAST = dict(
    model="tiny",
    env_id=CONTEXTUAL,
    num_envs=16,
    episodes_per_update=32,
    minibatch_size=32,
    eval_every=0,
    checkpoint_every=0,
    progress=False,
    num_threads=1,
    eval_method="sampled",
)
ROOMS = [("Left room.", "a"), ("Right room.", "b")]


def _p_good(policy: LLMPolicy) -> list[float]:
    """P(rewarded action) in each room under the policy's sampling distribution."""
    info = {"system_prompt": "Say a or b.", "valid_actions": ["a", "b"]}
    with torch.no_grad():
        samples = policy.act([room for room, _ in ROOMS], [info, info])
        out = policy.forward_samples(samples)
    probs = []
    for (_, good), sample, logp in zip(ROOMS, samples, out.logprob.exp().tolist()):
        taken = sample.valid_actions[sample.action_index]
        probs.append(logp if taken == good else 1 - logp)
    return probs


def test_zero_initialised_head_leaves_the_policy_unchanged():
    model, tokenizer = tiny_model()
    hidden = model.config.hidden_size
    embed = model.get_input_embeddings().weight.shape[1]
    config = PolicyConfig(mode="score", greedy=True)
    plain = LLMPolicy(model, tokenizer, config)
    headed = LLMPolicy(model, tokenizer, config, head=ActionHead(hidden, embed), memoize=True)
    info = {"system_prompt": "Say a or b.", "valid_actions": ["a", "b"]}
    for room, _ in ROOMS:
        [a] = plain.act([room], [info])
        [b] = headed.act([room], [info])
        assert a.action_index == b.action_index
        assert a.logprobs == pytest.approx(b.logprobs, abs=1e-6)


def test_the_vllm_backend_refuses_an_action_head_in_one_sentence():
    from llmgym.errors import ConfigError, LLMGymError

    _, tokenizer = tiny_model()
    config = PolicyConfig(backend="vllm", vllm_url="http://127.0.0.1:9")
    with pytest.raises(ConfigError, match="action_head=false") as info:
        LLMPolicy(None, tokenizer, config, head=ActionHead(8, 8))
    assert isinstance(info.value, LLMGymError) and "\n" not in str(info.value)


def test_policies_over_one_frozen_model_share_a_memo():
    model, tokenizer = tiny_model()
    hidden = model.config.hidden_size
    embed = model.get_input_embeddings().weight.shape[1]
    config = PolicyConfig(mode="score", greedy=True)
    first, second = (
        LLMPolicy(model, tokenizer, config, head=ActionHead(hidden, embed), memoize=True)
        for _ in range(2)
    )
    memo: dict = {}
    assert first.share_memo(memo) is memo and second.share_memo(memo) is memo
    info = {"system_prompt": "Say a or b.", "valid_actions": ["a", "b"]}
    [a] = first.act([ROOMS[0][0]], [info])
    assert len(memo) == 1
    [b] = second.act([ROOMS[0][0]], [info])
    assert len(memo) == 1 and a.logprobs == pytest.approx(b.logprobs, abs=1e-6)


@pytest.mark.parametrize("algo", ALGOS)
@pytest.mark.parametrize("head_optimizer, head_lr", [("sgd", 1.0), ("adamw", 0.05)])
def test_head_learns_a_contextual_bandit_on_a_frozen_model(algo, head_optimizer, head_lr, tmp_path):
    extra = {"group_size": 4} if algo == "grpo" else {}
    trainer = make_trainer(
        algo,
        total_episodes=32 * 12,
        output_dir=str(tmp_path),
        train_backbone=False,
        head_optimizer=head_optimizer,
        head_lr=head_lr,
        learning_rate=0.05,
        **FAST,
        **extra,
    )
    frozen = {n: p.detach().clone() for n, p in trainer.model.named_parameters()}
    start = _p_good(trainer.policy)
    assert min(start) < 0.5  # the tiny model prefers the same answer in both rooms
    trainer.train()
    assert min(_p_good(trainer.policy)) >= 0.9
    assert all(torch.equal(frozen[n], p) for n, p in trainer.model.named_parameters())


def test_entropy_bonus_applies_when_no_group_is_informative(tmp_path):
    flat = register("none")  # no answer ever pays: every GRPO group is uninformative
    trainer = make_trainer(
        "grpo",
        env_id=flat,
        total_episodes=16,
        output_dir=str(tmp_path),
        group_size=4,
        ent_coef=0.1,
        **{k: v for k, v in FAST.items() if k != "env_id"},
    )
    head = trainer.policy.head.weight
    before = head.detach().clone()
    metrics = trainer.run_iteration()
    assert metrics["grpo/informative_samples"] == 0
    assert "charts/entropy" in metrics
    assert not torch.equal(before, head)


def test_low_entropy_boosts_the_bonus_until_it_recovers(tmp_path):
    trainer = make_trainer("ppo", total_episodes=16, output_dir=str(tmp_path), **FAST)
    trainer.learner.adapt_entropy(0.01)
    trainer.learner.adapt_entropy(0.01)
    assert trainer.state.ent_boost == pytest.approx(0.02)
    assert trainer.learner.ent_coef == pytest.approx(trainer.config.ent_coef + 0.02)
    trainer.learner.adapt_entropy(0.5)
    assert trainer.state.ent_boost == pytest.approx(0.01)


@pytest.mark.parametrize("train_backbone", [False, True])
def test_policy_directory_restores_the_greedy_actions(train_backbone, tmp_path):
    trainer = make_trainer(
        "ppo",
        total_episodes=64,
        output_dir=str(tmp_path / "run"),
        train_backbone=train_backbone,
        head_lr=0.05,
        **FAST,
    )
    trainer.train()
    path = trainer.save_policy(tmp_path / "policy")
    assert not (path / "optimizer.pt").exists()
    greedy = PolicyConfig(mode="score", greedy=True)
    loaded = load_trained_policy(str(path), device="cpu", policy_config=greedy)
    info = {"system_prompt": "Say a or b.", "valid_actions": ["a", "b"]}
    rooms = [room for room, _ in ROOMS] * 2
    with torch.no_grad():
        want = trainer.policy.act(rooms, [info] * 4, greedy=True)
    got = loaded.act(rooms, [info] * 4)
    assert [s.action_index for s in got] == [s.action_index for s in want]
    assert [s.logprobs[0] for s in got] == pytest.approx([s.logprobs[0] for s in want], abs=1e-5)


def _head_only_trainer(tmp_path, **config):
    """Head-only PPO on the contextual bandit, the head alone scoring the actions."""
    return make_trainer(
        "ppo",
        total_episodes=32 * 12,
        output_dir=str(tmp_path / "run"),
        train_backbone=False,
        lm_prior=False,
        head_optimizer="adamw",
        head_lr=0.05,
        **config,
        **FAST,
    )


def _restored_after_training(trainer, tmp_path) -> LLMPolicy:
    """Train, check both rooms are learned, and restore the policy directory; its greedy
    log-probs equal the trainer's."""
    trainer.train()
    assert min(_p_good(trainer.policy)) >= 0.9
    path = trainer.save_policy(tmp_path / "policy")
    greedy = PolicyConfig(mode="score", greedy=True)
    loaded = load_trained_policy(str(path), device="cpu", policy_config=greedy)
    info = {"system_prompt": "Say a or b.", "valid_actions": ["a", "b"]}
    rooms = [room for room, _ in ROOMS]
    with torch.no_grad():
        want = trainer.policy.act(rooms, [info] * 2, greedy=True)
    got = loaded.act(rooms, [info] * 2)
    assert [s.logprobs[0] for s in got] == pytest.approx([s.logprobs[0] for s in want], abs=1e-5)
    return loaded


def test_without_the_lm_prior_the_policy_starts_uniform_learns_and_restores(tmp_path):
    trainer = _head_only_trainer(tmp_path)
    assert _p_good(trainer.policy) == pytest.approx([0.5, 0.5], abs=1e-6)  # the head alone: 0
    assert _restored_after_training(trainer, tmp_path).head.lm_prior is False


def test_no_lm_prior_without_the_head_is_refused_in_one_sentence(tmp_path):
    from llmgym.errors import ConfigError

    with pytest.raises(ConfigError, match="needs score mode with the head on") as info:
        make_trainer("ppo", output_dir=str(tmp_path), lm_prior=False, action_head=False, **FAST)
    assert "\n" not in str(info.value)


def test_head_layers_concatenate_those_hidden_states_learn_and_restore(tmp_path):
    trainer = _head_only_trainer(tmp_path, head_layers=[1, -1])
    policy, size = trainer.policy, trainer.model.config.hidden_size
    assert policy.head.layers == (1, -1) and policy.head.feature_size == 2 * size
    assert trainer.algorithm.critic.value_head.in_features == 2 * size
    info = {"system_prompt": "Say a or b.", "valid_actions": ["a", "b"]}
    with torch.no_grad():
        sample = policy.act([ROOMS[0][0]], [info])[0]
        states = trainer.model(torch.tensor([sample.prompt_ids]), output_hidden_states=True)
    want = torch.cat([states.hidden_states[1][0, -1], states.hidden_states[-1][0, -1]])
    assert torch.allclose(sample.hidden, want, atol=1e-5)
    assert _restored_after_training(trainer, tmp_path).head.layers == (1, -1)


def test_a_head_without_the_lm_prior_runs_only_the_layers_it_reads(tmp_path):
    trainer = _head_only_trainer(tmp_path, head_layers=[1])
    model, policy = trainer.model, trainer.policy
    ran = []
    hooks = [
        block.register_forward_hook(lambda *_, i=i: ran.append(i))
        for i, block in enumerate(model.model.layers)
    ]
    info = {"system_prompt": "Say a or b.", "valid_actions": ["a", "b"]}
    with torch.no_grad():
        sample = policy.act([ROOMS[0][0]], [info])[0]
    for hook in hooks:
        hook.remove()
    assert ran == [0, 1, 0]  # the system prompt's KV once (whole model), then layer 0 alone
    with torch.no_grad():
        states = model(torch.tensor([sample.prompt_ids]), output_hidden_states=True)
    assert torch.allclose(sample.hidden, states.hidden_states[1][0, -1], atol=1e-5)
    assert _restored_after_training(trainer, tmp_path).head.layers == (1,)


@pytest.mark.parametrize(
    "config, match",
    [({"head_layers": layers}, "head_layers must be") for layers in ([], [99], ["4"], 4)]
    + [({"head_layers": [1], "mode": "generate"}, "head_layers .* needs score mode")],
)
def test_bad_head_layers_are_refused_in_one_sentence(tmp_path, config, match):
    from llmgym.errors import ConfigError

    with pytest.raises(ConfigError, match=match) as info:
        make_trainer("ppo", output_dir=str(tmp_path), **config, **FAST)
    assert "\n" not in str(info.value)
