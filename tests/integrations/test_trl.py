"""TRL adapters: two real GRPOTrainer steps through each, with the tiny model.

The tiny random model first learns the answer format (a few dozen SFT steps on random valid
answers), so its sampled rollouts mix actions and GRPO groups have reward spread.
"""

from __future__ import annotations

import os
import random

import gymnasium as gym
import pytest

import llmgym  # noqa: F401

pytest.importorskip("trl")
torch = pytest.importorskip("torch")

from llmgym.integrations.trl import (  # noqa: E402
    SEED_KEY,
    environment_factory,
    episode_dataset,
    episode_return,
    rollout_func,
)
from llmgym.policy.testing import tiny_model  # noqa: E402

os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
ENV_ID = "Text-Blackjack-v1"


def replay_return(seed: int, actions: list[str]) -> float:
    env = gym.make(ENV_ID)
    env.reset(seed=seed)
    total = 0.0
    for text in actions:
        _, reward, terminated, truncated, _ = env.step(text)
        total += float(reward)
        if terminated or truncated:
            break
    return total


def sft(
    model, tokenizer, pairs: list[tuple[str, str]], steps: int = 60, context: int = 256, **kw
) -> None:
    """Teach ``model`` the completions of ``pairs`` (loss on completion tokens only), on the
    last ``context`` prompt tokens (enough to learn the format; full prompts are slow here)."""
    rows = []
    for prompt, completion in pairs:
        p = tokenizer(prompt, add_special_tokens=False)["input_ids"][-context:]
        c = tokenizer(completion, add_special_tokens=False)["input_ids"]
        rows.append((p + c, [-100] * len(p) + c))
    optimizer = torch.optim.AdamW(model.parameters(), lr=kw.get("lr", 3e-3))
    rng = random.Random(0)
    model.train()
    for _ in range(steps):
        batch = rng.sample(rows, kw.get("batch", 8))
        width = max(len(ids) for ids, _ in batch)
        ids = torch.tensor([x + [0] * (width - len(x)) for x, _ in batch])
        labels = torch.tensor([y + [-100] * (width - len(y)) for _, y in batch])
        mask = torch.tensor([[1] * len(x) + [0] * (width - len(x)) for x, _ in batch])
        loss = model(input_ids=ids, attention_mask=mask, labels=labels).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()


def grpo_config(tmp_path, **kwargs):
    from trl import GRPOConfig

    return GRPOConfig(
        output_dir=str(tmp_path),
        max_steps=2,
        per_device_train_batch_size=8,
        num_generations=4,
        learning_rate=1e-3,
        bf16=False,
        use_cpu=True,
        report_to=[],
        logging_steps=1,
        save_strategy="no",
        seed=0,
        gradient_checkpointing=False,  # TRL then generates with a KV cache (much faster here)
        **kwargs,
    )


def snapshot(model) -> dict[str, torch.Tensor]:
    return {n: p.detach().clone() for n, p in model.named_parameters()}


def changed(model, before) -> bool:
    return any(not torch.equal(p, before[n]) for n, p in model.named_parameters())


def logged_rewards(trainer) -> list[float]:
    return [h["reward"] for h in trainer.state.log_history if "reward" in h]


# ------------------------------------------------------------------------ environment_factory
def test_environment_factory_tools():
    Act = environment_factory(ENV_ID)
    Each = environment_factory(ENV_ID, per_action_tools=True)
    assert Act.__name__ == "TextBlackjackV1Env"
    a, e = Act(), Each()
    assert "`act` tool" in a.reset(seed=7) and "`stick`, `hit`" in e.reset(seed=7)
    a.act('{"action": "hit"}')
    e.hit()
    assert a.episode.rewards == e.episode.rewards
    with pytest.raises(ValueError, match="episode is over"):
        for _ in range(30):
            a.act("hit")
    assert a.get_reward() == replay_return(7, a.episode.actions)
    fresh = Act()
    fresh.reset(seed=3)  # never acted: played out with the fallback answer
    assert fresh.get_reward() == replay_return(3, [""] * 30) and fresh.episode.done
    with pytest.raises(ValueError, match="Unknown environment"):
        environment_factory("Text-Nope-v0")
    with pytest.raises(ValueError, match="per_action_tools=False"):
        environment_factory("Text-Pendulum-v1", per_action_tools=True)


