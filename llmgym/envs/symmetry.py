"""Mirror symmetries of base envs: a map of the observation and a permutation of the discrete
actions under which the env's dynamics and rewards are unchanged (CartPole seen from the other
side of the track). ``PPOConfig.mirror`` trains on each state's mirror image as well.

Example:
    >>> import numpy as np
    >>> CARTPOLE_MIRROR.observation(np.array([0.5, -0.25, 0.0625, 2.0])).tolist()
    [-0.5, 0.25, -0.0625, -2.0]
    >>> CARTPOLE_MIRROR.actions[0]  # LEFT -> RIGHT
    1
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np


@dataclass(frozen=True)
class Mirror:
    """A symmetry: ``observation`` maps a base observation to its mirror image and
    ``actions[k]`` is the index of the action that mirrors action ``k``."""

    observation: Callable[[Any], Any]
    actions: tuple[int, ...]


#: Negating position, velocity, angle and angular velocity swaps LEFT and RIGHT.
CARTPOLE_MIRROR = Mirror(observation=np.negative, actions=(1, 0))
