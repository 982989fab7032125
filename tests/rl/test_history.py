"""Chat history in training (``policy.history > 0``) follows each env's episodes: a prompt
holds the last turns of its own episode, never another episode's (issue 50)."""

from __future__ import annotations

import pytest

pytest.importorskip("torch")
pytest.importorskip("peft")

from llmgym.rl import make_trainer  # noqa: E402


def _turns(sample) -> list[tuple[str, str]]:
    """The (role, content) of a prompt's messages after the system prompt."""
    return [(m["role"], m["content"]) for m in sample.messages if m["role"] != "system"]


def _expected(episode, t: int, k: int) -> list[tuple[str, str]]:
    """The prompt of turn ``t``: its episode's last ``k`` turns, then its observation."""
    past = []
    for step in episode.steps[max(t - k, 0) : t]:
        past += [("user", step.observation), ("assistant", step.sample.text)]
    return [*past, ("user", episode.steps[t].observation)]


@pytest.mark.parametrize("algo", ["reinforce", "grpo"])
def test_training_history_follows_each_episode(algo, tmp_path):
    """Envs free up at different turns (episodes end at different lengths) and take new
    episodes; every prompt still holds exactly its own episode's past turns."""
    k = 2
    trainer = make_trainer(
        algo,
        model="tiny",
        env_id="Text-Blackjack-v1",
        history=k,
        num_envs=3,
        episodes_per_update=12,
        minibatch_size=12,
        total_episodes=24,
        eval_every=0,
        checkpoint_every=0,
        progress=False,
        num_threads=1,
        output_dir=str(tmp_path),
        **({"group_size": 2} if algo == "grpo" else {}),
    )
    first = trainer.collect()
    trainer.evaluate(4)  # evaluation episodes play in between, on the same envs
    episodes = first + trainer.collect()  # the second batch reuses the envs
    assert len({e.length for e in episodes}) > 1  # episodes ended at different turns
    assert any(e.length > 1 for e in episodes)
    for episode in episodes:
        for t, step in enumerate(episode.steps):
            assert _turns(step.sample) == _expected(episode, t, k), (episode.seed, t)
