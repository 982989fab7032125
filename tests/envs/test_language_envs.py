"""Language-native envs: TextWorld, reasoning-gym math, BabyAI-Text."""

import json
import subprocess
import sys
import warnings

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

import llmgym
from llmgym.envs.language import LANGUAGE_SUITE

TEXTWORLD_IDS = ["Text-TextWorld-Simple-v0", "Text-TextWorld-Cooking-v0"]
MATH_IDS = ["Text-Arithmetic-v0", "Text-GSM-v0", "Text-GSM-Stepwise-v0"]
BABYAI_IDS = [i for i in LANGUAGE_SUITE if i.startswith("Text-BabyAI-")]
needs_textworld = pytest.mark.skipif(
    "Text-TextWorld-Simple-v0" not in gym.registry, reason="textworld is not installed"
)


def make(env_id: str) -> gym.Env:
    """TextWorld ids with a one-game pool, so that tests generate (and cache) game 0 only."""
    if env_id in TEXTWORLD_IDS:
        pytest.importorskip("textworld")
        return gym.make(env_id, num_games=1)
    if env_id in MATH_IDS:
        pytest.importorskip("reasoning_gym")
    else:
        pytest.importorskip("minigrid")
    return gym.make(env_id)


def slow_for(env_id: str) -> object:
    """The cooking game is a second TextWorld game to generate (~10 s on a fresh cache)."""
    marks = [pytest.mark.slow] if env_id == "Text-TextWorld-Cooking-v0" else []
    return pytest.param(env_id, marks=marks)


def test_suite_registered_and_listed():
    assert set(LANGUAGE_SUITE) <= set(llmgym.text_env_ids())


