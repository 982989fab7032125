"""LlamaGym's README blackjack example, running on llmgym.

What changed from LlamaGym's README: the imports (``llmgym.Agent``; the model comes from
``llmgym.agents.load_model`` because TRL no longer has ``AutoModelForCausalLMWithValueHead``
and llmgym takes a plain causal LM), and the model (the embedded SmolLM2-135M instead of
Llama-2-7b, which needs the Hub and a GPU). The agent class and the loop are LlamaGym's.

    python examples/llamagym_blackjack.py --episodes 5
"""

from __future__ import annotations

import argparse

import gymnasium as gym
from tqdm import trange

from llmgym import Agent
from llmgym.agents import load_model


class BlackjackAgent(Agent):
    def get_system_prompt(self) -> str:
        return "You are an expert blackjack player."

    def format_observation(self, observation) -> str:
        return f"Your current total is {observation[0]}"

    def extract_action(self, response: str):
        return 0 if "stick" in response else 1


def run(model, tokenizer, device: str = "cpu", episodes: int = 5000) -> list[float]:
    """LlamaGym's loop; returns the episode returns."""
    agent = BlackjackAgent(model, tokenizer, device)
    env = gym.make("Blackjack-v1")
    returns = []
    for _episode in trange(episodes):
        observation, info = env.reset()
        done = False

        while not done:
            action = agent.act(observation)  # act based on observation
            observation, reward, terminated, truncated, info = env.step(action)
            agent.assign_reward(reward)  # provide reward to agent
            done = terminated or truncated

        returns.append(sum(agent.current_episode_rewards))
        train_stats = agent.terminate_episode()  # trains if batch is full  # noqa: F841
    return returns


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=5)
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args()
    model, tokenizer = load_model(args.model, device=args.device)
    returns = run(model, tokenizer, args.device, args.episodes)
    print(f"mean return over {len(returns)} episodes: {sum(returns) / len(returns):+.3f}")
