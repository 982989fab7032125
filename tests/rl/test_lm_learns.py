"""The language model itself learns a state-dependent policy (no action head): a two-state
contextual bandit where the rewarded answer depends on the observation, in score and in
generate mode, on the tiny random-init model (issue 35's test of "policy": "lm"). In generate
mode the reward is the parity of the answer's first character, which a random byte-level model
hits half the time (it would almost never write "a" or "b")."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("peft")

sys.path.insert(0, str(Path(__file__).parents[1] / "support"))
from bandit import (  # noqa: E402
    ContextualBandit,
    ContextualParityBandit,
    register_contextual,
    register_contextual_fallback,
    register_contextual_parity,
    register_room_value,
)

from llmgym.rl import make_trainer  # noqa: E402

ROOMS = list(ContextualBandit.ROOMS)
#: The tiny model with no head, 16 envs, updates of 32 episodes, no evaluation or checkpoint.
FAST = dict(
    model="tiny",
    action_head=False,
    num_envs=16,
    episodes_per_update=32,
    minibatch_size=32,
    eval_every=0,
    eval_start=False,
    checkpoint_every=0,
    progress=False,
    num_threads=1,
)


def _p_rewarded(trainer) -> dict[str, float]:
    """Each room's probability of its rewarded answer under the trained policy (score mode's
    softmax; generate mode's share of sampled answers that name it)."""
    policy = trainer.policy
    out = {}
    for room, good in ContextualBandit.ROOMS.items():
        info = {"system_prompt": "Say a or b.", "valid_actions": ["a", "b"]}
        if policy.config.mode == "score":
            probs = policy.action_probabilities([room], [info])[0]
            out[room] = probs[["a", "b"].index(good)]
        else:  # the parity bandit: the share of 32 sampled answers that pay
            env = ContextualParityBandit()
            env.room = room
            policy.reset()
            samples = policy.act([room] * 32, [info] * 32)
            out[room] = sum(env.step(s.text)[1] for s in samples) / 32
    return out


@pytest.mark.parametrize(
    "mode,algo,extra",
    [
        ("score", "ppo", {}),
        ("score", "ppo", {"center_grad": True, "value_whiten": True}),
        ("score", "ppo", {"center_grad": True, "lora_init": "states"}),
        ("score", "ppo", {"center_grad": True, "lm_optimizer": "sgd", "learning_rate": 0.3}),
        ("score", "ppo", {"q_critic": True}),
        ("score", "ppo", {"q_critic": True, "center_grad": True}),
        ("score", "ppo", {"q_critic": True, "q_window": 3, "gae_lambda": 1.0}),
        ("score", "ppo", {"q_critic": True, "q_window": 3, "head_layers": [1], "lora.layers": 1}),
        ("score", "ppo", {"q_critic": True, "q_window": 3, "q_ridge": 0.0}),
        ("score", "ppo", {"q_critic": True, "q_window": 3, "q_target": "softmax", "q_step": 3.0}),
        ("score", "grpo", {}),
        ("score", "reinforce", {}),
        ("generate", "ppo", {}),
        ("generate", "grpo", {}),
    ],
)
def test_the_model_without_a_head_learns_a_contextual_bandit(mode, algo, extra, tmp_path):
    settings = FAST | dict(
        env_id=register_contextual() if mode == "score" else register_contextual_parity(),
        mode=mode,
        max_new_tokens=6,
        learning_rate=3e-3,
        total_episodes=32 * (20 if mode == "score" else 60),
        output_dir=str(tmp_path),
    )
    trainer = make_trainer(
        algo, **(settings | ({"group_size": 4} if algo == "grpo" else {}) | extra)
    )
    assert trainer.policy.head is None
    before = _p_rewarded(trainer)
    trainer.train()
    after = _p_rewarded(trainer)
    # The rewarded answer differs by room, so one constant answer cannot pass both rooms.
    assert min(before.values()) < 0.7, before
    assert min(after.values()) >= 0.9, (before, after)


def test_the_whitened_critic_learns_each_state_value_and_is_restored(tmp_path):
    """``value_whiten``: without an action head the critic is linear on whitened hidden states;
    it tells the paying room from the other within a few updates, and a restored run gives the
    same values (the whitening map is part of the checkpoint)."""
    from llmgym.rl import restore_trainer

    trainer = make_trainer(
        "ppo",
        **FAST,
        env_id=register_room_value(),
        value_whiten=True,
        value_lr=0.02,
        total_episodes=32 * 6,
        output_dir=str(tmp_path),
    )
    trainer.train()
    info = {"system_prompt": "Say a or b.", "valid_actions": ["a", "b"]}
    samples = trainer.collector.act(ROOMS, [info, info])

    def values(t):
        with torch.no_grad():
            return t.algorithm.critic.value(t.learner.evaluate_samples(samples).hidden).tolist()

    left, right = values(trainer)
    assert left - right > 0.7, (left, right)
    restored = restore_trainer(str(tmp_path))
    assert values(restored) == pytest.approx([left, right], abs=1e-5)


