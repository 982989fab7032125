"""SB3 baselines: a tiny training run, the cache, and the agent on the text env."""

from __future__ import annotations

import gymnasium as gym
import pytest

import llmgym  # noqa: F401

pytest.importorskip("stable_baselines3")

from llmgym.baselines import sb3  # noqa: E402
from llmgym.baselines.agents import make_baseline  # noqa: E402


@pytest.fixture(autouse=True)
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("LLMGYM_CACHE", str(tmp_path))
    return tmp_path


def test_train_caches_and_reuses(cache):
    path = sb3.train("CartPole-v1", "ppo", timesteps=512, progress=False)
    assert path.exists() and path.parent == cache
    assert path.with_suffix(".json").exists()
    stamp = path.stat().st_mtime_ns
    assert sb3.train("CartPole-v1", "ppo", timesteps=512, progress=False) == path
    assert path.stat().st_mtime_ns == stamp
    assert sb3.model_path("CartPole-v1", "ppo", timesteps=1024) != path


def test_flattened_tuple_observations_play_the_text_env(monkeypatch):
    tiny = sb3.SB3Config(300, "test", hyperparams=dict(learning_starts=100))
    monkeypatch.setitem(sb3.HYPERPARAMS, ("Blackjack-v1", "dqn"), tiny)
    agent = make_baseline("sb3-dqn", "Text-Blackjack-v1")  # trains (300 steps), then loads
    env = gym.make("Text-Blackjack-v1")
    obs, info = env.reset(seed=0)
    _, _, _, _, info = env.step(agent.act_text(obs, info))
    assert info["parse"]["ok"]
    assert agent.name == "sb3-dqn"


def test_discrete_observations_batch(monkeypatch):
    tiny = sb3.SB3Config(256, "test", n_envs=2, hyperparams=dict(n_steps=64))
    monkeypatch.setitem(sb3.HYPERPARAMS, ("FrozenLake-v1", "a2c"), tiny)
    agent = make_baseline("sb3-a2c", "FrozenLake-v1")
    actions = agent.act_many([0, 1, 2])
    assert len(actions) == 3 and all(isinstance(a, int) for a in actions)


def test_unknown_algorithm_is_a_user_error():
    with pytest.raises(ValueError, match="Unknown algorithm"):
        sb3.train("CartPole-v1", "sac")


# --- the cache never unpickles (issue 13, item 2) ----------------------------------------


class _Payload:
    """Unpickling this creates a marker file: proof that a pickle was executed."""

    marker = ""

    def __reduce__(self):
        return (open, (self.marker, "w"))


def _tiny_ppo(monkeypatch):
    tiny = sb3.SB3Config(64, "test", hyperparams=dict(n_steps=32, batch_size=32, n_epochs=1))
    monkeypatch.setitem(sb3.HYPERPARAMS, ("CartPole-v1", "ppo"), tiny)
    return sb3.model_path("CartPole-v1", "ppo")


def _forbid_unpickling(monkeypatch):
    import pickle

    import torch

    def refuse(*args, **kwargs):
        raise AssertionError("the SB3 cache was unpickled")

    for module, name in [(pickle, "loads"), (pickle, "load"), (torch, "load")]:
        monkeypatch.setattr(module, name, refuse)
    try:
        import cloudpickle

        monkeypatch.setattr(cloudpickle, "loads", refuse)
    except ImportError:
        pass


def test_cache_is_safetensors_and_loads_without_unpickling(monkeypatch):
    path = _tiny_ppo(monkeypatch)
    sb3.train("CartPole-v1", "ppo", progress=False)
    assert path.suffix == ".safetensors" and path.exists()
    trained = sb3.load_agent("CartPole-v1", "ppo")
    _forbid_unpickling(monkeypatch)
    agent = sb3.load_agent("CartPole-v1", "ppo")
    obs = [gym.make("CartPole-v1").reset(seed=i)[0] for i in range(8)]
    assert agent.act_many(obs) == trained.act_many(obs)


def test_a_crafted_zip_at_the_cache_path_runs_nothing(monkeypatch, tmp_path):
    import base64
    import json
    import pickle
    import zipfile

    path = _tiny_ppo(monkeypatch)
    marker = tmp_path / "PWNED"
    _Payload.marker = str(marker)
    blob = base64.b64encode(pickle.dumps(_Payload())).decode()
    data = {"policy_class": {":type:": "<class 'abc.ABCMeta'>", ":serialized:": blob}}
    path.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("data", json.dumps(data))
    with pytest.raises(ValueError, match="unreadable") as info:
        sb3.load_agent("CartPole-v1", "ppo")
    assert not marker.exists()
    assert "\n" not in str(info.value)


