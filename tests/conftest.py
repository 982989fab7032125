"""Fixtures for the agents tests: the tiny random-init model and a few text observations."""

from __future__ import annotations

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")


@pytest.fixture
def tiny():
    from llmgym.policy.testing import tiny_model

    return tiny_model(0)


@pytest.fixture
def blackjack():
    from llmgym.policy.testing import text_observations

    return text_observations("Text-Blackjack-v1", 4)


@pytest.fixture
def cartpole():
    from llmgym.policy.testing import text_observations

    return text_observations("Text-CartPole-v1", 4)
