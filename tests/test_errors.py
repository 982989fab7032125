"""User-facing errors: llmgym classes from ``llmgym.errors``, each message one sentence."""

from __future__ import annotations

import re
from collections.abc import Callable

import pytest

import llmgym.errors as errors
from llmgym.errors import ConfigError, LLMGymError


def _one_sentence(message: str) -> bool:
    """One line, ending with a full stop, with no sentence break inside."""
    return "\n" not in message and message.endswith(".") and not re.search(r"\.\s+[A-Z]", message)


def _policy_config() -> None:
    from llmgym.policy import PolicyConfig

    PolicyConfig(mode="guess")


def _algorithm() -> None:
    from llmgym.rl import config_class

    config_class("dqn")


def _device() -> None:
    from llmgym.policy.models import resolve_device

    resolve_device("tpu")


def _env() -> None:
    from llmgym.integrations import make_text_env

    make_text_env("Text-Nope-v0")


def _suite() -> None:
    from llmgym.bench.suites import suite_envs

    suite_envs("nope")


@pytest.mark.parametrize("cause", [_policy_config, _algorithm, _device, _env, _suite])
def test_user_input_errors_are_one_sentence_config_errors(cause: Callable[[], None]) -> None:
    with pytest.raises(ConfigError) as info:
        cause()
    assert isinstance(info.value, LLMGymError) and isinstance(info.value, ValueError)
    assert _one_sentence(str(info.value)), str(info.value)


def test_every_error_class_lives_in_llmgym_errors() -> None:
    from llmgym.bench.ray_runner import RayBenchError
    from llmgym.policy.backends.vllm import VLLMError

    assert VLLMError is errors.VLLMError and RayBenchError is errors.RayBenchError
    for name in errors.__all__:
        cls = getattr(errors, name)
        assert cls.__module__ == "llmgym.errors" and issubclass(cls, LLMGymError)
    assert issubclass(errors.ExportError, ValueError)
    assert issubclass(errors.RayBenchError, RuntimeError)
