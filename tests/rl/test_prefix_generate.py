"""``optim.prefix_cache_generate``: generate mode's update reuses the shared system prompt's KV
cache where asked, and by default only on a GPU (it changes the gradient, so CPU runs keep the
numerics of the runs made before it)."""

from __future__ import annotations

import pytest

pytest.importorskip("peft")

from llmgym.rl import make_trainer  # noqa: E402


@pytest.mark.parametrize("setting, shares", [("auto", False), ("on", True), ("off", False)])
def test_generate_mode_shares_the_prefix_where_asked(setting, shares, monkeypatch, tmp_path):
    trainer = make_trainer(
        "ppo",
        env_id="Text-Blackjack-v1",
        model="tiny",
        device="cpu",
        mode="generate",
        num_envs=2,
        episodes_per_update=2,
        progress=False,
        output_dir=str(tmp_path),
        **{"optim.prefix_cache_generate": setting},
    )
    seen: list[bool] = []
    monkeypatch.setattr(
        trainer.policy, "forward_samples", lambda s, shared_prefix=False: seen.append(shared_prefix)
    )
    trainer.learner.evaluate_samples([object(), object()])
    assert seen == [shares]


def test_an_unknown_setting_is_refused(tmp_path):
    from llmgym.errors import LLMGymError

    with pytest.raises(LLMGymError, match="prefix_cache_generate"):
        make_trainer("ppo", model="tiny", output_dir=str(tmp_path), prefix_cache_generate="yes")
