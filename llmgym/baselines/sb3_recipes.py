"""The Stable-Baselines3 training recipes: ``RECIPES[base id][algo]``, read by
``llmgym.baselines.sb3`` (``HYPERPARAMS``, ``config_for``). An (env, algo) without a recipe
trains with SB3's defaults for 50k steps.

A recipe is part of the name of its cached policy (``sb3.model_path`` hashes it), so editing
one retrains, and the committed policies and the leaderboard were made with these values.

Example:
    >>> cartpole = RECIPES[base_id("CartPole")]
    >>> list(cartpole), cartpole["ppo"].n_timesteps, cartpole["ppo"].n_envs
    (['ppo', 'dqn', 'a2c'], 50000, 8)
    >>> RECIPES[base_id("Blackjack")]["dqn"].hyperparams["gamma"]
    1.0
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from llmgym.envs.catalog import base_id


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
    """Keyword arguments of the SB3 algorithm; ``"lin_X"`` is a linear schedule from X to 0
    (``resolve``; for the entropy coefficient, ``annealing``)."""
    normalize: bool = False
    """Train under ``VecNormalize`` (observations and rewards; the zoo's ``normalize: true``);
    the observation statistics are saved with the policy and applied when it acts."""
    norm_reward: bool = True
    """Whether ``normalize`` also scales rewards (the zoo turns it off for some recipes)."""


#: Hyperparameters SB3 takes only as numbers: as ``"lin_X"`` they start at X and llmgym anneals
#: them linearly to 0 itself, before each rollout (``annealing``).
ANNEALED = ("ent_coef",)


def _linear_start(value: Any) -> float | None:
    return float(value[4:]) if isinstance(value, str) and value.startswith("lin_") else None


def resolve(hyperparams: dict[str, Any]) -> dict[str, Any]:
    """Turn ``"lin_X"`` strings into SB3 schedules (progress goes from 1 to 0); those SB3
    cannot schedule (``ANNEALED``) into their start, X, which ``annealing`` then lowers.

    Example:
        >>> resolved = resolve({"learning_rate": "lin_1e-3", "ent_coef": "lin_0.5", "gamma": 0.9})
        >>> resolved["learning_rate"](0.5), resolved["ent_coef"], resolved["gamma"]
        (0.0005, 0.5, 0.9)
    """

    def linear(start: float) -> Any:
        return lambda progress: progress * start

    resolved = {}
    for key, value in hyperparams.items():
        start = _linear_start(value)
        if start is None:
            resolved[key] = value
        else:
            resolved[key] = start if key in ANNEALED else linear(start)
    return resolved


def annealing(hyperparams: dict[str, Any]) -> Any:
    """The SB3 callback that sets each ``"lin_X"`` of ``ANNEALED`` (the entropy coefficient) to
    X times the progress left before each rollout, as SB3 does for its own schedules; None
    when the recipe anneals none of them."""
    starts = {k: _linear_start(v) for k, v in hyperparams.items() if k in ANNEALED}
    starts = {k: v for k, v in starts.items() if v is not None}
    if not starts:
        return None
    from stable_baselines3.common.callbacks import BaseCallback

    class Anneal(BaseCallback):
        def _on_rollout_start(self) -> None:
            for key, start in starts.items():
                setattr(self.model, key, start * self.model._current_progress_remaining)

        def _on_step(self) -> bool:
            return True

    return Anneal()


# The zoo's budgets are cut where they would take more than a few minutes on a 2-core CPU;
# the ``source`` says so. Ours, for the tabular toy-text envs (the zoo has none): one-hot
# states, a few envs in parallel, a little entropy to keep exploring sparse rewards.
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


#: Base env id (the catalog's version) -> algo (``ppo``, ``dqn``, ``a2c``) -> recipe.
RECIPES: dict[str, dict[str, SB3Config]] = {
    base_id("CartPole"): {
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
    base_id("Acrobot"): {
        "ppo": SB3Config(
            100_000,
            f"{_ZOO} {_NO_NORM} (1e6 steps there)",
            n_envs=16,
            hyperparams=dict(n_steps=256, gae_lambda=0.94, gamma=0.99, n_epochs=4, ent_coef=0.0),
        ),
        "dqn": SB3Config(100_000, _ZOO, hyperparams=_DQN_ZOO_ACROBOT),
        "a2c": SB3Config(
            500_000,
            f"{_ZOO} {_NO_NORM}",
            n_envs=16,
            hyperparams=dict(ent_coef=0.0),
        ),
    },
    base_id("MountainCar"): {
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
    base_id("MountainCarContinuous"): {
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
    base_id("Pendulum"): {
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
    base_id("Blackjack"): _toy(50_000, gamma=1.0),
    # PPO's greedy policy is worth 0.601 exactly at 50k steps, 0.730 at 100k (optimal 0.740).
    base_id("FrozenLake"): _toy(50_000)
    | {
        "ppo": SB3Config(100_000, "llmgym", n_envs=8, hyperparams=_PPO_TOY),
        "a2c": SB3Config(100_000, "llmgym", n_envs=8, hyperparams=_A2C_TOY),
    },
    # PPO's greedy policy is worth 0.841 exactly at 100k steps, 0.860 at 200k (optimal 0.894);
    # A2C's 0.81 at 1M (the committed policy).
    base_id("FrozenLake8x8"): _toy(100_000)
    | {
        "ppo": SB3Config(200_000, "llmgym", n_envs=8, hyperparams=_PPO_TOY),
        "a2c": SB3Config(1_000_000, "llmgym", n_envs=8, hyperparams=_A2C_TOY),
    },
    # DQN's greedy policy loops to the step cap (-200) up to 50k steps and is optimal (7.93
    # exactly) from 150k on when exploring over 500k (sb3_curves/Taxi-v4-dqn-500000.json).
    # PPO with the toy recipe soon stops trying pickups and drop-offs (nearly always -10) and
    # loops to the cap; with any constant entropy bonus up to 0.5 too. Annealed from 0.5 to 0
    # over 1M steps it finds the passengers from ~400k on and ends at 6.56 exactly (optimal
    # 7.93; docs/results/leaderboard.md, "Where SB3 falls short"). A2C, whose advantages are
    # not normalized, still loops with the bonus annealed from 0.5, 5.0 or 20.0 over 1M steps;
    # from 5.0 over 2M with its rate annealed from 3e-3 (not 7e-4) it is optimal from 1.4M on
    # (sb3_curves/Taxi-v4-a2c-2000000-entlin5-lrlin3e-3.json; over 1M, from 800k on).
    base_id("Taxi"): _toy(100_000)
    | {
        "dqn": SB3Config(500_000, "llmgym", hyperparams=_DQN_TOY),
        "ppo": SB3Config(
            1_000_000, "llmgym", n_envs=8, hyperparams={**_PPO_TOY, "ent_coef": "lin_0.5"}
        ),
        "a2c": SB3Config(
            2_000_000,
            "llmgym",
            n_envs=8,
            hyperparams={**_A2C_TOY, "ent_coef": "lin_5.0", "learning_rate": "lin_3e-3"},
        ),
    },
    # PPO and A2C with the toy recipe stop walking towards the goal (a random walk seldom
    # reaches it within the 200-step cap) and loop to the cap (-200). With the entropy bonus
    # annealed to 0 both are optimal (-13 exactly): PPO's from 0.5 over 200k steps (from 140k
    # on), A2C's from 5.0 over 500k (from 200k on; from 0.5 or 2.0 it still loops, likely as
    # its advantages are not normalized). Curves in sb3_curves/.
    base_id("CliffWalking"): _toy(50_000)
    | {
        "ppo": SB3Config(
            200_000, "llmgym", n_envs=8, hyperparams={**_PPO_TOY, "ent_coef": "lin_0.5"}
        ),
        "a2c": SB3Config(
            500_000, "llmgym", n_envs=8, hyperparams={**_A2C_TOY, "ent_coef": "lin_5.0"}
        ),
    },
}

__all__ = ["RECIPES", "SB3Config"]
