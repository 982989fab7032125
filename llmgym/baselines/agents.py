"""Reference agents (random, optimal or heuristic, Stable-Baselines3) and ``make_baseline``.

Every agent acts on the *base* observation (``act``) and also as a text agent: ``act_text``
reads ``info["raw_obs"]`` from a ``Text-*`` env and writes a valid action string, so the
experts can generate SFT demonstrations through the describer. ``act_batch`` is the
``TextAgent`` interface the benchmark runner and ``llmgym eval`` use for every agent.

Example:
    >>> import gymnasium as gym, llmgym
    >>> env = gym.make("Text-FrozenLake-v1")
    >>> expert = make_baseline("optimal", "Text-FrozenLake-v1")
    >>> obs, info = env.reset(seed=0)
    >>> expert.act_text(obs, info)
    '{"action": "LEFT"}'
    >>> *_, info = env.step(expert.act_text(obs, info))
    >>> info["parse"]["ok"]
    True
"""

from __future__ import annotations

import copy
import json
import math
from collections.abc import Callable, Sequence
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces
from gymnasium.envs.toy_text.frozen_lake import FrozenLakeEnv

from llmgym.baselines.base import BaselineAgent, format_action
from llmgym.baselines.planning import blackjack_solution, solve_tabular
from llmgym.envs.maps import FrozenLakeMapsEnv
from llmgym.envs.registration import DEFAULT_MAX_STEPS, base_env_id, make_eval_env
from llmgym.errors import AgentError, UnsupportedEnvError

#: Names ``make_baseline`` accepts.
BASELINE_NAMES = ("random", "optimal", "sb3-ppo", "sb3-dqn", "sb3-a2c")


#: Mixed into the random agent's seeds, so its streams are not the env's (see ``_stream``).
RANDOM_AGENT_SALT = 0x5EED_A6E7


class RandomAgent(BaselineAgent):
    """Uniformly random actions from the action space, seeded; in text envs whose valid
    actions vary (TextWorld's admissible commands), a uniformly random valid action.

    ``seed_episodes(seeds)`` gives each row of the next ``act_batch`` calls the stream of its
    episode, seeded by the episode's seed, so an episode plays the same actions whichever
    episodes share its batch (the bench calls it before every batched step); without it all
    rows draw from one stream seeded by ``seed``.

    Example:
        >>> agent = RandomAgent(gym.make("CartPole-v1"), seed=0)
        >>> [agent.act(None) for _ in range(5)]
        [0, 1, 0, 1, 0]
        >>> def play(seeds):  # six batched steps of episodes ``seeds``
        ...     agent = RandomAgent(gym.make("CartPole-v1"), seed=0)
        ...     agent.seed_episodes(seeds)
        ...     infos = [{"raw_obs": None}] * len(seeds)
        ...     return [agent.act_batch([""] * len(seeds), infos) for _ in range(6)]
        >>> [step[1] for step in play([7, 8])] == [step[0] for step in play([8])]
        True
    """

    name = "random"

    def __init__(self, env: gym.Env, seed: int = 0) -> None:
        super().__init__(env)
        self.action_space, self.rng = self._stream(seed)
        self._streams: dict[int, tuple[spaces.Space, np.random.Generator]] = {}
        self._rows: list[int] | None = None

    def _stream(self, seed: int) -> tuple[spaces.Space, np.random.Generator]:
        """A seeded copy of the action space and a generator for valid-action picks, both
        derived from ``seed`` and a salt: seeded with ``seed`` itself, the space would draw the
        very numbers the env seeded with the same episode seed draws (gymnasium seeds both the
        same way), and the actions would follow the cards (random Blackjack at -0.33, not -0.40).
        """
        sequence = np.random.SeedSequence([RANDOM_AGENT_SALT, seed])
        space = copy.deepcopy(self.action_space)
        space.seed(int(sequence.generate_state(1)[0]))
        return space, np.random.default_rng(sequence)

    def seed_episodes(self, seeds: Sequence[int]) -> None:
        """Row ``i`` of the following ``act_batch`` calls belongs to episode ``seeds[i]``."""
        self._streams = {s: self._streams.get(s) or self._stream(s) for s in seeds}
        self._rows = list(seeds)

    def _sample(self, space: spaces.Space) -> Any:
        action = space.sample()
        return int(action) if isinstance(space, spaces.Discrete) else action

    def act(self, raw_obs: Any) -> Any:
        return self._sample(self.action_space)

    def act_batch(self, observations: Sequence[str], infos: Sequence[dict[str, Any]]) -> list[str]:
        if self._rows is None:
            streams = [(self.action_space, self.rng)] * len(infos)
        elif len(self._rows) == len(infos):
            streams = [self._streams[s] for s in self._rows]
        else:
            raise ValueError(
                f"seed_episodes named {len(self._rows)} episodes but act_batch got {len(infos)}."
            )
        if self.names or not all(info.get("valid_actions") for info in infos):
            return [
                format_action(self._sample(space), self.names_for(info), self.start)
                for (space, _), info in zip(streams, infos)
            ]
        return [
            json.dumps({"action": info["valid_actions"][rng.integers(len(info["valid_actions"]))]})
            for (_, rng), info in zip(streams, infos)
        ]


