"""Parsing stays linear in the text (issue 13, item 9).

The regex checks run a pattern on 200,000 characters of the shape that used to backtrack
quadratically (minutes); a linear pattern takes milliseconds. The bound is a hang guard, far
from any real timing, not a speed measurement.
"""

import time

import gymnasium as gym
import pytest

import llmgym  # noqa: F401
from llmgym import parsing

HANG_GUARD_S = 5.0
RUN = 200_000


@pytest.mark.parametrize("tail", ["\n", " ", "\t\n", " \n"])
def test_labelled_action_regex_is_linear(tail):
    text = "action:" + tail * (RUN // len(tail))
    start = time.perf_counter()
    list(parsing._LABELLED.finditer(text))
    assert time.perf_counter() - start < HANG_GUARD_S


def test_prose_answer_regex_is_linear():
    math_env = pytest.importorskip("llmgym.envs.language.math_env")
    text = "the answer:" + "\n" * RUN
    start = time.perf_counter()
    list(math_env._PROSE.finditer(text))
    assert time.perf_counter() - start < HANG_GUARD_S


def test_step_with_newline_flood_parses_to_fallback():
    env = gym.make("Text-CartPole-v1")
    env.reset(seed=0)
    *_, info = env.step("action:" + "\n" * 7990)
    assert info["parse"]["method"] == "fallback"


def test_stepwise_turn_reads_a_bounded_prefix(monkeypatch):
    """A huge stepwise turn is cut before any per-character work (the documented cap)."""
    pytest.importorskip("reasoning_gym")
    from llmgym.envs.language import math_env

    seen: list[int] = []
    real = math_env.to_ascii
    monkeypatch.setattr(math_env, "to_ascii", lambda text: seen.append(len(text)) or real(text))
    env = gym.make("Text-GSM-Stepwise-v0")
    env.reset(seed=0)
    seen.clear()
    obs, reward, terminated, _, info = env.step("step " * 2_000_000)  # 10 MB, no answer
    assert (reward, terminated, info["parse"]["method"]) == (0.0, False, "step")
    assert max(seen) <= 4 * math_env._STEP_CHARS + 2_000
    assert "Step 1: step step" in obs


def test_long_answer_keeps_its_final_answer():
    pytest.importorskip("reasoning_gym")
    env = gym.make("Text-GSM-Stepwise-v0")
    _, info = env.reset(seed=0)
    text = "x " * 1_000_000 + f"The answer is {info['answer']}."
    _, reward, terminated, _, step_info = env.step(text)
    assert (reward, terminated) == (1.0, True) and step_info["parse"]["method"] == "prose"
