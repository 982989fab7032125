"""A one-step text bandit for trainer tests: the ``good`` answer earns 1, the other 0."""

from __future__ import annotations

import gymnasium as gym
from gymnasium import spaces

CHARSET = frozenset(chr(i) for i in range(32, 127)) | {"\n"}


class TextBandit(gym.Env):
    """Each episode is one turn: observation "Pick.", valid actions a and b; ``good`` pays 1."""

    def __init__(self, good: str = "b"):
        self.observation_space = spaces.Text(64, charset=CHARSET)
        self.action_space = spaces.Text(64, charset=CHARSET)
        self.good = good

    def _info(self) -> dict:
        return {"system_prompt": "Say a or b.", "valid_actions": ["a", "b"], "raw_obs": 0}

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return "Pick.", self._info()

    def step(self, action: str):
        choice = "b" if '"b"' in action else ("a" if '"a"' in action else None)
        # good="parity": a reward that varies with any text (for generate-mode plumbing tests)
        reward = float(len(action) % 2) if self.good == "parity" else float(choice == self.good)
        parse = {
            "ok": choice is not None,
            "method": "json",
            "action": 1 if choice == "b" else 0,
            "error": None,
        }
        return "Done.", reward, True, False, self._info() | {"parse": parse}


def _registered(env_id: str, entry_point: type, **kwargs) -> str:
    """``env_id``, registered for ``entry_point(**kwargs)`` on first use."""
    if env_id not in gym.registry:
        gym.register(env_id, entry_point=entry_point, kwargs=kwargs)
    return env_id


def register(good: str = "b") -> str:
    return _registered(f"LLMGymTest-Bandit-{good}-v0", TextBandit, good=good)


class ContextualBandit(TextBandit):
    """Two states, one turn each: in "Left room." ``a`` pays 1, in "Right room." ``b`` does.
    The rewarded action differs by state, so a policy must read the observation."""

    ROOMS = {"Left room.": "a", "Right room.": "b"}

    def __init__(self):
        super().__init__(good="a")
        self.room = "Left room."

    def reset(self, *, seed=None, options=None):
        gym.Env.reset(self, seed=seed)
        self.room = list(self.ROOMS)[int(self.np_random.integers(2))]
        return self.room, self._info()

    def step(self, action: str):
        self.good = self.ROOMS[self.room]
        return super().step(action)


def register_contextual() -> str:
    return _registered("LLMGymTest-ContextualBandit-v0", ContextualBandit)


class ContextualFallbackBandit(ContextualBandit):
    """``ContextualBandit`` where an answer that names no action takes "a", as a text env
    takes its parser's fallback (generate-mode tests: a random model rarely names one)."""

    def step(self, action: str):
        if '"a"' not in action and '"b"' not in action:
            action = '{"action": "a"}'
        return super().step(action)


def register_contextual_fallback() -> str:
    return _registered("LLMGymTest-ContextualFallbackBandit-v0", ContextualFallbackBandit)


class RoomValueBandit(ContextualBandit):
    """Every answer pays 1 in "Left room." and 0 in "Right room.": the state's value differs,
    the actions' do not (for critic tests)."""

    def step(self, action: str):
        obs, _, terminated, truncated, info = super().step(action)
        return obs, float(self.room == "Left room."), terminated, truncated, info


def register_room_value() -> str:
    return _registered("LLMGymTest-RoomValueBandit-v0", RoomValueBandit)


class ContextualParityBandit(ContextualBandit):
    """The contextual bandit for free text from a random model: in "Left room." an answer whose
    first character (after the ``{"action": "`` prefill) has an even code point pays 1, in
    "Right room." an odd one; about half of a random model's answers pay in each room, and no
    one answer pays in both."""

    PARITY = {"Left room.": 0, "Right room.": 1}

    def step(self, action: str):
        answer = action.removeprefix('{"action": "')
        reward = float(bool(answer) and ord(answer[0]) % 2 == self.PARITY[self.room])
        parse = {"ok": True, "method": "json", "action": 0, "error": None}
        return "Done.", reward, True, False, self._info() | {"parse": parse}


def register_contextual_parity() -> str:
    return _registered("LLMGymTest-ContextualParityBandit-v0", ContextualParityBandit)


class NaNBandit(TextBandit):
    """``a`` pays 1, ``b`` 0, except that ``a`` pays NaN in episodes whose seed is a multiple
    of 7 (a broken reward function)."""

    def __init__(self):
        super().__init__(good="a")
        self.seed = 0

    def reset(self, *, seed=None, options=None):
        self.seed = seed or 0
        return super().reset(seed=seed, options=options)

    def step(self, action: str):
        obs, reward, terminated, truncated, info = super().step(action)
        if reward == 1.0 and self.seed % 7 == 0:
            reward = float("nan")
        return obs, reward, terminated, truncated, info


def register_nan() -> str:
    return _registered("LLMGymTest-NaNBandit-v0", NaNBandit)
