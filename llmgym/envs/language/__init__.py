"""Language-native environments: text from the start, same info contract as the ``Text-*``
wrappers (``system_prompt``, ``valid_actions``, ``raw_obs``, ``parse``).

- TextWorld text adventures (``textworld`` extra), games generated offline from the seed and
  cached on disk (``textworld_env``);
- math and reasoning problems from reasoning-gym's procedural generators (``lang`` extra),
  single-step and stepwise (``math_env``);
- BabyAI-Text: minigrid's BabyAI levels described in words, GLAM-style (``lang`` extra,
  ``babyai_env``).

Registration is cheap: entry-point strings only, and an id is registered only when its
library is installed (found without importing it).

Example:
    >>> "Text-GSM-v0" in LANGUAGE_SUITE
    True
"""

from __future__ import annotations

import importlib.util

import gymnasium as gym

_MODULE = "llmgym.envs.language"

#: Every language-native id, in bench order (registered only when its extra is installed).
LANGUAGE_SUITE = [
    "Text-TextWorld-Simple-v0",
    "Text-TextWorld-Cooking-v0",
    "Text-Arithmetic-v0",
    "Text-GSM-v0",
    "Text-GSM-Stepwise-v0",
    "Text-BabyAI-GoToLocal-v0",
    "Text-BabyAI-PickupLoc-v0",
    "Text-BabyAI-PutNextLocal-v0",
    "Text-BabyAI-OpenDoor-v0",
]

#: ``Text-Arithmetic-v0``'s reasoning-gym config (its default goes up to 6 terms of 4 digits).
ARITHMETIC_CONFIG = {"min_terms": 2, "max_terms": 3, "min_digits": 1, "max_digits": 2}

# id -> (module needed, entry point, kwargs, max_episode_steps)
_SPECS: dict[str, tuple[str, str, dict, int | None]] = {
    "Text-TextWorld-Simple-v0": (
        "textworld",
        f"{_MODULE}.textworld_env:TextWorldEnv",
        {"family": "simple"},
        50,
    ),
    "Text-TextWorld-Cooking-v0": (
        "textworld",
        f"{_MODULE}.textworld_env:TextWorldEnv",
        {"family": "cooking"},
        100,
    ),
    "Text-Arithmetic-v0": (
        "reasoning_gym",
        f"{_MODULE}.math_env:ReasoningEnv",
        {"dataset": "basic_arithmetic", "config": ARITHMETIC_CONFIG},
        None,
    ),
    "Text-GSM-v0": (
        "reasoning_gym",
        f"{_MODULE}.math_env:ReasoningEnv",
        {"dataset": "gsm_symbolic"},
        None,
    ),
    "Text-GSM-Stepwise-v0": (
        "reasoning_gym",
        f"{_MODULE}.math_env:ReasoningEnv",
        {"dataset": "gsm_symbolic", "max_turns": 8},
        None,
    ),
}
for _level in ("GoToLocal", "PickupLoc", "PutNextLocal", "OpenDoor"):
    _SPECS[f"Text-BabyAI-{_level}-v0"] = (
        "minigrid",
        f"{_MODULE}.babyai_env:make_babyai",
        {"level": f"BabyAI-{_level}-v0"},
        None,  # minigrid truncates at each level's own max_steps
    )


def register_language_envs() -> list[str]:
    """Register the language-native ids whose library is installed; return them."""
    ids = []
    for env_id in LANGUAGE_SUITE:
        module, entry_point, kwargs, max_steps = _SPECS[env_id]
        if importlib.util.find_spec(module) is None:
            continue
        if env_id not in gym.registry:
            gym.register(
                env_id, entry_point=entry_point, kwargs=kwargs, max_episode_steps=max_steps
            )
        ids.append(env_id)
    return ids


__all__ = ["ARITHMETIC_CONFIG", "LANGUAGE_SUITE", "register_language_envs"]
