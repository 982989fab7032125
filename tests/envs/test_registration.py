import importlib.util
import subprocess
import sys
import warnings

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

import llmgym
from llmgym.envs.language import LANGUAGE_SUITE

CLASSIC_IDS = [
    "Text-CartPole-v1",
    "Text-Acrobot-v1",
    "Text-MountainCar-v0",
    "Text-MountainCarContinuous-v0",
    "Text-Pendulum-v1",
    "Text-Blackjack-v1",
    "Text-FrozenLake-v1",
    "Text-FrozenLake8x8-v1",
    "Text-Taxi-v4",
    "Text-CliffWalking-v1",
]
ALL_IDS = llmgym.text_env_ids()
# Language-native envs have their own contract tests (tests/envs/test_language_envs.py) with
# small game pools; here: every env that wraps a Gymnasium base env.
WRAPPED_IDS = [i for i in ALL_IDS if i not in LANGUAGE_SUITE]


def test_classic_ids_registered():
    assert set(CLASSIC_IDS) <= set(ALL_IDS)


def test_lunar_lander_only_with_box2d():
    has_box2d = importlib.util.find_spec("Box2D") is not None
    assert ("Text-LunarLander-v3" in ALL_IDS) == has_box2d


def test_import_is_light():
    code = "import llmgym, sys; print(sorted({'torch', 'transformers'} & set(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


@pytest.mark.parametrize("env_id", WRAPPED_IDS)
def test_check_env(env_id):
    env = gym.make(env_id)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "env differs from its unwrapped version" is expected
        check_env(env, skip_render_check=True)
    _, info = env.reset(seed=0)
    assert isinstance(info["system_prompt"], str) and info["system_prompt"]
    assert isinstance(info["valid_actions"], list)
    assert "raw_obs" in info


def _rollout(env_id: str, seed: int, steps: int = 15) -> list:
    env = gym.make(env_id)
    obs, info = env.reset(seed=seed)
    names = info["valid_actions"] or ["0.3"]
    record = [obs]
    for t in range(steps):
        obs, reward, terminated, truncated, info = env.step(names[t % len(names)])
        record += [obs, float(reward), terminated, truncated]
        if terminated or truncated:
            obs, info = env.reset()
    return record


@pytest.mark.parametrize("env_id", WRAPPED_IDS)
def test_same_seed_same_episode(env_id):
    assert _rollout(env_id, seed=7) == _rollout(env_id, seed=7)


@pytest.mark.parametrize("env_id", CLASSIC_IDS)
def test_text_env_matches_base_env(env_id):
    text_env = gym.make(env_id)
    base = gym.make(gym.spec(env_id).kwargs["base_id"])
    _, info = text_env.reset(seed=3)
    raw, _ = base.reset(seed=3)
    assert np.array_equal(np.asarray(info["raw_obs"]), np.asarray(raw))


def test_spec_keeps_base_limits():
    for env_id in CLASSIC_IDS:
        text, base = gym.spec(env_id), gym.spec(gym.spec(env_id).kwargs["base_id"])
        assert text.max_episode_steps == base.max_episode_steps
        assert text.reward_threshold == base.reward_threshold


def test_time_limit_applied_once():
    env = gym.make("Text-CartPole-v1", max_episode_steps=5)
    env.reset(seed=0)
    steps, done = 0, False
    while not done:
        _, _, terminated, truncated, _ = env.step(["LEFT", "RIGHT"][steps % 2])
        steps, done = steps + 1, terminated or truncated
    assert steps == 5 and truncated


def test_base_kwargs_pass_through():
    env = gym.make("Text-FrozenLake-v1", is_slippery=False)
    env.reset(seed=0)
    for move in ["RIGHT", "RIGHT", "DOWN", "DOWN", "DOWN", "RIGHT"]:
        _, reward, terminated, _, _ = env.step(move)
    assert reward == 1.0 and terminated
    assert "not slippery" in env.reset(seed=0)[1]["system_prompt"]


def test_namespaced_make():
    assert gym.make("llmgym:Text-CartPole-v1").reset(seed=0)[0].startswith("Cart position")


def test_make_vec_steps_with_list_of_strings():
    vec = gym.make_vec("Text-Blackjack-v1", num_envs=4)
    obs, info = vec.reset(seed=0)
    assert len(obs) == 4 and all(isinstance(o, str) for o in obs)
    obs, reward, terminated, truncated, info = vec.step(
        ['{"action": "stick"}', "hit", "Action: stick", "gibberish"]
    )
    assert list(info["parse"]["ok"]) == [True, True, True, False]
    assert list(info["parse"]["method"]) == ["json", "regex", "regex", "fallback"]
    assert reward.shape == (4,)
