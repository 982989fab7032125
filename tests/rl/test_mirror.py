"""``PPOConfig.mirror``: each acted CartPole state is also trained on as its mirror image (the
negated state, LEFT and RIGHT swapped) with the same advantage."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from llmgym.errors import ConfigError  # noqa: E402
from llmgym.rl import make_trainer  # noqa: E402
from llmgym.rl.mirror import mirrored_samples  # noqa: E402
from llmgym.wrappers.text_observation import text_wrapper  # noqa: E402

FAST = dict(
    model="tiny",
    num_envs=2,
    episodes_per_update=2,
    eval_every=0,
    checkpoint_every=0,
    progress=False,
    num_threads=1,
    eval_method="sampled",
    train_backbone=False,
)


def test_a_mirrored_sample_is_the_negated_state_with_the_other_action(tmp_path):
    trainer = make_trainer(
        "ppo", env_id="Text-CartPole-v1", output_dir=str(tmp_path), mirror=True, **FAST
    )
    steps = [s for e in trainer.collect() for s in e.steps]
    mirrored = mirrored_samples(trainer.policy, trainer.envs[0], steps)
    text = text_wrapper(trainer.envs[0])
    for step, image in zip(steps, mirrored, strict=True):
        assert image.action_index == 1 - step.sample.action_index
        assert image.messages[-1]["content"] == text.observation(-np.asarray(step.raw_observation))
        assert image.messages[:-1] == step.sample.messages[:-1]  # the same system prompt
        assert image.candidate_ids == step.sample.candidate_ids  # the same answers
    with torch.no_grad():
        out = trainer.policy.forward_samples(mirrored)
    assert torch.isfinite(out.logprob).all() and out.logprob.shape == (len(steps),)


def test_a_mirror_update_trains_on_both_sides(tmp_path):
    trainer = make_trainer(
        "ppo",
        env_id="Text-CartPole-v1",
        output_dir=str(tmp_path),
        mirror=True,
        total_episodes=4,
        **FAST,
    )
    batches = []
    old_logprobs = trainer.learner.old_logprobs

    def spy(samples, acted=None):
        batches.append([s.action_index for s in samples])
        return old_logprobs(samples, acted)

    trainer.learner.old_logprobs = spy
    before = {k: v.clone() for k, v in trainer.policy.head.state_dict().items()}
    trainer.train(final_episodes=0)
    assert batches and all(len(b) % 2 == 0 for b in batches)
    for actions in batches:  # the acted actions, then their mirror images' in the same order
        half = len(actions) // 2
        assert actions[half:] == [1 - k for k in actions[:half]]
    after = trainer.policy.head.state_dict()
    assert any(not torch.equal(before[k], after[k]) for k in before)


def test_mirror_without_a_symmetry_is_refused_in_one_sentence(tmp_path):
    with pytest.raises(ConfigError, match="Text-Blackjack-v1 declares none") as info:
        make_trainer(
            "ppo", env_id="Text-Blackjack-v1", output_dir=str(tmp_path), mirror=True, **FAST
        )
    assert "\n" not in str(info.value)
