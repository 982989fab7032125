"""The agent that plays a trained SB3 policy: deterministic actions on base observations
(batched), through the training ``VecNormalize``'s frozen observation transform when the
recipe normalized. Re-exported by ``llmgym.baselines.sb3``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from llmgym.baselines.base import BaselineAgent


@dataclass
class ObservationNormalizer:
    """VecNormalize's observation transform with frozen statistics, as at evaluation:
    ``clip((obs - mean) / sqrt(var + epsilon), -clip_obs, clip_obs)``.

    Example:
        >>> norm = ObservationNormalizer(np.array([1.0]), np.array([4.0]), clip_obs=5.0)
        >>> norm(np.array([[3.0], [1.0], [99.0]])).ravel().tolist()
        [1.0, 0.0, 5.0]
    """

    mean: np.ndarray
    var: np.ndarray
    clip_obs: float = 10.0
    epsilon: float = 1e-8

    def __call__(self, obs: np.ndarray) -> np.ndarray:
        scaled = (obs - self.mean) / np.sqrt(self.var + self.epsilon)
        return np.clip(scaled, -self.clip_obs, self.clip_obs).astype(np.float32)


class SB3Agent(BaselineAgent):
    """A trained SB3 model acting deterministically on base observations (batched), through
    ``normalize`` (the training VecNormalize's observation transform) when given."""

    def __init__(
        self,
        env: gym.Env,
        model: Any,
        name: str,
        normalize: Callable[[np.ndarray], np.ndarray] | None = None,
    ) -> None:
        super().__init__(env)
        self.model, self.name, self.normalize = model, name, normalize
        self._flatten = isinstance(self.observation_space, (spaces.Tuple, spaces.Dict))

    def act(self, raw_obs: Any) -> Any:
        return self.act_many([raw_obs])[0]

    def act_many(self, raw_observations: Sequence[Any]) -> list[Any]:
        if self._flatten:
            batch = np.stack([spaces.flatten(self.observation_space, o) for o in raw_observations])
        else:
            batch = np.asarray(raw_observations)
        if self.normalize is not None:
            batch = self.normalize(batch)
        actions, _ = self.model.predict(batch, deterministic=True)
        if isinstance(self.action_space, spaces.Discrete):
            return [int(a) for a in actions]
        return list(actions)