def test_foreign_weights_and_recipes_are_refused(monkeypatch):
    import json

    import torch
    from safetensors.torch import save_file

    path = _tiny_ppo(monkeypatch)
    sb3.train("CartPole-v1", "ppo", progress=False)
    recipe = json.loads(path.with_suffix(".json").read_text())
    save_file({"w": torch.zeros(2)}, str(path))
    with pytest.raises(ValueError, match="do not fit"):
        sb3.load_agent("CartPole-v1", "ppo")
    path.write_bytes(b"\x00" * 10)
    with pytest.raises(ValueError, match="unreadable"):
        sb3.load_agent("CartPole-v1", "ppo")
    sb3.train("CartPole-v1", "ppo", progress=False, force=True)
    path.with_suffix(".json").write_text(json.dumps(recipe | {"algo": "dqn"}))
    with pytest.raises(ValueError, match="not llmgym's"):
        sb3.load_agent("CartPole-v1", "ppo")


def test_an_old_zip_cache_is_refused_with_one_sentence(monkeypatch):
    path = _tiny_ppo(monkeypatch)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.with_suffix(".zip").write_bytes(b"PK\x03\x04 old")
    with pytest.raises(ValueError, match="older llmgym") as info:
        sb3.load_agent("CartPole-v1", "ppo")
    assert "\n" not in str(info.value)


@pytest.mark.parametrize("timesteps", [0, -5])
def test_nonpositive_timesteps_are_refused(timesteps, cache):
    with pytest.raises(ValueError, match="at least 1"):
        sb3.train("CartPole-v1", "ppo", timesteps=timesteps, progress=False)
    assert not list(cache.iterdir())


def test_a_vecnormalize_recipe_saves_its_statistics_and_acts_through_them(monkeypatch):
    """Trained under VecNormalize: the observation mean and variance are saved beside the
    policy (safetensors, no pickle) and the loaded agent normalizes with them, acting as the
    trained model does on VecNormalize's own frozen transform."""
    import json

    import numpy as np
    from safetensors.torch import load_file
    from stable_baselines3.common.vec_env import VecNormalize

    hyper = dict(n_steps=32, batch_size=32, n_epochs=1)
    tiny = sb3.SB3Config(256, "test", n_envs=2, hyperparams=hyper, normalize=True)
    monkeypatch.setitem(sb3.HYPERPARAMS, ("MountainCar-v0", "ppo"), tiny)
    path = sb3.train("MountainCar-v0", "ppo", progress=False)
    weights = load_file(str(path))
    mean, var = weights[sb3.OBS_MEAN].numpy(), weights[sb3.OBS_VAR].numpy()
    assert mean.shape == (2,) and np.all(var > 0) and not np.allclose(mean, 0)
    assert json.loads(path.with_suffix(".json").read_text())["vec_normalize"]["clip_obs"] == 10.0
    _forbid_unpickling(monkeypatch)
    agent = sb3.load_agent("MountainCar-v0", "ppo")
    obs = np.array([gym.make("MountainCar-v0").reset(seed=i)[0] for i in range(16)])
    frozen = VecNormalize.__new__(VecNormalize)  # only its transform, with the saved statistics
    frozen.obs_rms = type("RMS", (), {"mean": mean, "var": var})()
    frozen.clip_obs, frozen.epsilon = 10.0, 1e-8
    want, _ = agent.model.predict(frozen._normalize_obs(obs, frozen.obs_rms), deterministic=True)
    assert agent.act_many(list(obs)) == [int(a) for a in want]
    assert sb3.model_path("MountainCar-v0", "ppo") == path
    record = json.loads(path.with_suffix(".json").read_text())
    del record["vec_normalize"]
    path.with_suffix(".json").write_text(json.dumps(record))
    with pytest.raises(ValueError, match="lack the observation statistics") as info:
        sb3.load_agent("MountainCar-v0", "ppo")
    assert "\n" not in str(info.value)


def test_recipes_without_vecnormalize_keep_their_cache_names(monkeypatch):
    """The hash of a recipe without VecNormalize (or normalizing rewards too, the default) is the
    one written before those fields existed, so caches (and committed policies) trained then
    still load; ``norm_reward=False`` trains under a VecNormalize that leaves rewards alone."""
    import hashlib
    import json

    recipe = dict(n_timesteps=64, source="test", n_envs=1, hyperparams=dict(n_steps=32))
    digest = hashlib.sha1(json.dumps([recipe, {}], sort_keys=True).encode()).hexdigest()[:8]
    monkeypatch.setitem(sb3.HYPERPARAMS, ("CartPole-v1", "a2c"), sb3.SB3Config(**recipe))
    assert sb3.model_path("CartPole-v1", "a2c").name == f"CartPole-v1-a2c-s0-{digest}.safetensors"
    normalized = sb3.SB3Config(**recipe, normalize=True)
    monkeypatch.setitem(sb3.HYPERPARAMS, ("CartPole-v1", "a2c"), normalized)
    assert digest not in sb3.model_path("CartPole-v1", "a2c").name
    with_norm = dict(recipe, normalize=True)  # as hashed before ``norm_reward`` existed
    norm_key = json.dumps([with_norm, {}], sort_keys=True).encode()
    assert hashlib.sha1(norm_key).hexdigest()[:8] in sb3.model_path("CartPole-v1", "a2c").name
    obs_only = sb3.SB3Config(**recipe, normalize=True, norm_reward=False)
    monkeypatch.setitem(sb3.HYPERPARAMS, ("CartPole-v1", "a2c"), obs_only)
    assert hashlib.sha1(norm_key).hexdigest()[:8] not in sb3.model_path("CartPole-v1", "a2c").name
    vec_normalize = sb3._build("CartPole-v1", "a2c", 0, 1, {}).get_vec_normalize_env()
    assert vec_normalize.norm_obs and not vec_normalize.norm_reward


