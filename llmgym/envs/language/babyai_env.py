"""BabyAI-Text: minigrid's BabyAI levels described in words, as in GLAM (Carta et al., 2023).

Each observation states the mission and what the agent sees in its 7x7 egocentric view,
relative to where it faces ("You see a red ball 1 step left and 2 steps forward"): every
visible object (doors with their state), the nearest wall straight ahead, left and right, and
what the agent carries. The six actions are "turn left", "turn right", "go forward",
"pick up", "drop" and "toggle" (minigrid's ``done`` is left out), parsed by
``llmgym.parsing.parse_discrete``. Rewards and time limits are BabyAI's own: ``1 - 0.9 *
steps / max_steps`` on success, else 0. ``BabyAIBotPolicy`` wraps minigrid's ``BabyAIBot``, an
optimal-ish expert, as a text policy for benchmarks and SFT demos.

Example:
    >>> import pytest; _ = pytest.importorskip("minigrid")
    >>> import gymnasium as gym, llmgym
    >>> env = gym.make("Text-BabyAI-GoToLocal-v0")
    >>> obs, info = env.reset(seed=0)
    >>> print(obs)
    Goal of the agent: go to the green ball
    You see a wall 2 steps left
    You see a yellow key 1 step left and 1 step forward
    You see a grey ball 1 step right and 1 step forward
    You see a purple key 1 step left and 2 steps forward
    You see a green key 1 step right and 2 steps forward
    You see a green ball 3 steps forward
    You see a red box 2 steps right and 2 steps forward
    You see a green key 2 steps right and 4 steps forward
    You see a grey ball 1 step right and 5 steps forward
    You see a wall 6 steps forward
    You carry nothing
    >>> info["valid_actions"][:3]
    ['turn left', 'turn right', 'go forward']
"""

from __future__ import annotations

import contextlib
import io
from typing import Any

import gymnasium as gym
import numpy as np

from llmgym.describers import CuratedDescriber

ACTIONS = [
    ("turn left", "turn 90 degrees to the left"),
    ("turn right", "turn 90 degrees to the right"),
    ("go forward", "move one cell forward"),
    ("pick up", "pick up the object right in front of you"),
    ("drop", "drop the object you carry in the cell in front of you"),
    ("toggle", "open or close the door (or open the box) right in front of you"),
]
ACTION_NAMES = [name for name, _ in ACTIONS]
_TASK = (
    "You are an agent in a BabyAI grid world. Positions are given from your point of view: "
    '"forward" is the direction you face, "left" and "right" are relative to it, and you see '
    "up to 6 cells ahead and 3 to each side, not through walls or closed doors. Complete the "
    "goal given in each observation in as few steps as possible. To go to an object, or to "
    "pick it up, stand next to it and face it. The reward is 1 - 0.9 x (steps taken / step "
    "limit) on success and 0 otherwise."
)


def _steps(n: int, direction: str) -> str:
    return f"{n} step{'s' if n > 1 else ''} {direction}"


def _position(lateral: int, forward: int) -> str:
    parts = []
    if lateral:
        parts.append(_steps(abs(lateral), "left" if lateral < 0 else "right"))
    if forward:
        parts.append(_steps(forward, "forward"))
    return " and ".join(parts)


def _name(type_idx: int, color_idx: int, state: int) -> str:
    from minigrid.core.constants import IDX_TO_COLOR, IDX_TO_OBJECT, STATE_TO_IDX

    kind, color = IDX_TO_OBJECT[int(type_idx)], IDX_TO_COLOR[int(color_idx)]
    if kind == "door":
        door_state = {v: k for k, v in STATE_TO_IDX.items()}[int(state)]
        name = f"{door_state} {color} door"
    elif kind in ("goal", "lava"):
        name = f"{kind} square"
    else:
        name = f"{color} {kind}"
    return f"{'an' if name[0] in 'aeiou' else 'a'} {name}"


