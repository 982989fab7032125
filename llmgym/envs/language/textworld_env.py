"""TextWorld text adventures, generated offline by TextWorld's own generator and cached.

``reset(seed=s)`` plays game ``s % num_games`` of a family; ``reset()`` without a seed draws a
game from ``range(num_games)`` with the env's ``np_random``. A game is generated the first time
it is needed (about 3 s, plus about 6 s once per process to load TextWorld's knowledge base)
and cached under ``$LLMGYM_CACHE/textworld/<textworld version>/<family>/`` (default
``~/.cache/llmgym``); TextWorld's generator is deterministic, so the same seed gives the same
game on every machine. ``game_file(family, game_id)`` pre-generates a game.

Families: ``simple`` (TextWorld's ``tw-simple``: a house, dense rewards, detailed goal) and
``cooking`` (``tw-cooking``, as in the First TextWorld Problems: find and cook a two-ingredient
recipe across six rooms with doors and containers to open).

The reward is the change in TextWorld's cumulative score; an episode terminates when the game is
won or lost. ``info["valid_actions"]`` holds the admissible commands (also listed in the
observation text), ``info["walkthrough"]`` at reset a winning command list, ``info["raw_obs"]``
TextWorld's own feedback text. An answer that names no admissible command plays ``look``
(``info["parse"]["ok"]`` is False).

Example:
    >>> import pytest; _ = pytest.importorskip("textworld")
    >>> import gymnasium as gym, llmgym
    >>> env = gym.make("Text-TextWorld-Simple-v0", num_games=1)
    >>> obs, info = env.reset(seed=0)
    >>> total = 0.0
    >>> for command in info["walkthrough"]:
    ...     obs, reward, terminated, truncated, info = env.step(command)
    ...     total += reward
    >>> terminated, total == info["max_score"]
    (True, True)
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
import warnings
from pathlib import Path
from typing import Any, SupportsFloat

import gymnasium as gym
from gymnasium import spaces

from llmgym.describers import CHARSET
from llmgym.errors import ConfigError
from llmgym.parsing import parse_discrete
from llmgym.wrappers.text_action import MAX_ACTION_CHARS
from llmgym.wrappers.text_observation import MAX_OBSERVATION_CHARS, TextSpace, sanitize

#: family -> (TextWorld challenge, its settings).
FAMILIES: dict[str, tuple[str, dict[str, Any]]] = {
    "simple": ("tw-simple", {"rewards": "dense", "goal": "detailed", "test": False}),
    "cooking": (
        "tw-cooking",
        {
            "recipe": 2,
            "take": 2,
            "go": 6,
            "open": True,
            "cook": True,
            "cut": False,
            "drop": False,
            "recipe_seed": 0,
            "split": "train",
        },
    ),
}
_BANNER_CHARS = frozenset(" _|$\\/<>")
_STATUS_LINE = re.compile(r"^>\s{10,}.*$", re.MULTILINE)
_TASK = (
    "You are playing a text adventure game. Each observation is the game's text followed by "
    "the list of admissible commands. Reach the goal described by the game to win; you earn "
    "points for every step of progress. Useful commands: look, inventory, examine <thing>, "
    "go <direction>, open/take/put/cook ..."
)


def cache_dir() -> Path:
    """Where generated games live: ``$LLMGYM_CACHE/textworld`` (default ``~/.cache/llmgym``).

    Example:
        >>> cache_dir().name
        'textworld'
    """
    return Path(os.environ.get("LLMGYM_CACHE", "~/.cache/llmgym")).expanduser() / "textworld"


def game_file(family: str, game_id: int) -> Path:
    """The compiled game ``game_id`` of ``family``, generated and cached on first use."""
    import textworld
    from textworld.challenges import CHALLENGES
    from textworld.generator import compile_game

    if family not in FAMILIES:
        raise ConfigError(f"Unknown TextWorld family {family!r}; choose one of {list(FAMILIES)}.")
    folder = cache_dir() / textworld.__version__ / family
    path = folder / f"game_{game_id}.z8"
    if path.exists():
        return path
    folder.mkdir(parents=True, exist_ok=True)
    challenge, settings = FAMILIES[family]
    tmp = Path(tempfile.mkdtemp(dir=folder, prefix=".tmp-"))
    try:
        options = textworld.GameOptions()
        options.seeds = game_id
        options.path = str(tmp / "game.z8")
        options.file_ext = ".z8"
        game = CHALLENGES[challenge][1](dict(settings), options)
        compile_game(game, options)
        # json first: the .z8 appearing is what marks the game as complete (also across
        # processes generating the same game at once).
        os.replace(tmp / "game.json", path.with_suffix(".json"))
        os.replace(tmp / "game.z8", path)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return path


def clean_feedback(text: str) -> str:
    """TextWorld's feedback without its ASCII-art title, status bar and extra blank lines.

    Example:
        >>> clean_feedback("\\n  __  __\\n | $$ |\\n\\nHi!\\n\\n\\n>            -= Room =-0/1")
        'Hi!'
    """
    lines = text.splitlines()
    while lines and set(lines[0]) <= _BANNER_CHARS:
        lines.pop(0)
    text = _STATUS_LINE.sub("", "\n".join(lines))
    return re.sub(r"\n{3,}", "\n\n", text).strip()


class TextWorldEnv(gym.Env):
    """A family of generated TextWorld games as a text env (see the module docstring)."""

    metadata = {"render_modes": []}

    def __init__(self, family: str = "simple", num_games: int = 100) -> None:
        if family not in FAMILIES:
            raise ConfigError(
                f"Unknown TextWorld family {family!r}; choose one of {list(FAMILIES)}."
            )
        if num_games < 1:
            raise ConfigError(f"num_games must be at least 1, not {num_games}.")
        self.family = family
        self.num_games = num_games
        self.observation_space = TextSpace(MAX_OBSERVATION_CHARS)
        self.action_space = spaces.Text(max_length=MAX_ACTION_CHARS, min_length=0, charset=CHARSET)
        self.system_prompt = (
            f"{_TASK}\n\nReply with a JSON object naming one admissible command: "
            '{"action": "<one of the admissible commands>"}.'
        )
        self._game: Any = None
        self._game_id: int | None = None
        self._state: Any = None

    def _infos(self) -> Any:
        import textworld

        return textworld.EnvInfos(
            admissible_commands=True,
            policy_commands=True,
            max_score=True,
            score=True,
            won=True,
            lost=True,
        )

    def _load(self, game_id: int) -> None:
        if self._game is not None and game_id == self._game_id:
            return
        import textworld

        self.close()
        path = str(game_file(self.family, game_id))
        with warnings.catch_warnings():
            # jericho's "not fully supported" warning: TextWorld tracks the score itself.
            warnings.simplefilter("ignore")
            self._game = textworld.start(path, self._infos())
        self._game_id = game_id

    def _observe(self, state: Any) -> tuple[str, dict[str, Any]]:
        feedback = clean_feedback(state.feedback or "")
        commands = list(state.admissible_commands or [])
        text = f"{feedback}\n\nAdmissible commands: {', '.join(commands)}."
        info = {
            "system_prompt": self.system_prompt,
            "valid_actions": commands,
            "raw_obs": state.feedback,
            "score": int(state.score),
            "max_score": int(state.max_score),
            "won": bool(state.won),
            "lost": bool(state.lost),
            "game_id": self._game_id,
        }
        return sanitize(text), info

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[str, dict[str, Any]]:
        super().reset(seed=seed)
        if seed is not None:
            game_id = seed % self.num_games
        else:
            game_id = int(self.np_random.integers(self.num_games))
        self._load(game_id)
        self._state = self._game.reset()
        obs, info = self._observe(self._state)
        info["walkthrough"] = list(self._state.policy_commands or [])
        return obs, info

    def step(self, action: str) -> tuple[str, SupportsFloat, bool, bool, dict[str, Any]]:
        if self._state is None:
            raise RuntimeError("Call reset() before step() on a TextWorld env.")
        commands = list(self._state.admissible_commands or ["look"])
        fallback = commands.index("look") if "look" in commands else 0
        result = parse_discrete(action, commands, fallback=fallback)
        command = commands[result.action]
        previous = self._state.score
        self._state, _, _ = self._game.step(command)
        obs, info = self._observe(self._state)
        info["parse"] = {**result.as_dict(), "action": command}
        reward = float(self._state.score - previous)
        return obs, reward, bool(self._state.won or self._state.lost), False, info

    def close(self) -> None:
        if self._game is not None:
            self._game.close()
        self._game, self._game_id, self._state = None, None, None