class PolicyAgent(BaselineAgent):
    """An agent from a function of the base observation (a table lookup or a controller)."""

    def __init__(self, env: gym.Env, policy: Callable[[Any], Any], name: str = "optimal") -> None:
        super().__init__(env)
        self.policy, self.name = policy, name

    def act(self, raw_obs: Any) -> Any:
        return self.policy(raw_obs)


class MapPlanner(BaselineAgent):
    """The optimal agent of a FrozenLake map set (``llmgym.envs.maps``), whose map changes at
    each reset: it plans by value iteration (``solve_tabular``, under the env's step cap) on
    the map each observation is on, read from ``info["map"]`` (which the map-set env and the
    exact evaluator write), and caches one plan per map. ``act(raw_obs)`` alone plans on the
    current map of the env it was made with: ``OPTIMAL["FrozenLakeMapsEnv"](env)`` is that
    function, the expert of the env it is given (SFT demos, reference returns).

    Example:
        >>> import llmgym
        >>> env = gym.make("Text-FrozenLakeMaps4x4-Heldout-v0")
        >>> agent = make_baseline("optimal", "Text-FrozenLakeMaps4x4-Heldout-v0")
        >>> obs, info = env.reset(seed=5)
        >>> done = False
        >>> while not done:
        ...     obs, reward, terminated, truncated, info = env.step(agent.act_text(obs, info))
        ...     done = terminated or truncated
        >>> reward, info["map_index"]
        (1.0, 5)
    """

    name = "optimal"

    def __init__(self, env: gym.Env) -> None:
        super().__init__(env)
        self.lake = env.unwrapped
        self.is_slippery = bool(self.lake.is_slippery)
        self.horizon = env.spec.max_episode_steps if env.spec is not None else None
        self._plans: dict[tuple[str, ...], np.ndarray] = {}

    def plan(self, rows: Sequence[str]) -> np.ndarray:
        """The base action in each state of the map ``rows`` (rows of S, F, H, G)."""
        key = tuple(str(row) for row in rows)
        if key not in self._plans:
            lake = FrozenLakeEnv(desc=list(key), is_slippery=self.is_slippery)
            self._plans[key] = solve_tabular(lake.P, lake.initial_state_distrib, self.horizon)[0]
        return self._plans[key]

    def act(self, raw_obs: Any) -> int:
        return int(self.plan(self.lake.maps[self.lake.map_index])[int(raw_obs)])

    def act_batch(self, observations: Sequence[str], infos: Sequence[dict[str, Any]]) -> list[str]:
        if not all("map" in info for info in infos):
            raise AgentError(
                "The optimal agent of a map set plans on info['map'], which this env's info "
                "lacks; play it on a FrozenLakeMaps env."
            )
        actions = [int(self.plan(info["map"])[int(info["raw_obs"])]) for info in infos]
        return [
            format_action(a, self.names_for(info), self.start) for a, info in zip(actions, infos)
        ]


def _blackjack(env: gym.Env) -> Callable[[Any], int]:
    base = env.unwrapped
    table = blackjack_solution(sab=base.sab, natural=base.natural).policy
    return lambda obs: table.get((int(obs[0]), int(obs[1]), int(obs[2])), 0)


def _tabular(env: gym.Env) -> Callable[[Any], int]:
    base = env.unwrapped
    horizon = env.spec.max_episode_steps if env.spec is not None else None
    policy, _ = solve_tabular(base.P, base.initial_state_distrib, horizon)
    return lambda obs: int(policy[int(obs)])


def cartpole_controller(obs: Any) -> int:
    """Push toward where the pole is falling (a linear controller; 500 on every seed tried).

    Example:
        >>> cartpole_controller([0.0, 0.0, 0.05, 0.0])
        1
    """
    x, x_dot, theta, theta_dot = (float(v) for v in obs)
    return int(theta + 0.5 * theta_dot + 0.05 * x + 0.1 * x_dot > 0)


def mountain_car_controller(obs: Any) -> int:
    """Push along the velocity to pump energy; from rest, start toward the nearer slope."""
    position, velocity = (float(v) for v in obs)
    return 2 if velocity > 0 or (velocity == 0 and position < -0.45) else 0


def mountain_car_continuous_controller(obs: Any) -> np.ndarray:
    """Full throttle along the velocity."""
    return np.array([1.0 if float(obs[1]) >= 0 else -1.0], dtype=np.float32)


def acrobot_controller(obs: Any) -> int:
    """Torque along the lower link's swing relative to the upper one (energy pumping)."""
    omega1, omega2 = float(obs[4]), float(obs[5])
    return 2 if omega2 - 0.5 * omega1 > 0 else 0


