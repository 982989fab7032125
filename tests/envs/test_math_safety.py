"""Model text never reaches eval through a reasoning-gym verifier (issue 13, item 1)."""

import json

import gymnasium as gym
import pytest

import llmgym  # noqa: F401

pytest.importorskip("reasoning_gym")

from reasoning_gym.factory import DATASETS  # noqa: E402

from llmgym.envs.language import math_env  # noqa: E402
from llmgym.envs.language.verifier_audit import audit  # noqa: E402

PAYLOAD = "__import__('os').system('touch PWNED')"


def test_the_audit_repro_is_refused_and_runs_nothing(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ValueError, match="not offered"):
        env = gym.make("Text-Arithmetic-v0", dataset="intermediate_integration", config=None)
        env.reset(seed=46)
        env.step(json.dumps({"answer": PAYLOAD}))
    assert not (tmp_path / "PWNED").exists()


@pytest.mark.parametrize("name", sorted(math_env.SAFE_DATASETS & set(DATASETS)))
def test_every_offered_verifier_is_reaudited_clean(name):
    assert audit(name) == []


@pytest.mark.parametrize("name", sorted(set(DATASETS) - math_env.SAFE_DATASETS))
def test_every_refused_dataset_is_refused(name):
    with pytest.raises(ValueError, match="not offered"):
        math_env.make_dataset(name, None, 0, 10)
    assert name == "composite" or audit(name), f"{name} audits clean: add it to SAFE_DATASETS"


def test_audit_catches_the_known_evaluators():
    assert "parse_expr" in audit("intermediate_integration")
    assert "eval" in audit("string_insertion")
    assert "eval" in audit("bitwise_arithmetic")  # through verify_solution, one call away


def test_registered_math_envs_use_offered_datasets():
    for env_id in ("Text-Arithmetic-v0", "Text-GSM-v0", "Text-GSM-Stepwise-v0"):
        env = gym.make(env_id)
        assert env.unwrapped.dataset_name in math_env.SAFE_DATASETS


def test_an_offered_verifier_does_not_run_the_payload(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    env = gym.make("Text-Arithmetic-v0", dataset="spell_backward", config=None)
    env.reset(seed=0)
    *_, info = env.step(json.dumps({"answer": PAYLOAD}))
    assert not (tmp_path / "PWNED").exists() and info["correct"] is False
