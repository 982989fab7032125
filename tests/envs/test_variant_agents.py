"""The baseline agents on the held-out variants (issue 53): random, optimal and SB3 answer in
the env's own action names (``info["valid_actions"]``), so a renamed or shuffled variant plays
as its base env; the optimal agent of a FrozenLake map set plans on each episode's map."""

from __future__ import annotations

import importlib.util
import json
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.envs.toy_text.frozen_lake import FrozenLakeEnv
from typer.testing import CliRunner

import llmgym  # noqa: F401  (registers the Text-* ids)
from llmgym.agents.evaluate import evaluate, format_result
from llmgym.agents.registry import make_agent
from llmgym.baselines.agents import OPTIMAL, MapPlanner, make_baseline
from llmgym.baselines.base import BaselineAgent
from llmgym.baselines.planning import solve_tabular
from llmgym.cli import app
from llmgym.envs.maps import maps_of
from llmgym.errors import AgentError
from llmgym.evaluation.exact import agent_act, exact_value
from llmgym.evaluation.references import expert_for

VARIANTS = [
    {"action_names": "alt"},
    {"action_names": "alt", "shuffle_actions": 3, "wording": "alt"},
    {"shuffle_actions": True},
]
#: (env, episodes): every env with renamed actions that the random and optimal agents play.
ENVS = [
    ("Text-Blackjack-v1", 60),
    ("Text-FrozenLake-v1", 30),
    ("Text-Taxi-v4", 5),
    ("Text-CliffWalking-v1", 5),
    ("Text-CartPole-v1", 3),
    ("Text-FrozenLakeMaps4x4-Heldout-v0", 20),
]
HELDOUT = "Text-FrozenLakeMaps4x4-Heldout-v0"


def played(env_id: str, agent: Any, episodes: int, env_kwargs: dict | None = None) -> dict:
    return evaluate(env_id, agent, episodes=episodes, progress=False, env_kwargs=env_kwargs)


@pytest.mark.parametrize(
    "kwargs", VARIANTS, ids=lambda k: ",".join(f"{a}={b}" for a, b in k.items())
)
@pytest.mark.parametrize("agent", ["random", "optimal"])
@pytest.mark.parametrize(("env_id", "episodes"), ENVS, ids=[e for e, _ in ENVS])
def test_random_and_optimal_play_a_variant_as_its_base_env(env_id, episodes, agent, kwargs):
    base = played(env_id, agent, episodes)
    variant = played(env_id, agent, episodes, kwargs)
    assert base["parse_rate"] == variant["parse_rate"] == 1.0
    assert variant["returns"] == base["returns"]


class Batched(BaselineAgent):
    """An SB3-like agent: base actions from a batched model of the base observation."""

    name = "fake-sb3"

    def act_many(self, raw_observations):
        return [1 if obs[0] < 17 else 0 for obs in raw_observations]  # hit below 17


def test_a_batched_model_agent_answers_in_the_variant_names():
    env = gym.make("Text-Blackjack-v1", action_names="alt")
    agent = Batched(env)
    obs, info = env.reset(seed=0)
    assert info["valid_actions"] == ["stand", "draw"]
    infos = [{**info, "raw_obs": (10, 5, 0)}, {**info, "raw_obs": (20, 5, 0)}]
    assert agent.act_batch([obs, obs], infos) == ['{"action": "draw"}', '{"action": "stand"}']
    base = played("Text-Blackjack-v1", Batched(gym.make("Blackjack-v1")), 60)
    variant = played("Text-Blackjack-v1", agent, 60, {"action_names": "alt"})
    assert variant["parse_rate"] == 1.0 and variant["returns"] == base["returns"]


@pytest.mark.skipif(
    importlib.util.find_spec("stable_baselines3") is None, reason="needs the baselines extra"
)
def test_the_committed_sb3_policy_plays_a_renamed_variant(monkeypatch, tmp_path):
    monkeypatch.setenv("LLMGYM_CACHE", str(tmp_path))  # the checkout's committed policy
    kwargs = {"action_names": "alt", "shuffle_actions": True}
    base = played("Text-Blackjack-v1", "sb3-ppo", 100)
    variant = played("Text-Blackjack-v1", "sb3-ppo", 100, kwargs)
    assert base["parse_rate"] == variant["parse_rate"] == 1.0
    assert variant["returns"] == base["returns"]
    assert not list(tmp_path.iterdir())  # loaded, not trained


def test_names_of_another_length_fall_back_to_the_curated_names():
    agent = BaselineAgent(gym.make("Blackjack-v1"))
    assert agent.names_for({"valid_actions": ["a", "b", "c"]}) == ["stick", "hit"]
    assert agent.names_for({"valid_actions": []}) == ["stick", "hit"]


