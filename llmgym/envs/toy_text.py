"""Curated describers for Gymnasium's toy-text environments (Blackjack, FrozenLake, Taxi,
CliffWalking). Grid worlds are drawn as text with the agent's position marked.

Example:
    >>> import gymnasium as gym
    >>> env = gym.make("FrozenLake-v1")
    >>> obs, _ = env.reset(seed=0)
    >>> print(FROZEN_LAKE.describe(obs, env))
    You are at row 0, column 0 (marked A).
    A F F F
    F H F H
    F F F H
    H F F G
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

from llmgym.describers import CuratedDescriber

GRID_LEGEND = "Map legend: A = you, S = start, F = frozen ice (safe), H = hole, G = goal."


def _blackjack(obs: Any, env: gym.Env) -> str:
    player, dealer, usable_ace = (int(v) for v in obs)
    dealer_card = "an ace" if dealer == 1 else f"a {dealer}"
    ace = "a usable ace (counted as 11)" if usable_ace else "no usable ace"
    return f"Your hand totals {player} with {ace}. The dealer shows {dealer_card}."


BLACKJACK = CuratedDescriber(
    task=(
        "You play one hand of blackjack against the dealer. Cards 2-10 count their value, "
        "face cards count 10, an ace counts 1 or 11. Get closer to 21 than the dealer "
        "without going over. You win +1, lose -1, or draw 0. The dealer draws until 17 "
        "or more."
    ),
    actions=[("stick", "stop drawing and let the dealer play"), ("hit", "draw another card")],
    render=_blackjack,
)


def _grid(env: gym.Env) -> np.ndarray:
    return np.asarray(env.unwrapped.desc).astype(str)


def _draw(desc: np.ndarray, row: int, col: int) -> str:
    cells = desc.copy()
    cells[row, col] = "A"
    return "\n".join(" ".join(line) for line in cells)


def _frozen_lake(obs: Any, env: gym.Env) -> str:
    desc = _grid(env)
    row, col = divmod(int(obs), desc.shape[1])
    return f"You are at row {row}, column {col} (marked A).\n{_draw(desc, row, col)}"


def _is_slippery(env: gym.Env) -> bool:
    transitions = env.unwrapped.P
    return any(len(outcomes) > 1 for outcomes in transitions[0].values())


def _frozen_lake_task(env: gym.Env) -> str:
    rows, cols = _grid(env).shape
    slip = (
        "The ice is slippery: you move in the intended direction only 1/3 of the time, "
        "otherwise to one of the two perpendicular directions."
        if _is_slippery(env)
        else "The ice is not slippery: you always move where you intend."
    )
    return (
        f"You cross a frozen lake on a {rows}x{cols} grid from the start S (top-left) to the "
        f"goal G (bottom-right) without falling into a hole H. Reaching the goal earns +1; "
        f"falling into a hole ends the episode with 0. Rows count down from 0 at the top, "
        f"columns right from 0 at the left. {slip}\n{GRID_LEGEND}"
    )


_GRID_MOVES = {
    "LEFT": "move one cell left",
    "DOWN": "move one cell down",
    "RIGHT": "move one cell right",
    "UP": "move one cell up",
}

_TAXI_LOCATIONS = ("Red (R)", "Green (G)", "Yellow (Y)", "Blue (B)")


def _taxi(obs: Any, env: gym.Env) -> str:
    taxi_row, taxi_col, passenger, destination = env.unwrapped.decode(int(obs))
    lines = _taxi_map(env)
    map_row = lines[1 + taxi_row]
    x = 1 + 2 * taxi_col
    lines[1 + taxi_row] = map_row[:x] + "T" + map_row[x + 1 :]
    where = "in the taxi" if passenger == 4 else f"waiting at {_TAXI_LOCATIONS[passenger]}"
    return "\n".join(
        [
            f"Taxi (T) at row {taxi_row}, column {taxi_col}.",
            f"Passenger: {where}.",
            f"Destination: {_TAXI_LOCATIONS[destination]}.",
            *lines,
        ]
    )


def _taxi_map(env: gym.Env) -> list[str]:
    return ["".join(row.astype(str)) for row in np.asarray(env.unwrapped.desc)]


TAXI_TASK = (
    "You drive a taxi on a 5x5 grid with walls (|) that block east-west moves. Four stops are "
    "marked R, G, Y and B. Drive to the passenger, pick them up, drive to the destination and "
    "drop them off. Each step costs -1, a successful drop-off earns +20, and an illegal "
    "pickup or drop-off costs -10 (at most 200 steps). Rows count down from 0 at the top "
    "(north), columns right from 0 at the left (west)."
)


def _cliff(obs: Any, env: gym.Env) -> str:
    rows, cols = env.unwrapped.shape
    row, col = divmod(int(obs), cols)
    cells = np.full((rows, cols), ".", dtype="<U1")
    cells[rows - 1, 1 : cols - 1] = "C"
    cells[rows - 1, 0] = "S"
    cells[rows - 1, cols - 1] = "G"
    return f"You are at row {row}, column {col} (marked A).\n{_draw(cells, row, col)}"


CLIFF_TASK = (
    "You walk on a 4x12 grid from the start S (bottom-left) to the goal G (bottom-right). "
    "The cells between them on the bottom row are a cliff C: stepping onto it costs -100 and "
    "sends you back to the start. Every step costs -1, so take the shortest safe path. Rows "
    "count down from 0 at the top, columns right from 0 at the left.\n"
    "Map legend: A = you, S = start, . = safe ground, C = cliff, G = goal."
)


FROZEN_LAKE = CuratedDescriber(_frozen_lake_task, list(_GRID_MOVES.items()), _frozen_lake)

TAXI = CuratedDescriber(
    TAXI_TASK,
    [
        ("SOUTH", "move one row down"),
        ("NORTH", "move one row up"),
        ("EAST", "move one column right"),
        ("WEST", "move one column left"),
        ("PICKUP", "pick up the passenger"),
        ("DROPOFF", "drop off the passenger"),
    ],
    _taxi,
)

CLIFF_WALKING = CuratedDescriber(
    CLIFF_TASK, [(name, _GRID_MOVES[name]) for name in ("UP", "RIGHT", "DOWN", "LEFT")], _cliff
)


# The second wording of each env (``wording="alt"``, ``llmgym.envs.variants``): the same facts
# and action names, phrased and laid out differently.


def _blackjack_alt(obs: Any, env: gym.Env) -> str:
    player, dealer, usable_ace = (int(v) for v in obs)
    ace = "an ace you can count as 11" if usable_ace else "no ace you can count as 11"
    return f"You hold {player} ({ace}). Dealer's face-up card: {'A' if dealer == 1 else dealer}."


BLACKJACK_ALT = CuratedDescriber(
    task=(
        "One round of twenty-one against a dealer. Number cards are worth their number, J, Q "
        "and K are worth 10, and an ace (A) 1 or 11. The hand nearer to 21 wins, but going over "
        "21 loses at once. A win pays +1, a loss -1 and a tie 0. The dealer keeps taking cards "
        "until reaching 17 or more."
    ),
    actions=[("stick", "keep your hand; the dealer then plays"), ("hit", "take one more card")],
    render=_blackjack_alt,
)

GRID_LEGEND_ALT = "Symbols: A = your square, S = start, F = solid ice, H = hole, G = goal."


def _frozen_lake_alt(obs: Any, env: gym.Env) -> str:
    desc = _grid(env)
    row, col = divmod(int(obs), desc.shape[1])
    cells = desc.copy()
    cells[row, col] = "A"
    rows = "\n".join("".join(line) for line in cells)
    return f"Map, top row first:\n{rows}\nYou stand on row {row}, column {col}."


def _frozen_lake_alt_task(env: gym.Env) -> str:
    rows, cols = _grid(env).shape
    slip = (
        "The ice is slick: a step goes the chosen way only 1/3 of the time and otherwise "
        "sideways to it, either side equally."
        if _is_slippery(env)
        else "The ice is firm: every step goes exactly the chosen way."
    )
    return (
        f"Walk across a {rows}x{cols} frozen pond from the start S in the top-left corner to "
        f"the goal G in the bottom-right corner. Stepping onto a hole H ends the episode with "
        f"0; reaching G gives +1. Row 0 is the top row and column 0 the left column. {slip}\n"
        f"{GRID_LEGEND_ALT}"
    )


_GRID_MOVES_ALT = {
    "LEFT": "step one square to the left (west)",
    "DOWN": "step one square down (south)",
    "RIGHT": "step one square to the right (east)",
    "UP": "step one square up (north)",
}


def _taxi_alt(obs: Any, env: gym.Env) -> str:
    taxi_row, taxi_col, passenger, destination = env.unwrapped.decode(int(obs))
    lines = _taxi_map(env)
    x = 1 + 2 * taxi_col
    lines[1 + taxi_row] = lines[1 + taxi_row][:x] + "T" + lines[1 + taxi_row][x + 1 :]
    where = "riding in the cab" if passenger == 4 else f"at {_TAXI_LOCATIONS[passenger]}"
    return "\n".join(
        [
            *lines,
            f"The cab (T) is on row {taxi_row}, column {taxi_col}; the passenger is {where} and "
            f"wants to go to {_TAXI_LOCATIONS[destination]}.",
        ]
    )


TAXI_ALT = CuratedDescriber(
    "You run a cab on a 5x5 street grid; walls (|) block moves east or west. The four stands "
    "are R, G, Y and B. Go to the passenger, let them in, take them to where they want to go "
    "and let them out. Every step scores -1, a correct drop-off +20, and a pickup or drop-off "
    "in the wrong place -10 (200 steps at most). Row 0 is the top (north) row and column 0 "
    "the left (west) column.",
    [
        ("SOUTH", "drive one row down"),
        ("NORTH", "drive one row up"),
        ("EAST", "drive one column right"),
        ("WEST", "drive one column left"),
        ("PICKUP", "let the passenger in"),
        ("DROPOFF", "let the passenger out"),
    ],
    _taxi_alt,
)


def _cliff_alt(obs: Any, env: gym.Env) -> str:
    rows, cols = env.unwrapped.shape
    row, col = divmod(int(obs), cols)
    cells = np.full((rows, cols), ".", dtype="<U1")
    cells[rows - 1, 1 : cols - 1] = "C"
    cells[rows - 1, 0], cells[rows - 1, cols - 1] = "S", "G"
    cells[row, col] = "A"
    grid = "\n".join("".join(line) for line in cells)
    return f"Map, top row first:\n{grid}\nYou stand on row {row}, column {col}."


CLIFF_WALKING_ALT = CuratedDescriber(
    "Walk on a 4x12 grid from the start S in the bottom-left corner to the goal G in the "
    "bottom-right corner. The squares between them on the bottom row are a cliff C: stepping "
    "onto one scores -100 and puts you back on S. Every step scores -1, so take the shortest "
    "path that avoids the cliff. Row 0 is the top row and column 0 the left column.\n"
    "Symbols: A = your square, S = start, . = safe ground, C = cliff, G = goal.",
    [(name, _GRID_MOVES_ALT[name]) for name in ("UP", "RIGHT", "DOWN", "LEFT")],
    _cliff_alt,
)

FROZEN_LAKE_ALT = CuratedDescriber(
    _frozen_lake_alt_task, list(_GRID_MOVES_ALT.items()), _frozen_lake_alt
)