def test_episode_dataset_rows():
    tools = episode_dataset(ENV_ID, [5, 6], tools=True)
    plain = episode_dataset(ENV_ID, 3)
    assert tools["seed"] == [5, 6] and tools[0]["prompt"] == [{"role": "user", "content": ""}]
    env = gym.make(ENV_ID)
    obs, info = env.reset(seed=2)
    assert plain[2]["prompt"][-1]["content"] == obs and plain[2]["prompt"][-1][SEED_KEY] == 2
    assert plain[2]["prompt"][0]["content"] == info["system_prompt"]
    with pytest.raises(ValueError, match="at least one"):
        episode_dataset(ENV_ID, [])


def qwen_tiny():
    from trl.chat_template_utils import qwen2_5_chat_template

    model, tokenizer = tiny_model(0)
    tokenizer.chat_template = qwen2_5_chat_template
    return model, tokenizer


# ~6 min: the byte-level tiny model needs 120 SFT steps on 1.5k-token prompts. `make test-heavy`
# (run by CI after `make test`) keeps `make test` itself under 15 minutes on a fresh machine.
@pytest.mark.heavy
def test_grpo_environment_factory_two_steps(tmp_path):
    from transformers.utils import get_json_schema
    from trl import GRPOTrainer

    Env = environment_factory(ENV_ID)
    model, tokenizer = qwen_tiny()
    schema = [get_json_schema(Env().act)]
    pairs = []
    for seed in range(40):
        env = Env()
        messages = [{"role": "user", "content": env.reset(seed=seed)}]
        for turn in range(2):
            action = random.Random(seed * 7 + turn).choice(["hit", "stick"])
            call = {"name": "act", "arguments": {"action": action}}
            prompt = tokenizer.apply_chat_template(
                messages, tools=schema, add_generation_prompt=True, tokenize=False
            )
            target = f'<tool_call>\n{{"name": "act", "arguments": {{"action": "{action}"}}}}\n'
            pairs.append((prompt, target + "</tool_call><|im_end|>"))
            if env.episode.done:
                break
            result = env.act(action)
            messages += [
                {"role": "assistant", "content": "", "tool_calls": [{"function": call}]},
                {"role": "tool", "name": "act", "content": result},
            ]
    sft(model, tokenizer, pairs, steps=120, context=4096)

    played: list[tuple[int, list[str], float]] = []

    class Recorded(Env):
        def get_reward(self) -> float:
            reward = super().get_reward()
            played.append((self.episode.seed, list(self.episode.actions), reward))
            return reward

    before = snapshot(model)
    args = grpo_config(tmp_path, max_completion_length=384, max_tool_calling_iterations=3)
    trainer = GRPOTrainer(
        model=model,
        args=args,
        train_dataset=episode_dataset(ENV_ID, 8, tools=True),
        processing_class=tokenizer,
        environment_factory=Recorded,
    )
    trainer.train()
    assert len(played) == 2 * 8
    for seed, actions, reward in played:
        assert reward == replay_return(seed, actions)
    means = [sum(r for _, _, r in played[i : i + 8]) / 8 for i in (0, 8)]
    assert logged_rewards(trainer) == pytest.approx(means)
    assert any(a and a[0] != "" for _, a, _ in played), "the model called the tool"
    assert changed(model, before)


# ------------------------------------------------------------------------------ rollout_func
def format_tiny(policy, steps: int = 60) -> None:
    """SFT the policy's model to answer ``hit"}`` or ``stick"}`` after the prefill."""
    pairs = []
    for seed in range(40):
        env = gym.make(ENV_ID)
        obs, info = env.reset(seed=seed)
        prompt = policy.prompt_text(policy.messages_for(0, obs, info))
        pairs.append((prompt, random.Random(seed).choice(["hit", "stick"]) + '"}'))
    sft(policy.model, policy.tokenizer, pairs, steps=steps)


