"""Language-native environments: text from the start, same info contract as the ``Text-*``
wrappers (``system_prompt``, ``valid_actions``, ``raw_obs``, ``parse``).

- TextWorld text adventures (``textworld`` extra), games generated offline from the seed and
  cached on disk (``textworld_env``);
- math and reasoning problems from reasoning-gym's procedural generators (``lang`` extra),
  single-step and stepwise (``math_env``);
- BabyAI-Text: minigrid's BabyAI levels described in words, GLAM-style (``lang`` extra,
  ``babyai_env``).

Each id is an entry of ``llmgym.envs.catalog``; registration is cheap: entry-point strings
only, and an id is registered only when its library is installed (found without importing it).

Example:
    >>> "Text-GSM-v0" in LANGUAGE_SUITE
    True
"""

from __future__ import annotations

from llmgym.envs.catalog import ARITHMETIC_CONFIG, CATALOG

#: Every language-native id, in bench order (registered only when its extra is installed;
#: each is an entry of ``llmgym.envs.catalog``).
LANGUAGE_SUITE = [e.id for e in CATALOG if e.entry_point is not None]

__all__ = ["ARITHMETIC_CONFIG", "LANGUAGE_SUITE"]
