"""Issue 37, item 5: model text never raises from ``env.step`` of a reasoning env. A verifier
that raises on an answer (boxnet's on a bare number) scores it 0 and says why in ``info``;
every offered dataset is re-audited against adversarial answers."""

from __future__ import annotations

import json
import math

import gymnasium as gym
import pytest

import llmgym  # noqa: F401

pytest.importorskip("reasoning_gym")

from llmgym.envs.language import math_env  # noqa: E402

ADVERSARIAL = [
    "The answer is 1",
    "",
    "   ",
    "1",
    "-0",
    "nan",
    "-1e309",
    "1e999999",
    "0x10",
    "1_000",
    "1/0",
    "True",
    "null",
    "[]",
    "{}",
    "[[]]",
    "{'a': 1}",
    "[{'a': 'b'}]",
    '{"answer": null}',
    '{"answer": [1, 2]}',
    '{"answer": {"a": 1}}',
    json.dumps({"answer": '[{"x": 1}]'}),
    json.dumps({"answer": "(1,2)"}),
    "\\boxed{}",
    "\\boxed{[1,2,3]}",
    "answer: ((((((((((1))))))))))",
    "answer: " + "9" * 5000,
    "answer: " + "[" * 2000,
    "a,b,c\nd,e,f",
    "é漢字🙂",
    "\x00\x01",
]


def test_the_boxnet_repro_scores_zero_and_says_why():
    env = gym.make("Text-Arithmetic-v0", dataset="boxnet", config={})
    env.reset(seed=8)
    _obs, reward, terminated, _truncated, info = env.step("The answer is 1")
    assert reward == 0.0 and terminated and info["correct"] is False
    assert info["verifier_score"] == 0.0
    assert info["verifier_error"].startswith("the boxnet verifier raised TypeError")


def test_a_non_finite_score_counts_zero(monkeypatch):
    env = gym.make("Text-Arithmetic-v0")
    env.reset(seed=0)
    monkeypatch.setattr(env.unwrapped.data, "score_answer", lambda *_: float("nan"))
    _obs, reward, *_, info = env.step("The answer is 1")
    assert reward == 0.0 and "non-finite" in info["verifier_error"]


@pytest.mark.parametrize("name", sorted(math_env.SAFE_DATASETS))
def test_every_offered_verifier_takes_adversarial_answers(name):
    try:
        env = math_env.ReasoningEnv(dataset=name, config={}, max_turns=1, size=16)
    except ValueError as error:  # a default config the generator refuses: one sentence
        pytest.skip(f"{name} cannot be built with its defaults: {error}")
    env.reset(seed=8)
    for answer in ADVERSARIAL:  # every answer is final (max_turns=1): the verifier sees it
        _obs, reward, terminated, _truncated, info = env.step(answer)
        assert terminated and reward in (0.0, 1.0), (name, answer)
        assert math.isfinite(info.get("verifier_score", 0.0)), (name, answer)
