"""Every committed policy (``benchmarks/weights/rl/*``) still loads through
``load_trained_policy`` after the layout change, and acts greedily on its env."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("peft")

WEIGHTS = Path(__file__).parents[2] / "benchmarks" / "weights" / "rl"
#: Committed policies only: a random-init control's (NAME-random-sN) is written but git-ignored.
POLICIES = sorted(
    p for p in WEIGHTS.iterdir() if (p / "config.json").is_file() and "-random-s" not in p.name
)


@pytest.mark.slow
@pytest.mark.parametrize("path", POLICIES, ids=[p.name for p in POLICIES])
def test_committed_policy_loads_and_acts(path, monkeypatch):
    import gymnasium as gym

    import llmgym  # noqa: F401  (registers the Text-* ids)
    from llmgym.policy import PolicyConfig
    from llmgym.rl import load_trained_policy

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    config = json.loads((path / "config.json").read_text())
    run = config.get("run", config)
    mode = config.get("policy", config).get("mode", "score")
    policy = load_trained_policy(
        str(path), device="cpu", policy_config=PolicyConfig(mode=mode, greedy=True)
    )
    env = gym.make(run["env_id"], **run.get("env_kwargs", {}))
    obs, info = env.reset(seed=0)
    [sample] = policy.act([obs], [info])
    assert env.step(sample.text)[-1]["parse"]["ok"]


RECORDS = Path(__file__).parents[2] / "benchmarks" / "results" / "rl"


@pytest.mark.slow
@pytest.mark.heavy  # ~80 s with the two Blackjack policies' 280 states: make test-heavy (CI)
@pytest.mark.parametrize(
    "name",
    [
        "blackjack-ppo-s0",
        "blackjack-lm-ppo-ema-s0",
        "frozenlake-noslip-ppo-s0",
        "frozenlake-lm-ppo-s1",
    ],
)
def test_committed_policy_keeps_its_exact_value(name, monkeypatch):
    """The exact greedy value of a headline policy is the one its record states."""
    from llmgym.agents.evaluate import evaluate_exact

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    record = json.loads((RECORDS / f"{name}.json").read_text())
    config = json.loads((WEIGHTS / name / "config.json").read_text())
    run = config.get("run", config)  # sections, or the flat config of older runs
    agent = f"llm:smollm2-135m@{WEIGHTS / name}"
    result = evaluate_exact(record["env_id"], agent, env_kwargs=run.get("env_kwargs") or None)
    assert result["mean_return"] == pytest.approx(record["eval_value"], abs=1e-9)