def test_lora_init_from_states_changes_no_output_and_reads_what_states_differ_in():
    """``lora.init=states``: B stays zero (the same log-probs), and each A's rows are
    orthogonal directions inside the span of the states' differences at the last positions."""
    from peft import LoraConfig, get_peft_model

    from llmgym.policy.testing import tiny_model
    from llmgym.rl.weights import init_lora_from_states

    model, _ = tiny_model()
    model = get_peft_model(model, LoraConfig(r=2, target_modules=["q_proj", "v_proj"]))
    prompts = [[5, 6, 7, 9], [5, 8, 7, 9], [4, 6, 3, 9]]
    ids = torch.tensor(prompts)
    with torch.no_grad():
        before = model(input_ids=ids).logits
    seen = {}
    module = model.base_model.model.model.layers[0].self_attn.q_proj
    handle = module.register_forward_pre_hook(lambda m, a: seen.setdefault("x", a[0].detach()))
    assert init_lora_from_states(model, prompts, pad_id=0, positions=4) == 4
    handle.remove()
    with torch.no_grad():
        assert torch.equal(model(input_ids=ids).logits, before)
    a = module.lora_A["default"].weight.detach().double()
    gram = a @ a.T
    assert torch.allclose(gram, torch.diag(torch.diag(gram)), atol=1e-6)  # orthogonal rows
    x = seen["x"].double()
    diffs = (x - x.mean(0, keepdim=True)).reshape(-1, x.shape[-1])
    basis = torch.linalg.svd(diffs, full_matrices=False).Vh[:2]  # rank 2: three states
    inside = (a @ basis.T).norm(dim=1) / a.norm(dim=1)
    assert torch.allclose(inside, torch.ones(2, dtype=inside.dtype), atol=1e-6)


def test_the_q_critic_scores_each_action_is_restored_and_needs_sum_scores(tmp_path):
    """``q_critic``: the critic learns each room's paying answer (Q of the rewarded answer
    above the other's in both rooms, whose rewarded answers differ), a restored run gives the
    same Q-values, and generate mode with per-token scores is refused in one sentence."""
    from llmgym.errors import ConfigError
    from llmgym.rl import restore_trainer

    settings = FAST | dict(env_id=register_contextual(), q_critic=True, output_dir=str(tmp_path))
    trainer = make_trainer("ppo", **settings, learning_rate=1e-9, total_episodes=32 * 6)
    trainer.train()
    info = {"system_prompt": "Say a or b.", "valid_actions": ["a", "b"]}
    samples = trainer.collector.act(ROOMS, [info, info])

    def q(t):
        with torch.no_grad():
            return [
                x.tolist()
                for x in t.algorithm.critic.q_values(
                    t.learner.evaluate_samples(samples).hidden, samples
                )
            ]

    (left_a, left_b), (right_a, right_b) = q(trainer)
    assert left_a > left_b and right_b > right_a, q(trainer)
    restored = restore_trainer(str(tmp_path))
    assert q(restored) == [pytest.approx(row, abs=1e-5) for row in q(trainer)]
    generate = {"mode": "generate", "normalization": "token", "output_dir": str(tmp_path / "g")}
    with pytest.raises(ConfigError, match="needs normalization=sum"):
        make_trainer("ppo", **settings | generate)


def test_in_generate_mode_the_q_critic_teaches_valid_answers_that_depend_on_the_state(tmp_path):
    """``q_critic`` in generate mode: the tiny random-init model writes text that parses to no
    action (the env then takes its fallback, "a"); fitted through each action's canonical
    answer, it learns to write a valid answer, and the one that pays in each room."""
    env_id = register_contextual_fallback()
    settings = FAST | dict(env_id=env_id, mode="generate", max_new_tokens=6, q_critic=True)
    settings |= dict(q_window=3, q_step=3.0, gae_lambda=1.0, head_layers=[1], learning_rate=3e-3)
    trainer = make_trainer("ppo", **settings, total_episodes=32 * 24, output_dir=str(tmp_path))
    info = {"system_prompt": "Say a or b.", "valid_actions": ["a", "b"]}

    def answers(room: str, greedy: bool = False) -> list[str]:
        samples = trainer.policy.act([room] * 32, [info] * 32, greedy=greedy)
        return [s.text for s in samples]

    before = answers("Left room.") + answers("Right room.")
    assert sum(a in ('{"action": "a"}', '{"action": "b"}') for a in before) < 8, before
    trainer.train()
    for room, good in ContextualBandit.ROOMS.items():
        paid = sum(a == f'{{"action": "{good}"}}' for a in answers(room))
        assert paid >= 24 and answers(room, greedy=True)[0] == f'{{"action": "{good}"}}', paid


def test_the_q_critic_can_read_a_hidden_state_below_lora_that_training_leaves_alone(tmp_path):
    """``head_layers`` without the head: the critics read that hidden state. Read below LoRA's
    layers (here the tiny model's layer 1 of 2, LoRA in the last one) it is the same before and
    after training, while the policy's scores move; in generate mode without the q_critic it
    is refused."""
    from llmgym.errors import ConfigError

    settings = (
        FAST
        | dict(env_id=register_contextual(), q_critic=True, q_window=3, head_layers=[1])
        | {"lora.layers": 1, "output_dir": str(tmp_path)}
    )
    trainer = make_trainer("ppo", **settings, learning_rate=3e-3, total_episodes=32 * 4)
    info = {"system_prompt": "Say a or b.", "valid_actions": ["a", "b"]}
    samples = trainer.collector.act(ROOMS, [info, info])
    with torch.no_grad():
        before = trainer.learner.evaluate_samples(samples)
    assert before.hidden.shape == (2, trainer.model.config.hidden_size)
    trainer.train()
    with torch.no_grad():
        after = trainer.learner.evaluate_samples(samples)
    assert torch.allclose(after.hidden, before.hidden, atol=1e-5)
    assert not torch.allclose(after.logprob, before.logprob, atol=1e-3)
    generate = {"mode": "generate", "q_critic": False, "output_dir": str(tmp_path / "g")}
    with pytest.raises(ConfigError, match="head_layers .* needs score mode"):
        make_trainer("ppo", **settings | generate)