# --- the bench plays committed or cached policies before it trains (issue 36, item 3) ------


def test_a_committed_policy_is_played_instead_of_training(monkeypatch, tmp_path, capsys):
    """A policy of today's recipe committed in a checkout (benchmarks/results/classic/sb3/) is
    loaded when the cache lacks it: nothing is trained, nothing is written to the cache."""
    import shutil

    _tiny_ppo(monkeypatch)
    trained = sb3.train("CartPole-v1", "ppo", progress=False)
    committed = tmp_path / "checkout" / sb3.COMMITTED
    committed.mkdir(parents=True)
    for suffix in (".safetensors", ".json"):
        shutil.move(trained.with_suffix(suffix), committed / trained.with_suffix(suffix).name)
    empty = tmp_path / "empty-cache"
    monkeypatch.setenv("LLMGYM_CACHE", str(empty))
    monkeypatch.chdir(tmp_path / "checkout")  # the working directory's checkout counts too
    assert sb3.find_model("CartPole-v1", "ppo")[1] == (committed / trained.name).resolve()

    def refuse(*args, **kwargs):
        raise AssertionError("trained although a committed policy exists")

    monkeypatch.setattr(sb3, "train", refuse)
    agent = make_baseline("sb3-ppo", "Text-CartPole-v1")
    assert agent.act_many([gym.make("CartPole-v1").reset(seed=0)[0]])[0] in (0, 1)
    assert "Training" not in capsys.readouterr().err
    assert not empty.exists()


def test_training_says_what_it_trains_and_where_it_caches(monkeypatch, cache, capsys):
    monkeypatch.setattr(sb3, "committed_dirs", lambda: [])
    path = _tiny_ppo(monkeypatch)
    sb3.load_agent("CartPole-v1", "ppo")
    lines = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert lines == [
        f"Training sb3-ppo on CartPole-v1 for 64 timesteps (no committed or cached policy; "
        f"caching it at {path}) ..."
    ]
    sb3.load_agent("CartPole-v1", "ppo")  # cached now: nothing said, nothing trained
    assert capsys.readouterr().err == ""


def test_an_annealed_entropy_coefficient_falls_to_zero_over_training(monkeypatch):
    """``ent_coef="lin_X"`` (SB3 takes only a number there): it starts at X and falls linearly
    with the progress left, set before each rollout; the recipe's hash covers it."""
    import json

    from llmgym.baselines.sb3_recipes import annealing

    hyper = dict(n_steps=32, batch_size=32, n_epochs=1, ent_coef="lin_0.4")
    config = sb3.SB3Config(128, "test", hyperparams=hyper)
    model = sb3._build("CartPole-v1", "ppo", 0, 1, {}, config=config)
    assert model.ent_coef == 0.4
    seen = []
    anneal = annealing(config.hyperparams)
    train_step = model.train

    def recording():
        seen.append(model.ent_coef)
        train_step()

    monkeypatch.setattr(model, "train", recording)
    model.learn(total_timesteps=128, callback=anneal)
    assert seen == pytest.approx([0.4, 0.3, 0.2, 0.1])
    assert annealing({"ent_coef": 0.01}) is None
    monkeypatch.setitem(sb3.HYPERPARAMS, ("CartPole-v1", "ppo"), config)
    path = sb3.train("CartPole-v1", "ppo", progress=False)  # trains and records the schedule
    record = json.loads(path.with_suffix(".json").read_text())
    assert record["config"]["hyperparams"]["ent_coef"] == "lin_0.4"


def test_loading_a_policy_says_nothing_about_its_minibatches(monkeypatch):
    """A policy is rebuilt with its recipe's envs, so SB3 does not warn that a one-env rollout
    is smaller than the recipe's minibatch (it did on every bench of CartPole PPO)."""
    import warnings

    hyper = dict(n_steps=32, batch_size=64, n_epochs=1)
    tiny = sb3.SB3Config(128, "test", n_envs=2, hyperparams=hyper)
    monkeypatch.setitem(sb3.HYPERPARAMS, ("CartPole-v1", "ppo"), tiny)
    sb3.train("CartPole-v1", "ppo", progress=False)
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        sb3.load_agent("CartPole-v1", "ppo")


def test_playing_the_committed_mountaincar_policy_warns_nothing(monkeypatch):
    """The zoo's MountainCarContinuous PPO recipe has a rollout smaller than a minibatch: SB3
    warns about that when the model is built, which playing a committed policy never trains."""
    import warnings

    if sb3.find_model("MountainCarContinuous-v0", "ppo")[1] is None:
        pytest.skip("no committed MountainCarContinuous PPO policy in this checkout")
    monkeypatch.setattr(sb3, "train", lambda *a, **k: pytest.fail("trained"))
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        make_baseline("sb3-ppo", "Text-MountainCarContinuous-v0")
