"""llmgym.Agent runs LlamaGym's example loop."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

from llmgym.integrations.llamagym import Agent, policy_config_from_generate
from llmgym.policy.testing import tiny_model

EXAMPLE = Path(__file__).parents[2] / "examples" / "llamagym_blackjack.py"


def load_example():
    spec = importlib.util.spec_from_file_location("llamagym_blackjack", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_llamagym_blackjack_loop_runs():
    example = load_example()
    model, tokenizer = tiny_model()
    returns = example.run(model, tokenizer, "cpu", episodes=3)
    assert len(returns) == 3 and all(r in (-1.0, 0.0, 1.0, 1.5) for r in returns)


def test_agent_keeps_the_episode_for_trainers():
    example = load_example()
    model, tokenizer = tiny_model()
    agent = example.BlackjackAgent(model, tokenizer, "cpu", {"generate/max_new_tokens": 4})
    agent.act((14, 10, 0))
    agent.assign_reward(0.0)
    agent.act((19, 10, 0))
    agent.assign_reward(1.0)
    roles = [m["role"] for m in agent.current_episode_messages]
    assert roles == ["system", "user", "assistant", "user", "assistant"]
    assert agent.terminate_episode() == {}
    [episode] = agent.episodes
    assert episode["rewards"] == [0.0, 1.0] and len(episode["samples"]) == 2
    assert len(episode["samples"][1].prompt_ids) > len(episode["samples"][0].prompt_ids)
    assert agent.current_episode_messages[0]["role"] == "system"
    assert len(agent.current_episode_messages) == 1


def test_extract_action_errors_give_none_as_in_llamagym():
    class Failing(Agent):
        def get_system_prompt(self):
            return "s"

        def format_observation(self, observation):
            return str(observation)

        def extract_action(self, response):
            raise ValueError(response)

    model, tokenizer = tiny_model()
    agent = Failing(model, tokenizer, None, {"max_new_tokens": 2})
    assert agent.act(1) is None
    assert len(agent.current_episode_messages) == 2


def test_value_head_wrappers_are_unwrapped():
    model, tokenizer = tiny_model()

    class Wrapper:
        pretrained_model = model

    agent = load_example().BlackjackAgent(Wrapper(), tokenizer)
    assert agent.model is model


def test_abstract_methods_are_required():
    model, tokenizer = tiny_model()
    with pytest.raises(TypeError):
        Agent(model, tokenizer)


def test_generate_config_mapping():
    config = policy_config_from_generate(None)
    assert (config.temperature, config.top_p, config.greedy) == (0.9, 0.6, False)


def test_import_llmgym_stays_light():
    code = "import llmgym, sys; assert 'torch' not in sys.modules, 'import llmgym loaded torch'"
    subprocess.run([sys.executable, "-c", code], check=True)
