import warnings

import gymnasium as gym
import numpy as np
import pytest
from gymnasium import spaces
from gymnasium.utils.env_checker import check_env

import llmgym
from llmgym.agents.evaluate import evaluate
from llmgym.wrappers import InvalidActionError


class DictEnv(gym.Env):
    """A toy env with a nested observation space and a MultiDiscrete action space."""

    def __init__(self, action_space: spaces.Space | None = None):
        self.observation_space = spaces.Dict(
            {
                "position": spaces.Box(-1.0, 1.0, (2,), np.float32),
                "mode": spaces.Discrete(3),
                "flags": spaces.MultiBinary(3),
                "pair": spaces.Tuple((spaces.Discrete(2), spaces.MultiDiscrete([4, 5]))),
            }
        )
        self.action_space = action_space or spaces.MultiDiscrete([3, 2])
        self.last_action = None

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.observation_space.seed(int(self.np_random.integers(2**31)))
        return self.observation_space.sample(), {}

    def step(self, action):
        self.last_action = action
        return self.observation_space.sample(), 1.0, False, False, {}


def test_generic_describer_names_every_field():
    env = llmgym.wrap(DictEnv())
    obs, info = env.reset(seed=0)
    for field in ("position[0]", "position[1]", "mode", "flags", "pair[0]", "pair[1]"):
        assert field in obs
    for field in ("position", "mode", "flags", "pair[0]", "pair[1]", "within [0, 2], [0, 1]"):
        assert field in info["system_prompt"]
    assert "\n\n\n" not in info["system_prompt"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        check_env(env, skip_render_check=True)


def test_multidiscrete_actions_parse_and_clip():
    env = llmgym.wrap(DictEnv())
    env.reset(seed=0)
    *_, info = env.step('{"action": [2, 7]}')
    assert info["parse"]["action"].tolist() == [2, 1] and info["parse"]["clipped"]
    assert env.unwrapped.last_action.dtype == env.unwrapped.action_space.dtype


def test_unsupported_action_space_is_one_clear_error():
    with pytest.raises(ValueError, match="cannot parse text into a Tuple action space"):
        llmgym.wrap(DictEnv(spaces.Tuple((spaces.Discrete(2), spaces.Discrete(2)))))


def test_custom_parser_for_unsupported_space():
    from llmgym.parsing import ParseResult

    def parser(text: str) -> ParseResult:
        return ParseResult(True, "regex", (1, 0))

    env = llmgym.wrap(
        DictEnv(spaces.Tuple((spaces.Discrete(2), spaces.Discrete(2)))), parser=parser
    )
    env.reset(seed=0)
    env.step("anything")
    assert env.unwrapped.last_action == (1, 0)


def test_fallback_is_first_action_and_counts_as_invalid():
    env = gym.make("Text-Blackjack-v1")
    env.reset(seed=0)
    *_, info = env.step("I don't know")
    assert info["parse"] == {
        "ok": False,
        "method": "fallback",
        "action": 0,
        "error": "no valid action (stick, hit) found in the text",
        "clipped": False,
    }


def test_penalty_policy_adds_reward():
    plain = gym.make("Text-CartPole-v1")
    penalized = gym.make("Text-CartPole-v1", on_invalid="penalty")
    plain.reset(seed=0)
    penalized.reset(seed=0)
    assert plain.step("??")[1] == 1.0
    assert penalized.step("??")[1] == pytest.approx(0.9)
    assert penalized.step("LEFT")[1] == 1.0
    custom = gym.make("Text-CartPole-v1", on_invalid="fallback", invalid_penalty=-1.0)
    custom.reset(seed=0)
    assert custom.step("??")[1] == 0.0


def test_random_policy_is_seeded():
    def actions(seed):
        env = gym.make("Text-Taxi-v4", on_invalid="random")
        env.reset(seed=seed)
        return [env.step("???")[-1]["parse"]["action"] for _ in range(20)]

    assert actions(1) == actions(1)
    assert len(set(actions(1))) > 1


def test_random_policy_box_stays_in_bounds():
    env = gym.make("Text-Pendulum-v1", on_invalid="random")
    env.reset(seed=0)
    values = [float(env.step("no idea")[-1]["parse"]["action"][0]) for _ in range(30)]
    assert all(-2.0 <= v <= 2.0 for v in values) and len(set(values)) > 1


def test_terminate_policy_ends_without_stepping():
    env = gym.make("Text-CartPole-v1", on_invalid="terminate", invalid_penalty=-5.0)
    obs0, _ = env.reset(seed=0)
    obs, reward, terminated, truncated, info = env.step("nonsense")
    assert (obs, reward, terminated, truncated) == (obs0, -5.0, True, False)
    assert info["parse"]["ok"] is False and "system_prompt" in info


def test_raise_policy():
    env = gym.make("Text-CartPole-v1", on_invalid="raise")
    env.reset(seed=0)
    with pytest.raises(InvalidActionError, match="Could not parse an action"):
        env.step("nonsense")


def test_bad_on_invalid_is_one_clear_error():
    with pytest.raises(ValueError, match="on_invalid must be one of"):
        gym.make("Text-CartPole-v1", on_invalid="explode")


def test_history_keeps_last_k_turns():
    env = gym.make("Text-FrozenLake-v1", history=2)
    obs, info = env.reset(seed=0)
    assert [m["role"] for m in info["messages"]] == ["system", "user"]
    for answer in ["DOWN", "RIGHT", '{"action": "UP"}']:
        obs, *_, info = env.step(answer)
    roles = [m["role"] for m in info["messages"]]
    assert roles == ["system", "user", "assistant", "user", "assistant", "user"]
    assert info["messages"][2]["content"] == "RIGHT"
    assert info["messages"][-1]["content"] == obs
    _, info = env.reset(seed=1)
    assert len(info["messages"]) == 2


def test_observations_stay_in_charset():
    env = gym.make("Text-Taxi-v4")
    obs, _ = env.reset(seed=0)
    assert env.observation_space.contains(obs)


def test_a_describer_is_named_by_a_string_and_baselines_ignore_it():
    env = gym.make("Text-CartPole-v1", describer="cartpole-degrees")
    obs, _ = env.reset(seed=0)
    assert "(-2.8 degrees per second; rotating left)" in obs
    assert gym.make("Text-CartPole-v1", describer="generic").reset(seed=0)[0].startswith("x[0] =")
    result = evaluate(
        "Text-CartPole-v1",
        "optimal",
        episodes=2,
        progress=False,
        env_kwargs={"describer": "cartpole-degrees"},
    )
    assert result["mean_return"] == 500.0
    with pytest.raises(ValueError, match="Unknown describer 'fancy': use one of generic"):
        gym.make("Text-CartPole-v1", describer="fancy")
