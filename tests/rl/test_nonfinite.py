"""Non-finite rewards are counted, warned about and kept out of updates and means."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("peft")

sys.path.insert(0, str(Path(__file__).parents[1] / "support"))
from bandit import register_nan  # noqa: E402

from llmgym.agents.evaluate import evaluate  # noqa: E402
from llmgym.rl import make_trainer  # noqa: E402

NAN_BANDIT = register_nan()


@pytest.mark.parametrize("algo", ["reinforce", "grpo", "ppo"])
def test_nonfinite_rewards_stay_out_of_the_update(algo, tmp_path):
    extra = {"group_size": 4} if algo == "grpo" else {}
    trainer = make_trainer(
        algo,
        model="tiny",
        env_id=NAN_BANDIT,
        num_envs=16,
        episodes_per_update=16,
        minibatch_size=16,
        learning_rate=3e-3,
        total_episodes=16 * 8,
        eval_episodes=16,
        eval_every=0,
        checkpoint_every=0,
        progress=False,
        num_threads=1,
        eval_greedy=False,
        eval_method="sampled",
        output_dir=str(tmp_path),
        **extra,
    )
    counted = 0
    with pytest.warns(RuntimeWarning, match="non-finite reward"):
        while not trainer._done():
            metrics = trainer.run_iteration()
            counted += metrics["llmgym/nonfinite_rewards"]
            assert math.isfinite(metrics["charts/episodic_return"])
            assert all(math.isfinite(v) for k, v in metrics.items() if k.startswith("losses/"))
    assert counted > 0
    result = trainer.evaluate(64)
    assert math.isfinite(result["mean_return"]) and result["nonfinite_episodes"] > 0
    assert result["mean_return"] >= 0.9  # it learned "a" despite the NaNs


class AlwaysA:
    name = "always-a"

    def act_batch(self, observations, infos):
        return ['{"action": "a"}'] * len(observations)

    def reset(self, indices=None):
        pass


def test_eval_reports_a_finite_mean():
    with pytest.warns(RuntimeWarning, match="non-finite"):
        result = evaluate(NAN_BANDIT, AlwaysA(), episodes=28, progress=False)
    assert result["nonfinite_episodes"] == 4  # seeds 0, 7, 14, 21
    assert result["mean_return"] == 1.0