@pytest.mark.parametrize(
    "argv",
    [[], ["--env-kwarg", "action_names=alt"], ["--env-kwarg", "action_names=alt",
                                                "--env-kwarg", "shuffle_actions=true"]],
)  # fmt: skip
def test_cli_eval_optimal_on_a_renamed_blackjack_equals_the_base_env(tmp_path, argv):
    out = tmp_path / "r.json"
    args = ["eval", "Text-Blackjack-v1", "--agent", "optimal", "--episodes", "200"]
    result = CliRunner().invoke(app, [*args, "--no-progress", "--output", str(out), *argv])
    assert result.exit_code == 0, result.output
    got = json.loads(out.read_text())
    base = played("Text-Blackjack-v1", "optimal", 200)
    assert got["parse_rate"] == 1.0 and got["returns"] == base["returns"]
    assert "parse rate 100.0%" in result.output


# --- the optimal agent of a map set --------------------------------------------------------


@pytest.mark.parametrize(("name", "size"), [("Heldout", 4), ("Heldout", 5), ("Train", 4)])
def test_optimal_crosses_every_non_slippery_map_exactly(name, size):
    env_id = f"Text-FrozenLakeMaps{size}x{size}-{name}-v0"
    agent = make_agent("optimal", env_id)
    assert isinstance(agent, MapPlanner)
    result = exact_value(env_id, agent_act(agent))
    assert result.value == 1.0 and result.parse_rate == 1.0
    assert result.maps == len(maps_of(name.lower(), size))


@pytest.mark.parametrize("kwargs", [{"wording": "alt", "action_names": "alt"}, {}])
def test_optimal_wins_every_sampled_episode_of_the_held_out_maps(kwargs):
    result = played(HELDOUT, "optimal", 100, kwargs)  # seeds 0..99: every map once
    assert result["mean_return"] == 1.0 and result["parse_rate"] == 1.0


def test_on_slippery_maps_optimal_reaches_each_map_s_planned_value():
    """The exact value of the agent on the slippery set is the mean of value iteration's
    value on each map: it plans on the map each state belongs to, not on one map."""
    kwargs = {"is_slippery": True}
    agent = make_agent("optimal", HELDOUT, env_kwargs=kwargs)
    result = exact_value(HELDOUT, agent_act(agent), kwargs)
    planned = [
        solve_tabular(lake.P, lake.initial_state_distrib, 30)[1]
        for lake in (FrozenLakeEnv(desc=m, is_slippery=True) for m in maps_of("heldout", 4))
    ]
    assert result.value == pytest.approx(float(np.mean(planned)))
    first = MapPlanner(gym.make(HELDOUT, is_slippery=True)).plan(maps_of("heldout", 4)[0])

    def map_zero_plan(observations, infos):  # one fixed map's plan on every map
        names = infos[0]["valid_actions"]
        return [json.dumps({"action": names[int(first[i["raw_obs"]])]}) for i in infos]

    assert exact_value(HELDOUT, map_zero_plan, kwargs).value < result.value - 0.1


def test_the_map_planner_needs_the_map_in_info():
    agent = make_baseline("optimal", HELDOUT)
    with pytest.raises(AgentError, match="plans on info\\['map'\\]"):
        agent.act_batch(["obs"], [{"raw_obs": 0, "valid_actions": ["LEFT"] * 4}])


def test_the_expert_function_of_a_map_set_env_plans_on_the_map_it_plays():
    """SFT demos and reference returns call OPTIMAL[class](env) on the env they roll out."""
    env = gym.make("Text-FrozenLakeMaps4x4-Train-v0", action_names="alt")
    expert = expert_for(env)
    assert OPTIMAL["FrozenLakeMapsEnv"] is not None
    for seed in range(0, 1000, 37):
        obs, info = env.reset(seed=seed)
        reward, done = 0.0, False
        while not done:
            action = info["valid_actions"][int(expert(info["raw_obs"]))]
            obs, reward, terminated, truncated, info = env.step(json.dumps({"action": action}))
            done = terminated or truncated
        assert reward == 1.0 and info["map_index"] == seed


def test_cli_exact_on_a_map_set_counts_maps_and_states():
    args = ["eval", HELDOUT, "--agent", "optimal", "--exact", "--no-progress"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    text = " ".join(result.output.split())
    assert "exact return +1.0000" in text and "exact mean over 100 maps (" in text
    assert "states), 30-step cap" in text


def test_the_exact_message_on_one_map_is_unchanged():
    result = {"env_id": "E", "agent": "a", "exact": True, "mean_return": 0.5, "states": 11,
              "parse_rate": 1.0, "horizon": 100, "maps": 1}  # fmt: skip
    assert "(exact, greedy policy over 11 states, 100-step cap)" in format_result(result)
    del result["maps"]  # a result written before maps were counted
    assert "over 11 states" in format_result(result)
