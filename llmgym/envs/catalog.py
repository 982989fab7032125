"""The catalog: one entry per ``Text-*`` env, holding everything llmgym knows about it (what
it wraps and how it is described, its expert, bench episodes and suites, published reference
returns, SB3 recipes). Registration, the reference agents, SB3 and the bench read their
tables from here, so adding an env is one entry.

Example:
    >>> blackjack = entry("Text-Blackjack-v1")
    >>> blackjack.base, blackjack.expert, blackjack.episodes, blackjack.suites
    ('Blackjack-v1', 'blackjack', 2000, ('classic',))
    >>> blackjack.sb3["ppo"].n_timesteps, entry("Text-GSM-v0").requires
    (50000, 'reasoning_gym')
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym

from llmgym.envs import classic, toy_text
from llmgym.envs.describers import Describer
from llmgym.envs.symmetry import CARTPOLE_MIRROR, Mirror

#: Bench episodes of an env whose entry sets none.
DEFAULT_EPISODES = 50


@dataclass(frozen=True)
class SB3Config:
    """How one (env, algo) Stable-Baselines3 baseline is trained."""

    n_timesteps: int
    """Environment steps of training."""
    source: str
    """Where the hyperparameters come from (rl-baselines3-zoo, and how we departed)."""
    n_envs: int = 1
    """Parallel envs (DummyVecEnv)."""
    hyperparams: dict[str, Any] = field(default_factory=dict)
    """Keyword arguments of the SB3 algorithm; ``"lin_X"`` is a linear schedule from X to 0."""
    normalize: bool = False
    """Train under ``VecNormalize`` (observations and rewards; the zoo's ``normalize: true``);
    the observation statistics are saved with the policy and applied when it acts."""
    norm_reward: bool = True
    """Whether ``normalize`` also scales rewards (the zoo turns it off for some recipes)."""


@dataclass(frozen=True)
class EnvEntry:
    """Everything llmgym knows about one text env."""

    id: str
    """The text env id: ``Text-<base>`` for a wrapped env."""
    base: str | None = None
    """The Gymnasium id it wraps; None for a language-native env (its own base)."""
    env_class: str | None = None
    """Class name of the unwrapped base env: ``describer`` and ``expert`` serve every env of
    that class, also one that ``llmgym.wrap`` gets without an id."""
    describer: Describer | None = None
    """The curated describer (None: derived from the spaces, or language-native)."""
    expert: str | None = None
    """The optimal or heuristic agent: a key of ``llmgym.baselines.agents.EXPERTS``."""
    episodes: int = DEFAULT_EPISODES
    """Bench episodes when ``--episodes`` is not given."""
    suites: tuple[str, ...] = ()
    """The bench suites it belongs to."""
    reference: tuple[float, float] | None = None
    """Published (random, best known) returns: the leaderboard's anchors when a run lacks
    random or reference rows (see the project's REFERENCE.md)."""
    sb3: Mapping[str, SB3Config] = field(default_factory=dict)
    """SB3 training recipe per algorithm (``ppo``, ``dqn``, ``a2c``); unlisted algorithms use
    SB3's defaults for 50k steps."""
    requires: str | None = None
    """A module that must be installed for the id to be registered (found, not imported)."""
    entry_point: str | None = None
    """A language-native env's entry point (a wrapped env's is ``make_text_env``)."""
    kwargs: Mapping[str, Any] = field(default_factory=dict)
    """A language-native env's ``gym.make`` keyword arguments."""
    max_episode_steps: int | None = None
    """A language-native env's step cap (a wrapped env keeps its base env's)."""
    mirror: Mirror | None = None
    """A mirror symmetry of the base env (``PPOConfig.mirror`` trains on mirrored states)."""


def _newest(name: str) -> str:
    """The newest registered id of a base env name: ``_newest("Taxi")`` is ``Taxi-v3`` or
    ``Taxi-v4`` depending on the Gymnasium release."""
    versions = [k for k in gym.registry if k.rsplit("-v", 1)[0] == name]
    return max(versions, key=lambda k: int(k.rsplit("-v", 1)[1]))


def _wrapped(name: str, env_class: str, describer: Describer, **fields: Any) -> EnvEntry:
    """The entry of a Gymnasium env, under the newest version of ``name`` that is registered."""
    base = _newest(name)
    return EnvEntry(f"Text-{base}", base, env_class, describer, **fields)


def _language(env_id: str, requires: str, entry_point: str, **fields: Any) -> EnvEntry:
    """The entry of a language-native env (``llmgym.envs.language``), in the language suite."""
    return EnvEntry(
        env_id,
        requires=requires,
        entry_point=f"llmgym.envs.language.{entry_point}",
        suites=("language",),
        **fields,
    )


# SB3 recipes. The zoo's budgets are cut where they would take more than a few minutes on a
# 2-core CPU; the ``source`` says so. Ours, for the tabular toy-text envs (the zoo has none):
# one-hot states, a few envs in parallel, a little entropy to keep exploring sparse rewards.
_ZOO = "rl-baselines3-zoo"
_NO_NORM = "without VecNormalize"
_PPO_TOY = dict(n_steps=256, batch_size=256, n_epochs=10, gamma=0.99, ent_coef=0.01)
_DQN_TOY = dict(
    learning_rate=1e-3,
    buffer_size=50_000,
    learning_starts=1_000,
    batch_size=64,
    gamma=0.99,
    target_update_interval=500,
    train_freq=4,
    gradient_steps=1,
    exploration_fraction=0.3,
    exploration_final_eps=0.05,
    policy_kwargs=dict(net_arch=[64, 64]),
)
# A2C's rate falls linearly to 0: at a constant 7e-4 its FrozenLake policy swung between 0.04
# and 0.60 (exact value every 10k steps) and ended at 0.37; annealed it settles at 0.69.
_A2C_TOY = dict(n_steps=16, gamma=0.99, ent_coef=0.01, learning_rate="lin_7e-4")
_DQN_ZOO_ACROBOT = dict(
    learning_rate=6.3e-4,
    batch_size=128,
    buffer_size=50_000,
    learning_starts=0,
    gamma=0.99,
    target_update_interval=250,
    train_freq=4,
    gradient_steps=-1,
    exploration_fraction=0.12,
    exploration_final_eps=0.1,
    policy_kwargs=dict(net_arch=[256, 256]),
)


def _toy(steps: int, **overrides: Any) -> dict[str, SB3Config]:
    """Our PPO, DQN and A2C recipes of a toy-text env (``overrides`` change all three)."""
    return {
        "ppo": SB3Config(steps, "llmgym", n_envs=8, hyperparams={**_PPO_TOY, **overrides}),
        "dqn": SB3Config(steps, "llmgym", hyperparams={**_DQN_TOY, **overrides}),
        "a2c": SB3Config(steps, "llmgym", n_envs=8, hyperparams={**_A2C_TOY, **overrides}),
    }


#: ``Text-Arithmetic-v0``'s reasoning-gym config (its default goes up to 6 terms of 4 digits).
ARITHMETIC_CONFIG = {"min_terms": 2, "max_terms": 3, "min_digits": 1, "max_digits": 2}

#: Every env, in registration, suite and leaderboard order.
CATALOG: tuple[EnvEntry, ...] = (
    _wrapped(
        "CartPole",
        "CartPoleEnv",
        classic.CARTPOLE,
        expert="cartpole",
        mirror=CARTPOLE_MIRROR,
        episodes=30,
        suites=("classic",),
        reference=(22.0, 500.0),
        sb3={
            "ppo": SB3Config(
                50_000,
                f"{_ZOO} (1e5 steps there)",
                n_envs=8,
                hyperparams=dict(
                    n_steps=32,
                    batch_size=256,
                    gae_lambda=0.8,
                    gamma=0.98,
                    n_epochs=20,
                    ent_coef=0.0,
                    learning_rate="lin_0.001",
                    clip_range="lin_0.2",
                ),
            ),
            "dqn": SB3Config(
                50_000,
                _ZOO,
                hyperparams=dict(
                    learning_rate=2.3e-3,
                    batch_size=64,
                    buffer_size=100_000,
                    learning_starts=1000,
                    gamma=0.99,
                    target_update_interval=10,
                    train_freq=256,
                    gradient_steps=128,
                    exploration_fraction=0.16,
                    exploration_final_eps=0.04,
                    policy_kwargs=dict(net_arch=[256, 256]),
                ),
            ),
            "a2c": SB3Config(
                100_000, f"{_ZOO} (5e5 steps there)", n_envs=8, hyperparams=dict(ent_coef=0.0)
            ),
        },
    ),
    _wrapped(
        "Acrobot",
        "AcrobotEnv",
        classic.ACROBOT,
        expert="acrobot",
        episodes=30,
        suites=("classic",),
        reference=(-500.0, -73.5),
        sb3={
            "ppo": SB3Config(
                100_000,
                f"{_ZOO} {_NO_NORM} (1e6 steps there)",
                n_envs=16,
                hyperparams=dict(
                    n_steps=256, gae_lambda=0.94, gamma=0.99, n_epochs=4, ent_coef=0.0
                ),
            ),
            "dqn": SB3Config(100_000, _ZOO, hyperparams=_DQN_ZOO_ACROBOT),
            "a2c": SB3Config(
                500_000,
                f"{_ZOO} {_NO_NORM}",
                n_envs=16,
                hyperparams=dict(ent_coef=0.0),
            ),
        },
    ),
    _wrapped(
        "MountainCar",
        "MountainCarEnv",
        classic.MOUNTAIN_CAR,
        expert="mountain_car",
        episodes=50,
        suites=("classic",),
        reference=(-200.0, -100.8),
        sb3={
            "ppo": SB3Config(
                1_000_000,
                _ZOO,
                n_envs=16,
                hyperparams=dict(n_steps=16, gae_lambda=0.98, gamma=0.99, n_epochs=4, ent_coef=0.0),
                normalize=True,
            ),
            "dqn": SB3Config(
                120_000,
                _ZOO,
                hyperparams=dict(
                    learning_rate=4e-3,
                    batch_size=128,
                    buffer_size=10_000,
                    learning_starts=1000,
                    gamma=0.98,
                    target_update_interval=600,
                    train_freq=16,
                    gradient_steps=8,
                    exploration_fraction=0.2,
                    exploration_final_eps=0.07,
                    policy_kwargs=dict(net_arch=[256, 256]),
                ),
            ),
            "a2c": SB3Config(
                1_000_000,
                _ZOO,
                n_envs=16,
                hyperparams=dict(ent_coef=0.0),
                normalize=True,
                norm_reward=False,
            ),
        },
    ),
    _wrapped(
        "MountainCarContinuous",
        "Continuous_MountainCarEnv",
        classic.MOUNTAIN_CAR_CONTINUOUS,
        expert="mountain_car_continuous",
        episodes=20,
        suites=("classic",),
        sb3={
            "ppo": SB3Config(
                20_000,
                _ZOO,
                normalize=True,
                hyperparams=dict(
                    batch_size=256,
                    n_steps=8,
                    gamma=0.9999,
                    learning_rate=7.77e-05,
                    ent_coef=0.00429,
                    clip_range=0.1,
                    n_epochs=10,
                    gae_lambda=0.9,
                    max_grad_norm=5,
                    vf_coef=0.19,
                    use_sde=True,
                    policy_kwargs=dict(log_std_init=-3.29, ortho_init=False),
                ),
            ),
            "a2c": SB3Config(
                100_000,
                _ZOO,
                n_envs=4,
                normalize=True,
                hyperparams=dict(
                    n_steps=100,
                    ent_coef=0.0,
                    use_sde=True,
                    sde_sample_freq=16,
                    policy_kwargs=dict(log_std_init=0.0, ortho_init=False),
                ),
            ),
        },
    ),
    _wrapped(
        "Pendulum",
        "PendulumEnv",
        classic.PENDULUM,
        expert="pendulum",
        episodes=50,
        suites=("classic",),
        sb3={
            "ppo": SB3Config(
                100_000,
                _ZOO,
                n_envs=4,
                hyperparams=dict(
                    n_steps=1024,
                    gae_lambda=0.95,
                    gamma=0.9,
                    n_epochs=10,
                    ent_coef=0.0,
                    learning_rate=1e-3,
                    clip_range=0.2,
                    use_sde=True,
                    sde_sample_freq=4,
                ),
            ),
            "a2c": SB3Config(
                1_000_000,
                _ZOO,
                n_envs=8,
                normalize=True,
                hyperparams=dict(
                    ent_coef=0.0,
                    max_grad_norm=0.5,
                    n_steps=8,
                    gae_lambda=0.9,
                    vf_coef=0.4,
                    gamma=0.9,
                    use_rms_prop=True,
                    normalize_advantage=False,
                    learning_rate="lin_7e-4",
                    use_sde=True,
                    policy_kwargs=dict(log_std_init=-2, ortho_init=False),
                ),
            ),
        },
    ),
    # Blackjack's return has a standard deviation of ~0.95: 2,000 episodes give +-0.04.
    _wrapped(
        "Blackjack",
        "BlackjackEnv",
        toy_text.BLACKJACK,
        expert="blackjack",
        episodes=2000,
        suites=("classic",),
        reference=(-0.394, -0.0431),
        sb3=_toy(50_000, gamma=1.0),
    ),
    _wrapped(
        "FrozenLake",
        "FrozenLakeEnv",
        toy_text.FROZEN_LAKE,
        expert="tabular",
        episodes=1000,
        suites=("classic",),
        reference=(0.0139, 0.744),
        # PPO's greedy policy is worth 0.601 exactly at 50k steps, 0.730 at 100k (optimal 0.740).
        sb3=_toy(50_000)
        | {
            "ppo": SB3Config(100_000, "llmgym", n_envs=8, hyperparams=_PPO_TOY),
            "a2c": SB3Config(100_000, "llmgym", n_envs=8, hyperparams=_A2C_TOY),
        },
    ),
    _wrapped(
        "FrozenLake8x8",
        "FrozenLakeEnv",
        toy_text.FROZEN_LAKE,
        expert="tabular",
        episodes=500,
        suites=("classic",),
        # PPO's greedy policy is worth 0.841 exactly at 100k steps, 0.860 at 200k (optimal 0.894);
        # A2C's 0.81 at 1M (the committed policy).
        sb3=_toy(100_000)
        | {
            "ppo": SB3Config(200_000, "llmgym", n_envs=8, hyperparams=_PPO_TOY),
            "a2c": SB3Config(1_000_000, "llmgym", n_envs=8, hyperparams=_A2C_TOY),
        },
    ),
    _wrapped(
        "Taxi",
        "TaxiEnv",
        toy_text.TAXI,
        expert="tabular",
        episodes=200,
        suites=("classic",),
        # DQN's greedy policy loops to the step cap (-200) up to 50k steps and is optimal (7.93
        # exactly) from 150k on when exploring over 500k (sb3_curves/Taxi-v4-dqn-500000.json).
        sb3=_toy(100_000) | {"dqn": SB3Config(500_000, "llmgym", hyperparams=_DQN_TOY)},
    ),
    _wrapped(
        "CliffWalking",
        "CliffWalkingEnv",
        toy_text.CLIFF_WALKING,
        expert="tabular",
        episodes=50,
        suites=("classic",),
        sb3=_toy(50_000),
    ),
    _wrapped("LunarLander", "LunarLander", classic.LUNAR_LANDER, requires="Box2D"),
    _language(
        "Text-TextWorld-Simple-v0",
        "textworld",
        "textworld_env:TextWorldEnv",
        kwargs={"family": "simple"},
        max_episode_steps=50,
    ),
    _language(
        "Text-TextWorld-Cooking-v0",
        "textworld",
        "textworld_env:TextWorldEnv",
        kwargs={"family": "cooking"},
        max_episode_steps=100,
    ),
    _language(
        "Text-Arithmetic-v0",
        "reasoning_gym",
        "math_env:ReasoningEnv",
        kwargs={"dataset": "basic_arithmetic", "config": ARITHMETIC_CONFIG},
    ),
    _language(
        "Text-GSM-v0", "reasoning_gym", "math_env:ReasoningEnv", kwargs={"dataset": "gsm_symbolic"}
    ),
    _language(
        "Text-GSM-Stepwise-v0",
        "reasoning_gym",
        "math_env:ReasoningEnv",
        kwargs={"dataset": "gsm_symbolic", "max_turns": 8},
    ),
    # minigrid truncates at each level's own max_steps
    *(
        _language(
            f"Text-BabyAI-{level}-v0",
            "minigrid",
            "babyai_env:make_babyai",
            kwargs={"level": f"BabyAI-{level}-v0"},
        )
        for level in ("GoToLocal", "PickupLoc", "PutNextLocal", "OpenDoor")
    ),
)


def entry(env_id: str) -> EnvEntry | None:
    """The catalog entry of a text env id (None for an id llmgym does not list)."""
    return next((e for e in CATALOG if e.id == env_id), None)


__all__ = ["ARITHMETIC_CONFIG", "CATALOG", "DEFAULT_EPISODES", "EnvEntry", "SB3Config", "entry"]