def test_import_stays_light():
    code = (
        "import llmgym, sys; "
        "print(sorted({'textworld', 'reasoning_gym', 'minigrid', 'torch'} & set(sys.modules)))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


@pytest.mark.parametrize("env_id", [slow_for(i) for i in LANGUAGE_SUITE])
def test_check_env_and_info_contract(env_id):
    env = make(env_id)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "env differs from its unwrapped version" is expected
        check_env(env, skip_render_check=True)
    obs, info = env.reset(seed=0)
    assert isinstance(obs, str) and obs in env.observation_space
    assert isinstance(info["system_prompt"], str) and info["system_prompt"]
    assert isinstance(info["valid_actions"], list) and "raw_obs" in info
    obs, _, _, _, info = env.step("gibberish")
    assert obs in env.observation_space
    assert set(info["parse"]) >= {"ok", "method", "action", "error"}
    assert isinstance(info["system_prompt"], str) and isinstance(info["valid_actions"], list)


def _rollout(env_id: str, seed: int, steps: int = 6) -> list:
    env = make(env_id)
    obs, info = env.reset(seed=seed)
    record = [obs]
    for t in range(steps):
        names = info["valid_actions"] or ["First step: add.", "The answer is 3."]
        obs, reward, terminated, truncated, info = env.step(names[t % len(names)])
        record += [obs, float(reward), terminated, truncated]
        if terminated or truncated:
            obs, info = env.reset()
            record.append(obs)
    return record


@pytest.mark.parametrize("env_id", [slow_for(i) for i in LANGUAGE_SUITE])
def test_same_seed_same_episode(env_id):
    assert _rollout(env_id, seed=5) == _rollout(env_id, seed=5)


# --- TextWorld ---------------------------------------------------------------------------


@needs_textworld
@pytest.mark.parametrize("env_id", [slow_for(i) for i in TEXTWORLD_IDS])
def test_textworld_walkthrough_wins_with_max_score(env_id):
    env = make(env_id)
    _, info = env.reset(seed=0)
    walkthrough = info["walkthrough"]
    assert walkthrough and info["score"] == 0
    total, terminated = 0.0, False
    for command in walkthrough:
        assert command in info["valid_actions"]
        _, reward, terminated, truncated, info = env.step(json.dumps({"action": command}))
        assert info["parse"]["ok"] and info["parse"]["action"] == command
        total += reward
    assert terminated and info["won"] and not truncated
    assert total == info["max_score"] > 0


@needs_textworld
def test_textworld_observation_lists_commands_and_invalid_plays_look():
    env = make("Text-TextWorld-Simple-v0")
    obs, info = env.reset(seed=0)
    assert "$$" not in obs and "Admissible commands: " in obs
    assert all(command in obs for command in info["valid_actions"])
    _, reward, terminated, _, info = env.step("dance wildly")
    assert info["parse"]["ok"] is False and info["parse"]["action"] == "look"
    assert reward == 0.0 and not terminated


@needs_textworld
def test_textworld_cache_dir_follows_env_var(tmp_path, monkeypatch):
    from llmgym.envs.language.textworld_env import cache_dir

    monkeypatch.setenv("LLMGYM_CACHE", str(tmp_path))
    assert cache_dir() == tmp_path / "textworld"


# --- math / reasoning ---------------------------------------------------------------------

FORMATS = {
    "json": lambda a: f'I computed it. {{"answer": {json.dumps(a)}}}',
    "json-number": lambda a: f'{{"answer": {a}}}',
    "json-fenced": lambda a: f'```json\n{{"answer": "{a}"}}\n```',
    "boxed": lambda a: f"Adding up gives \\boxed{{{a}}}",
    "prose": lambda a: f"Step one, step two. So the answer is {a}.",
    "prose-final": lambda a: f"Final answer: {a}",
}


@pytest.mark.parametrize("env_id", ["Text-Arithmetic-v0", "Text-GSM-v0"])
@pytest.mark.parametrize("fmt", list(FORMATS))
def test_math_right_answer_earns_one_wrong_earns_zero(env_id, fmt):
    env = make(env_id)
    for seed in range(3):
        _, info = env.reset(seed=seed)
        answer = info["answer"]
        assert info["valid_actions"] == []
        _, reward, terminated, _, info = env.step(FORMATS[fmt](answer))
        assert (reward, terminated, info["parse"]["ok"]) == (1.0, True, True)
        assert info["parse"]["method"] == fmt.split("-")[0]
        env.reset(seed=seed)
        wrong = str(int(answer) + 1)
        _, reward, terminated, _, info = env.step(FORMATS[fmt](wrong))
        assert (reward, terminated, info["parse"]["ok"]) == (0.0, True, True)


def test_math_no_answer_is_a_failed_parse():
    env = make("Text-GSM-v0")
    env.reset(seed=0)
    _, reward, terminated, _, info = env.step("I do not know.")
    assert (reward, terminated) == (0.0, True)
    assert info["parse"]["ok"] is False and info["parse"]["method"] == "fallback"


def test_math_train_and_test_splits_share_no_problem():
    """A small problem space (2 one-digit terms: ~100 problems): the splits stay disjoint,
    cover it all between them, and a bad split is one sentence."""
    pytest.importorskip("reasoning_gym")
    from llmgym.envs.language.math_env import split_of

    config = {"min_terms": 2, "max_terms": 2, "min_digits": 1, "max_digits": 1}
    config |= {"operators": ["+"], "allow_parentheses": False, "allow_negation": False}
    seen = {}
    for split in ("train", "test", "all"):
        env = gym.make("Text-Arithmetic-v0", config=config, split=split)
        seen[split] = {env.reset(seed=s)[0] for s in range(600)}
        if split != "all":
            assert {split_of(q) for q in seen[split]} == {split}
    assert not seen["train"] & seen["test"]
    assert seen["all"] <= seen["train"] | seen["test"] and len(seen["test"]) >= 5
    with pytest.raises(ValueError, match="split must be one of"):
        gym.make("Text-Arithmetic-v0", split="heldout")


def test_extract_answer_never_evaluates_and_normalizes_numbers():
    from llmgym.envs.language.math_env import extract_answer

    assert extract_answer("The answer is 1,200 dollars.") == ("1200", "prose")
    assert extract_answer("\\boxed{42.0}") == ("42", "boxed")
    assert extract_answer('{"answer": "__import__(\'os\')"}') == (None, "fallback")
    assert extract_answer("answer: 1e999999999")[0] == "1"
    assert extract_answer("answer: 3/0") == (None, "fallback")


def test_stepwise_math_takes_steps_then_an_answer():
    env = make("Text-GSM-Stepwise-v0")
    obs, info = env.reset(seed=1)
    assert "Turn 1 of 8" in obs
    obs, reward, terminated, _, step_info = env.step("First I add the two numbers.")
    assert (reward, terminated) == (0.0, False)
    assert step_info["parse"] == {"ok": True, "method": "step", "action": None, "error": None}
    assert "Step 1: First I add the two numbers." in obs and "Turn 2 of 8" in obs
    _, reward, terminated, _, _ = env.step(f"The answer is {info['answer']}.")
    assert (reward, terminated) == (1.0, True)


def test_stepwise_math_stops_at_the_turn_limit():
    env = gym.make("Text-GSM-Stepwise-v0", max_turns=3)
    env.reset(seed=0)
    results = [env.step("thinking...") for _ in range(3)]
    assert [r[2] for r in results] == [False, False, True]
    assert results[-1][1] == 0.0 and results[-1][4]["parse"]["ok"] is False


# --- BabyAI-Text --------------------------------------------------------------------------


def test_babyai_describer_words():
    pytest.importorskip("minigrid")
    from minigrid.core.constants import COLOR_TO_IDX, OBJECT_TO_IDX, STATE_TO_IDX

    from llmgym.envs.language.babyai_env import describe_view

    image = np.zeros((7, 7, 3), dtype=np.uint8)
    image[:, :, 0] = OBJECT_TO_IDX["empty"]
    image[2, 4] = (OBJECT_TO_IDX["ball"], COLOR_TO_IDX["red"], 0)
    image[3, 3] = (OBJECT_TO_IDX["door"], COLOR_TO_IDX["blue"], STATE_TO_IDX["locked"])
    image[6, 6] = (OBJECT_TO_IDX["key"], COLOR_TO_IDX["purple"], 0)
    image[3, 0] = (OBJECT_TO_IDX["wall"], COLOR_TO_IDX["grey"], 0)
    text = describe_view(image, "go to the red ball")
    assert text.splitlines() == [
        "Goal of the agent: go to the red ball",
        "You see a purple key 3 steps right",
        "You see a red ball 1 step left and 2 steps forward",
        "You see a locked blue door 3 steps forward",
        "You see a wall 6 steps forward",
        "You carry nothing",
    ]


@pytest.mark.parametrize("env_id", BABYAI_IDS)
def test_babyai_names_every_object_in_view(env_id):
    from minigrid.core.constants import IDX_TO_COLOR, IDX_TO_OBJECT

    env = make(env_id)
    for seed in range(3):
        obs, info = env.reset(seed=seed)
        assert obs.startswith(f"Goal of the agent: {info['raw_obs']['mission']}")
        image = info["raw_obs"]["image"]
        for x in range(7):
            for y in range(7):
                kind = IDX_TO_OBJECT[int(image[x, y, 0])]
                if kind in ("ball", "box", "key", "door") and (x, y) != (3, 6):
                    assert f"{IDX_TO_COLOR[int(image[x, y, 1])]} {kind}" in obs


def test_babyai_six_named_actions_are_parsed():
    env = make("Text-BabyAI-GoToLocal-v0")
    _, info = env.reset(seed=0)
    assert info["valid_actions"] == [
        "turn left",
        "turn right",
        "go forward",
        "pick up",
        "drop",
        "toggle",
    ]
    for text, action in [('{"action": "go forward"}', 2), ("I will pick up", 3), ("toggle", 5)]:
        *_, info = env.step(text)
        assert info["parse"]["ok"] and info["parse"]["action"] == action


@pytest.mark.parametrize("env_id", BABYAI_IDS)
def test_babyai_bot_solves_the_levels(env_id):
    from llmgym.envs.language.babyai_env import BabyAIBotPolicy

    env = make(env_id)
    bot = BabyAIBotPolicy(env)
    for seed in range(3):
        env.reset(seed=seed)
        bot.reset()
        done = False
        while not done:
            _, reward, terminated, truncated, _ = env.step(bot.act())
            done = terminated or truncated
        assert terminated and reward > 0
