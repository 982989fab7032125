"""Stable-Baselines3 baselines: hyperparameters, training on the base numeric env, a model
cache, and the agent that plays the text env from ``info["raw_obs"]``.

SB3 cannot consume ``Text`` spaces, so it trains on the base env (Tuple/Dict observations
flattened, as Blackjack needs; Discrete observations one-hot encoded by SB3 itself) and is
evaluated on the ``Text-*`` twin with the same seeds as every other agent.

Models are cached under ``$LLMGYM_CACHE`` (default ``~/.cache/llmgym/baselines``) as
``<env>-<algo>-s<seed>-<hash>.safetensors`` (the policy network's weights and, for a recipe
trained under ``VecNormalize``, its observation mean and variance) plus a ``.json`` recipe of
how they were trained; the hash covers the hyperparameters and env kwargs, so
editing a recipe (``llmgym.baselines.sb3_recipes``) retrains. Where the cache lacks a model,
the policies a checkout of the repository commits (``benchmarks/results/classic/sb3/``, the
classic leaderboard's) are used before anything is trained. Loading never
unpickles: the policy is rebuilt from the known algorithm class and its recipe, and the
weights are loaded with ``strict=True``. SB3's own ``.zip`` files (pickles inside) are never
read; an old zip cache or any file that is not what llmgym wrote is refused with one sentence.

Run: ``llmgym baselines train CartPole-v1 --algo ppo`` (stable-baselines3 needs the
``baselines`` extra: ``pip install "llmgym[baselines]"``).

This module finds the policy an agent plays (cache, committed, else trained) and re-exports
the rest: training and the cache files (``sb3_training``), the agent (``sb3_agent``) and
learning curves (``sb3_curves``).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import gymnasium as gym

# re-exported: every name this module had before it was split stays importable from here
from llmgym.baselines.sb3_agent import ObservationNormalizer, SB3Agent  # noqa: F401
from llmgym.baselines.sb3_curves import LearningCurve, learning_curve  # noqa: F401
from llmgym.baselines.sb3_recipes import RECIPES, SB3Config, annealing, resolve  # noqa: F401
from llmgym.baselines.sb3_training import (  # noqa: F401
    ALGOS,
    CACHE_FORMAT,
    HYPERPARAMS,
    MAX_SEED,
    OBS_MEAN,
    OBS_VAR,
    _build,
    _check,
    cache_dir,
    config_for,
    load_model,
    make_base_env,
    model_path,
    train,
)
from llmgym.envs.registration import base_env_id, make_eval_env  # noqa: F401
from llmgym.errors import AgentError

#: Where a checkout of the repository commits the policies the classic leaderboard plays
#: (``benchmarks/train_sb3_policies.sh``), relative to its root.
COMMITTED = Path("benchmarks/results/classic/sb3")


def committed_dirs() -> list[Path]:
    """The committed policies' folders that exist: in the checkout llmgym runs from, and under
    the working directory. They are read, never written."""
    roots = [Path(__file__).resolve().parents[2]]
    try:
        roots.append(Path.cwd())
    except OSError:  # a working directory deleted under us
        pass
    found = [root / COMMITTED for root in roots if (root / COMMITTED).is_dir()]
    return list(dict.fromkeys(p.resolve() for p in found))


def find_model(
    base_id: str, algo: str, seed: int = 0, **env_kwargs: Any
) -> tuple[Path, Path | None]:
    """``(path, found)``: the cache file of a baseline, and where a trained one already is: that
    path, else the file of the same name among the committed policies (``committed_dirs()``),
    else None. The name holds the recipe's hash, so only a policy of today's recipe is found."""
    path = model_path(base_id, algo, seed, **env_kwargs)
    candidates = [path, *(root / path.name for root in committed_dirs())]
    return path, next((p for p in candidates if p.exists()), None)


def load_agent(
    base_id: str, algo: str, *, seed: int = 0, env_kwargs: dict[str, Any] | None = None
) -> SB3Agent:
    """The SB3 baseline as an agent: the cached policy, else the committed one (a checkout's
    ``benchmarks/results/classic/sb3/``), else trained first (one line says so on stderr,
    with a progress bar on a terminal) and cached."""
    env_kwargs = env_kwargs or {}
    _check(base_id, algo)
    path, found = find_model(base_id, algo, seed, **env_kwargs)
    legacy = path.with_suffix(".zip")
    if found is None and legacy.exists():
        raise AgentError(
            f"{legacy} is an SB3 zip from an older llmgym, which is not loaded because it holds "
            f"pickles; run `llmgym baselines train {base_id} --algo {algo}` to cache it anew."
        )
    if found is None:
        steps = config_for(base_id, algo).n_timesteps
        print(
            f"Training sb3-{algo} on {base_id} for {steps:,} timesteps (no committed or cached "
            f"policy; caching it at {path}) ...",
            file=sys.stderr,
        )
        found = train(base_id, algo, seed=seed, progress=sys.stderr.isatty(), **env_kwargs)
    model, normalize = load_model(found, base_id, algo, seed, env_kwargs)
    return SB3Agent(gym.make(base_id, **env_kwargs), model, f"sb3-{algo}", normalize)