def describe_view(image: np.ndarray, mission: str, carrying: Any = None) -> str:
    """The GLAM-style text of one egocentric BabyAI view (``image[x, y]`` = type, color,
    state; the agent stands at the bottom centre and faces up)."""
    from minigrid.core.constants import OBJECT_TO_IDX

    width, height = image.shape[:2]
    ax, ay = width // 2, height - 1
    skip = {OBJECT_TO_IDX[k] for k in ("unseen", "empty", "floor", "wall", "agent")}
    wall = OBJECT_TO_IDX["wall"]
    seen: list[tuple[int, int, int, str]] = []
    for x in range(width):
        for y in range(height):
            if (x, y) == (ax, ay) or image[x, y, 0] in skip:
                continue
            lateral, forward = x - ax, ay - y
            text = f"You see {_name(*image[x, y])} {_position(lateral, forward)}"
            seen.append((abs(lateral) + forward, forward, lateral, text))
    straight = {
        "left": [(x, ay) for x in range(ax - 1, -1, -1)],
        "right": [(x, ay) for x in range(ax + 1, width)],
        "forward": [(ax, y) for y in range(ay - 1, -1, -1)],
    }
    for cells in straight.values():
        for distance, (x, y) in enumerate(cells, 1):
            if image[x, y, 0] == wall:
                lateral, forward = x - ax, ay - y
                text = f"You see a wall {_position(lateral, forward)}"
                seen.append((distance, forward, lateral, text))
                break
    lines = [f"Goal of the agent: {mission}"] + [t for *_, t in sorted(seen)]
    if carrying is None:
        lines.append("You carry nothing")
    else:
        lines.append(f"You carry a {carrying.color} {carrying.type}")
    return "\n".join(lines)


def _render(obs: dict[str, Any], env: gym.Env) -> str:
    return describe_view(obs["image"], obs["mission"], env.unwrapped.carrying)


class _QuietReset(gym.Wrapper):
    """Silences the "Sampling rejected" lines minigrid prints while generating a level."""

    def reset(self, **kwargs: Any) -> tuple[Any, dict[str, Any]]:
        with contextlib.redirect_stdout(io.StringIO()):
            return self.env.reset(**kwargs)


#: The BabyAI-Text describer: six named actions, the view described in words.
BABYAI = CuratedDescriber(task=_TASK, actions=ACTIONS, render=_render)


def make_babyai(
    level: str,
    *,
    history: int = 0,
    on_invalid: str = "fallback",
    invalid_penalty: float | None = None,
    **kwargs: Any,
) -> gym.Env:
    """Entry point of ``Text-BabyAI-<Level>-v0``: the minigrid level ``level`` (extra keyword
    arguments go to it) wrapped with the BabyAI-Text describer."""
    import minigrid  # noqa: F401  (importing it registers the BabyAI ids)

    from llmgym.envs.registration import wrap

    base = gym.make(level, disable_env_checker=True, **kwargs)
    return wrap(
        _QuietReset(base),
        BABYAI,
        history=history,
        on_invalid=on_invalid,
        invalid_penalty=invalid_penalty,
    )


class BabyAIBotPolicy:
    """minigrid's ``BabyAIBot`` (a planner that solves every BabyAI level) as a text policy.

    Call ``reset()`` after each ``env.reset()``, then ``act()`` before each step; it returns
    the name of the action to send to the text env.

    Example:
        >>> import pytest; _ = pytest.importorskip("minigrid")
        >>> import gymnasium as gym, llmgym
        >>> env = gym.make("Text-BabyAI-GoToLocal-v0")
        >>> _ = env.reset(seed=0)
        >>> bot = BabyAIBotPolicy(env)
        >>> bot.reset()
        >>> done = False
        >>> while not done:
        ...     _, reward, terminated, truncated, _ = env.step(bot.act())
        ...     done = terminated or truncated
        >>> reward > 0.5
        True
    """

    def __init__(self, env: gym.Env) -> None:
        self.env = env
        self._bot: Any = None

    def reset(self) -> None:
        """Start planning for the episode the env has just reset to."""
        from minigrid.utils.baby_ai_bot import BabyAIBot

        self._bot = BabyAIBot(self.env.unwrapped)

    def act(self) -> str:
        """The bot's next action, by name (its rare ``done`` is sent as ``toggle``, a no-op)."""
        if self._bot is None:
            raise RuntimeError("Call BabyAIBotPolicy.reset() after env.reset() and before act().")
        action = int(self._bot.replan())
        return ACTION_NAMES[action] if action < len(ACTION_NAMES) else "toggle"