def test_rollout_sequence_is_the_conversation():
    model, tokenizer = tiny_model(0)
    rollout = rollout_func(ENV_ID, max_new_tokens=8)
    policy = rollout.policy(model, tokenizer)
    format_tiny(policy)
    model.eval()
    out = rollout.play(policy, [0, 1, 2, 3, 4, 5])
    assert rollout.stats["episodes"] == 6 and rollout.stats["turns"] > 6, "multi-turn episodes"
    for i, seed in enumerate(out["llmgym_seed"]):
        ids, mask = out["completion_ids"][i], out["env_mask"][i]
        assert len(ids) == len(mask) == len(out["logprobs"][i])
        assert out["episode_return"][i] == replay_return(seed, out["llmgym_actions"][i])
        text = tokenizer.decode(out["prompt_ids"][i] + ids)
        model_text = tokenizer.decode([t for t, m in zip(ids, mask) if m])
        answers = "".join(a.removeprefix('{"action": "') for a in out["llmgym_actions"][i])
        assert model_text == answers, "env_mask marks exactly the sampled answers"
        assert all(lp == 0.0 for lp, m in zip(out["logprobs"][i], mask) if not m)
        assert all(lp < 0.0 for lp, m in zip(out["logprobs"][i], mask) if m)
        env = gym.make(ENV_ID)
        obs, _ = env.reset(seed=seed)
        for action in out["llmgym_actions"][i]:
            assert f"{obs}<|im_end|>\n<|im_start|>assistant\n{action}" in text
            obs = env.step(action)[0]


def test_rollout_seeds_from_prompts():
    rollout = rollout_func(ENV_ID)
    named = [[{"role": "user", "content": "x", SEED_KEY: 9}]] * 2
    plain = [[{"role": "user", "content": "a"}]] * 2 + [[{"role": "user", "content": "b"}]]
    seeds = rollout._seeds(named + plain)
    assert seeds[:2] == [9, 9] and seeds[2] == seeds[3] != seeds[4]
    with pytest.raises(ValueError, match="max_turns"):
        rollout_func(ENV_ID, max_turns=0)


def test_grpo_rollout_func_two_steps(tmp_path):
    from trl import GRPOTrainer

    model, tokenizer = tiny_model(0)
    rollout = rollout_func(ENV_ID, max_new_tokens=8)
    format_tiny(rollout.policy(model, tokenizer))
    played: list[tuple[int, list[str], float]] = []

    def reward(completions, llmgym_seed, llmgym_actions, **kwargs):
        rewards = episode_return(completions, **kwargs)
        played.extend(zip(llmgym_seed, llmgym_actions, rewards))
        return rewards

    before = snapshot(model)
    trainer = GRPOTrainer(
        model=model,
        reward_funcs=reward,
        args=grpo_config(tmp_path, max_completion_length=512),
        train_dataset=episode_dataset(ENV_ID, 8),
        processing_class=tokenizer,
        rollout_func=rollout,
    )
    trainer.train()
    assert len(played) == 2 * 8
    for seed, actions, r in played:
        assert r == replay_return(seed, actions)
    groups = [played[i : i + 4] for i in range(0, 16, 4)]
    assert all(len({s for s, _, _ in g}) == 1 for g in groups), "a GRPO group shares its seed"
    means = [sum(r for _, _, r in played[i : i + 8]) / 8 for i in (0, 8)]
    assert logged_rewards(trainer) == pytest.approx(means)
    assert changed(model, before)


def test_a_step_whose_groups_all_share_one_return_warns():
    """A call where every group (the episodes of one seed) has a single return carries no
    GRPO signal: it is counted and warned about; one group with spread is enough."""
    rollout = rollout_func(ENV_ID)
    with pytest.warns(RuntimeWarning, match="has no learning signal"):
        rollout._check_spread([3, 3, 5, 5], [1.0, 1.0, -1.0, -1.0])
    assert rollout.stats["groups"] == 2 and rollout.stats["flat_groups"] == 2
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        rollout._check_spread([3, 3, 5, 5], [1.0, -1.0, -1.0, -1.0])
    assert rollout.stats["groups"] == 4 and rollout.stats["flat_groups"] == 3
