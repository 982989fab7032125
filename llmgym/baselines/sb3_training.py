"""Training SB3 policies on the base numeric env and their cache files: the recipes by
(env, algo), where the cache lives and each file's name, training one, and rebuilding a
cached one without unpickling anything. ``llmgym.baselines.sb3`` (its docstring tells the
whole story) re-exports every name here.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
import warnings
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

import gymnasium as gym
from gymnasium import spaces

from llmgym.baselines.sb3_agent import ObservationNormalizer
from llmgym.baselines.sb3_recipes import RECIPES, SB3Config, annealing, resolve
from llmgym.envs.registration import make_eval_env
from llmgym.errors import AgentError, UnsupportedEnvError
from llmgym.files import atomic_path, write_text
from llmgym.rollout import MAX_TIMESTEPS

ALGOS = ("ppo", "dqn", "a2c")
MAX_SEED = 2**32 - 1  # numpy's seeds
#: Written into every cached recipe and weights file; anything else is refused.
CACHE_FORMAT = "llmgym-sb3-policy-v1"
#: Weights-file keys of the VecNormalize observation statistics (beside the policy's own).
OBS_MEAN, OBS_VAR = "vec_normalize.obs_mean", "vec_normalize.obs_var"


#: (base env id, algo) -> training recipe, from ``llmgym.baselines.sb3_recipes.RECIPES``.
HYPERPARAMS: dict[tuple[str, str], SB3Config] = {
    (base, algo): config for base, recipes in RECIPES.items() for algo, config in recipes.items()
}


def config_for(base_id: str, algo: str) -> SB3Config:
    """The training recipe for ``(base_id, algo)``, SB3 defaults for 50k steps if unlisted."""
    return HYPERPARAMS.get((base_id, algo), SB3Config(50_000, "stable-baselines3 defaults"))


def cache_dir() -> Path:
    """Where trained baselines live: ``$LLMGYM_CACHE`` or ``~/.cache/llmgym/baselines``."""
    root = os.environ.get("LLMGYM_CACHE")
    return Path(root) if root else Path.home() / ".cache" / "llmgym" / "baselines"


def make_base_env(base_id: str, **env_kwargs: Any) -> gym.Env:
    """The base env SB3 trains on: Tuple/Dict observations flattened, and the step cap of
    ``make_eval_env`` where the registry sets no time limit."""
    env = make_eval_env(base_id, **env_kwargs)
    if isinstance(env.observation_space, (spaces.Tuple, spaces.Dict)):
        env = gym.wrappers.FlattenObservation(env)
    return env


def _check(base_id: str, algo: str) -> None:
    root = cache_dir()
    if root.exists() and not root.is_dir():
        raise AgentError(f"The baseline cache {root} is a file; point LLMGYM_CACHE at a folder.")
    if algo not in ALGOS:
        raise AgentError(f"Unknown algorithm {algo!r}: use one of {', '.join(ALGOS)}.")
    if base_id not in gym.registry:
        raise AgentError(f"Unknown environment {base_id!r}: run `llmgym envs` to list them.")
    env = gym.make(base_id)
    numeric = (spaces.Box, spaces.Discrete, spaces.MultiDiscrete, spaces.MultiBinary)
    observed = env.observation_space
    flat = isinstance(observed, (spaces.Tuple, spaces.Dict))  # flattened by make_base_env
    if not isinstance(env.action_space, numeric) or not (flat or isinstance(observed, numeric)):
        raise UnsupportedEnvError(
            f"SB3 trains on numeric observations and actions, and {base_id} reads or answers "
            "in text; use random or an llm: agent there."
        )
    if algo == "dqn" and not isinstance(env.action_space, spaces.Discrete):
        raise UnsupportedEnvError(f"DQN needs discrete actions and {base_id} has continuous ones.")


def model_path(
    base_id: str, algo: str, seed: int = 0, timesteps: int | None = None, **env_kwargs: Any
) -> Path:
    """The cache file of a baseline (whether or not it exists yet)."""
    config = config_for(base_id, algo)
    if timesteps is not None:
        config = replace(config, n_timesteps=timesteps)
    recipe = asdict(config)
    if not config.normalize:  # recipes from before these fields keep their cache files
        del recipe["normalize"]
    if config.norm_reward:
        del recipe["norm_reward"]
    key = json.dumps([recipe, env_kwargs], sort_keys=True, default=str)
    digest = hashlib.sha1(key.encode()).hexdigest()[:8]
    return cache_dir() / f"{base_id}-{algo}-s{seed}-{digest}.safetensors"


def train(
    base_id: str,
    algo: str,
    *,
    seed: int = 0,
    timesteps: int | None = None,
    force: bool = False,
    progress: bool = True,
    **env_kwargs: Any,
) -> Path:
    """Train (or reuse from the cache) an SB3 baseline on the base env; return the model path.

    ``timesteps`` overrides the recipe's budget (and so makes a separate cache entry). A cached
    file is reused only once it loads as the policy llmgym cached (``AgentError`` otherwise,
    e.g. for a zip of pickles under that name).
    """
    _check(base_id, algo)
    if timesteps is not None and timesteps < 1:
        raise AgentError(f"timesteps must be at least 1, not {timesteps}.")
    if timesteps is not None and timesteps > MAX_TIMESTEPS:
        raise AgentError(f"timesteps {timesteps} is above the limit of {MAX_TIMESTEPS:,}.")
    if not 0 <= seed <= MAX_SEED:
        raise AgentError(f"seed must be from 0 to {MAX_SEED}, not {seed}.")
    path = model_path(base_id, algo, seed, timesteps, **env_kwargs)
    if path.exists() and not force:
        load_model(path, base_id, algo, seed, env_kwargs)
        return path
    import stable_baselines3 as sb3
    import torch
    from safetensors.torch import save_file

    config = config_for(base_id, algo)
    steps = timesteps or config.n_timesteps
    model = _build(base_id, algo, seed, config.n_envs, env_kwargs)
    start = time.perf_counter()
    callback = annealing(config.hyperparams)
    model.learn(total_timesteps=steps, progress_bar=progress, callback=callback)
    seconds = time.perf_counter() - start
    path.parent.mkdir(parents=True, exist_ok=True)
    state = {k: v.detach().cpu().contiguous() for k, v in model.policy.state_dict().items()}
    normalizer = model.get_vec_normalize_env()
    if normalizer is not None:
        state[OBS_MEAN] = torch.as_tensor(normalizer.obs_rms.mean, dtype=torch.float64)
        state[OBS_VAR] = torch.as_tensor(normalizer.obs_rms.var, dtype=torch.float64)
    record = {
        "format": CACHE_FORMAT,
        "env_id": base_id,
        "algo": algo,
        "seed": seed,
        "timesteps": steps,
        "train_seconds": round(seconds, 1),
        "config": asdict(config),
        "env_kwargs": env_kwargs,
        "stable_baselines3": sb3.__version__,
    }
    if normalizer is not None:
        record["vec_normalize"] = {"clip_obs": normalizer.clip_obs, "epsilon": normalizer.epsilon}
    # processes may race on one model: each writes its own temporary; the weights appear
    # last, so a present file has its recipe (OutputError on a full disk, nothing left)
    with atomic_path(path) as tmp:
        save_file(state, str(tmp), metadata={"format": CACHE_FORMAT})
        write_text(path.with_suffix(".json"), json.dumps(record, indent=2, default=str) + "\n")
    return path


def _build(
    base_id: str,
    algo: str,
    seed: int,
    n_envs: int,
    env_kwargs: dict[str, Any],
    for_training: bool = True,
    config: SB3Config | None = None,
) -> Any:
    """A fresh SB3 model of the known class and recipe (untrained; ``config``, else the
    env's recipe); its envs are wrapped in ``VecNormalize`` (gamma the recipe's) when the recipe
    says so and ``for_training``."""
    import stable_baselines3 as sb3
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.vec_env import VecNormalize

    config = config or config_for(base_id, algo)
    hyperparams = resolve(config.hyperparams)
    vec_env = make_vec_env(lambda: make_base_env(base_id, **env_kwargs), n_envs=n_envs, seed=seed)
    if config.normalize and for_training:
        vec_env = VecNormalize(
            vec_env, gamma=hyperparams.get("gamma", 0.99), norm_reward=config.norm_reward
        )
    cls = {"ppo": sb3.PPO, "dqn": sb3.DQN, "a2c": sb3.A2C}[algo]
    return cls("MlpPolicy", vec_env, seed=seed, verbose=0, device="cpu", **hyperparams)


def load_model(
    path: Path, base_id: str, algo: str, seed: int, env_kwargs: dict
) -> tuple[Any, ObservationNormalizer | None]:
    """Rebuild the cached policy at ``path`` without unpickling anything, with its observation
    normalizer (None unless trained under VecNormalize); AgentError (one sentence) for
    anything that is not a policy llmgym cached for this env and algorithm."""
    from safetensors import SafetensorError
    from safetensors.torch import load_file

    redo = f"delete it and run `llmgym baselines train {base_id} --algo {algo} --force`"
    try:
        weights = load_file(str(path))  # first: a file that is not safetensors says so
        record = json.loads(path.with_suffix(".json").read_text())
    except (OSError, ValueError, SafetensorError) as error:
        why = str(error).splitlines()[0] if str(error) else type(error).__name__
        raise AgentError(f"The cached baseline {path} is unreadable ({why}); {redo}.") from None
    expected = {"format": CACHE_FORMAT, "env_id": base_id, "algo": algo}
    if not isinstance(record, dict) or any(record.get(k) != v for k, v in expected.items()):
        raise AgentError(f"The recipe beside {path} is not llmgym's for {base_id}/{algo}; {redo}.")
    stats = [weights.pop(key, None) for key in (OBS_MEAN, OBS_VAR)]
    normalizer = None
    if config_for(base_id, algo).normalize:
        settings = record.get("vec_normalize")
        try:
            clip, epsilon = float(settings["clip_obs"]), float(settings["epsilon"])
            mean, var = stats[0].numpy(), stats[1].numpy()
        except (AttributeError, KeyError, TypeError, ValueError):
            why = f"The weights in {path} lack the observation statistics; {redo}."
            raise AgentError(why) from None
        normalizer = ObservationNormalizer(mean, var, clip, epsilon)
    # as many envs as in training; a recipe whose rollout is smaller than a minibatch (the
    # zoo's MountainCarContinuous PPO) warns about training, which playing never does
    n_envs = config_for(base_id, algo).n_envs
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "You have specified a mini-batch size")
        model = _build(base_id, algo, seed, n_envs, env_kwargs, for_training=False)
    try:
        model.policy.load_state_dict(weights, strict=True)
    except RuntimeError:
        raise AgentError(f"The weights in {path} do not fit the {algo} policy; {redo}.") from None
    model.policy.set_training_mode(False)
    return model, normalizer