def pendulum_controller(obs: Any) -> np.ndarray:
    """Energy-based swing-up, then a PD controller near the top.

    Example:
        >>> pendulum_controller([1.0, 0.1, 0.0]).round(3)
        array([-0.997], dtype=float32)
    """
    cos, sin, omega = (float(v) for v in obs)
    if cos > 0.85:
        torque = -(10.0 * math.atan2(sin, cos) + 2.0 * omega)
    else:
        # Energy of a uniform rod (m = l = 1, g = 10): w^2 / 6 + 5 cos; upright at rest is 5.
        energy = omega**2 / 6 + 5.0 * cos
        torque = 2.0 * np.sign(omega * (5.0 - energy)) if omega != 0 else 2.0
    return np.array([np.clip(torque, -2.0, 2.0)], dtype=np.float32)


#: The optimal or heuristic agents by name; each builds the policy function (base observation
#: -> base action) from the env.
EXPERTS: dict[str, Callable[[gym.Env], Callable[[Any], Any]]] = {
    "blackjack": _blackjack,  # exact dynamic programming
    "tabular": _tabular,  # value iteration on env.unwrapped.P
    "cartpole": lambda env: cartpole_controller,  # heuristics
    "mountain_car": lambda env: mountain_car_controller,
    "mountain_car_continuous": lambda env: mountain_car_continuous_controller,
    "acrobot": lambda env: acrobot_controller,
    "pendulum": lambda env: pendulum_controller,
    # value iteration on the map the env plays now (read at each call): the expert function
    # of the very env it is given, which is how SFT demos and reference returns call it
    "map_planner": lambda env: MapPlanner(env).act,
}
#: The expert of each base env, keyed by the unwrapped class name (a catalog entry's
#: ``env_class``, so it serves every env of that class): where to give a new env its expert.
OPTIMAL: dict[str, Callable[[gym.Env], Callable[[Any], Any]]] = {
    "CartPoleEnv": EXPERTS["cartpole"],
    "AcrobotEnv": EXPERTS["acrobot"],
    "MountainCarEnv": EXPERTS["mountain_car"],
    "Continuous_MountainCarEnv": EXPERTS["mountain_car_continuous"],
    "PendulumEnv": EXPERTS["pendulum"],
    "BlackjackEnv": EXPERTS["blackjack"],
    "FrozenLakeEnv": EXPERTS["tabular"],  # FrozenLake and FrozenLake8x8
    "TaxiEnv": EXPERTS["tabular"],
    "CliffWalkingEnv": EXPERTS["tabular"],
    "FrozenLakeMapsEnv": EXPERTS["map_planner"],  # the map sets; make_baseline: MapPlanner
}


def make_baseline(name: str, env_id: str, seed: int = 0, **env_kwargs: Any) -> BaselineAgent:
    """A reference agent by name for ``env_id`` (a ``Text-*`` id or its base id; a
    language-native id is its own base). The LLM agents and the registry of all agent names
    live in ``llmgym.agents.registry.make_agent``.

    Names: ``random`` (seeded), ``optimal`` (exact or heuristic, see ``OPTIMAL``; on a
    FrozenLake map set, ``MapPlanner``, which plans on each episode's map),
    ``sb3-ppo``/``sb3-dqn``/``sb3-a2c`` (trained on the base env and cached, see
    ``llmgym.baselines.sb3``). ``seed`` seeds the random agent; SB3 agents are the models trained
    with seed 0. ``env_kwargs`` go to ``gym.make`` of the base env.

    Example:
        >>> make_baseline("random", "Text-CartPole-v1", seed=1).name
        'random'
        >>> make_baseline("oracle", "CartPole-v1")  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        llmgym.errors.AgentError: Unknown baseline 'oracle': use one of random, ...
    """
    if name not in BASELINE_NAMES:
        raise AgentError(f"Unknown baseline {name!r}: use one of {', '.join(BASELINE_NAMES)}.")
    base_id = base_env_id(env_id)
    if base_id not in gym.registry and env_id in gym.registry:
        base_id = env_id  # language-native: the text env is the base env
    if base_id not in gym.registry:
        raise AgentError(f"Unknown environment {env_id!r}: run `llmgym envs` to list them.")
    if name.startswith("sb3-"):
        from llmgym.baselines.sb3 import load_agent

        return load_agent(base_id, name.removeprefix("sb3-"), env_kwargs=env_kwargs)
    env = gym.make(base_id, **env_kwargs)
    if name == "random":
        return RandomAgent(env, seed)
    if isinstance(env.unwrapped, FrozenLakeMapsEnv):
        return MapPlanner(env)
    build = OPTIMAL.get(type(env.unwrapped).__name__)
    if build is None:
        raise UnsupportedEnvError(
            f"No optimal or heuristic agent for {env_id}; try sb3-ppo instead."
        )
    return PolicyAgent(env, build(env), "optimal")


__all__ = [
    "BASELINE_NAMES",
    "DEFAULT_MAX_STEPS",
    "EXPERTS",
    "OPTIMAL",
    "BaselineAgent",
    "MapPlanner",
    "PolicyAgent",
    "RandomAgent",
    "base_env_id",
    "format_action",
    "make_baseline",
    "make_eval_env",
]
