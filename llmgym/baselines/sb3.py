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
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from llmgym.baselines.base import BaselineAgent
from llmgym.baselines.sb3_recipes import RECIPES, SB3Config, annealing, resolve
from llmgym.envs.registration import base_env_id, make_eval_env
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


@dataclass
class LearningCurve:
    """Evaluations of one SB3 run taken while it trained (see :func:`learning_curve`)."""

    env_id: str
    algo: str
    seed: int
    env_kwargs: dict[str, Any]
    env_steps: list[int]
    """Training env steps done at each evaluation (the first is 0: the untrained policy)."""
    values: list[float]
    """``eval_fn``'s value at each of those points."""
    train_seconds: float
    """Wall clock of ``learn`` without the evaluations."""
    eval_seconds: float
    """Wall clock of all evaluations."""

    def steps_to_reach(self, target: float, tol: float = 1e-9) -> int | None:
        """Env steps of the first evaluation at or above ``target`` (None: never reached).

        Example:
            >>> curve = LearningCurve("E", "ppo", 0, {}, [0, 10, 20], [0.1, 0.5, 0.9], 1, 1)
            >>> curve.steps_to_reach(0.5), curve.steps_to_reach(2.0)
            (10, None)
        """
        return next((s for s, v in zip(self.env_steps, self.values) if v >= target - tol), None)


def learning_curve(
    env_id: str,
    algo: str,
    budget: int,
    eval_every: int,
    eval_fn: Callable[[SB3Agent], float],
    seed: int = 0,
    env_kwargs: dict[str, Any] | None = None,
    config: SB3Config | None = None,
) -> LearningCurve:
    """Train a fresh SB3 model (``config``, else the recipe of ``(env, algo)``;
    nothing cached) for ``budget`` env steps and evaluate it with ``eval_fn`` before training,
    then whenever another ``eval_every`` steps are done, and at the end. ``eval_fn`` gets the
    model as an :class:`SB3Agent` (deterministic actions), so it can play the ``Text-*`` env
    or be evaluated exactly. ``env_id`` may be the base id or its ``Text-*`` twin.

    PPO/A2C only change their policy after each rollout (``n_steps x n_envs`` steps), and
    ``learn`` finishes the rollout it is in, so the last point may lie a little past ``budget``.
    """
    from stable_baselines3.common.callbacks import BaseCallback

    base_id, env_kwargs = base_env_id(env_id), dict(env_kwargs or {})
    _check(base_id, algo)
    if budget < 1 or eval_every < 1:
        raise AgentError(f"budget and eval_every must be at least 1, not {budget}, {eval_every}.")
    config = config or config_for(base_id, algo)
    model = _build(base_id, algo, seed, config.n_envs, env_kwargs, config=config)
    normalizer = model.get_vec_normalize_env()  # its statistics as they stand at each point
    normalize = normalizer.normalize_obs if normalizer is not None else None
    agent = SB3Agent(gym.make(base_id, **env_kwargs), model, f"sb3-{algo}", normalize)
    steps: list[int] = []
    values: list[float] = []
    eval_seconds = 0.0

    def record(step: int) -> None:
        nonlocal eval_seconds
        start = time.perf_counter()
        values.append(float(eval_fn(agent)))
        steps.append(int(step))
        eval_seconds += time.perf_counter() - start

    class EvalEvery(BaseCallback):
        def _on_step(self) -> bool:
            if self.num_timesteps >= len(steps) * eval_every:
                record(self.num_timesteps)
            return True

    record(0)
    start, before = time.perf_counter(), eval_seconds
    anneal = annealing(config.hyperparams)
    model.learn(total_timesteps=budget, callback=[EvalEvery(), *([anneal] if anneal else [])])
    train_seconds = time.perf_counter() - start - (eval_seconds - before)
    if steps[-1] < model.num_timesteps:
        record(model.num_timesteps)
    return LearningCurve(
        base_id,
        algo,
        seed,
        env_kwargs,
        steps,
        values,
        round(train_seconds, 2),
        round(eval_seconds, 2),
    )


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
