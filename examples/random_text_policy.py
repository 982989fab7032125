"""Play a few seeded episodes of Text-Blackjack-v1 with a random text policy.

Run: python examples/random_text_policy.py
"""

import random

import gymnasium as gym

import llmgym  # noqa: F401  (registers the Text-* envs)

env = gym.make("Text-Blackjack-v1")
rng = random.Random(0)
answers = ['{"action": "hit"}', '{"action": "stick"}', "Action: hit", "I'll stick.", "hmm?"]
for episode in range(5):
    obs, info = env.reset(seed=episode)
    done, total = False, 0.0
    while not done:
        answer = rng.choice(answers)
        obs, reward, terminated, truncated, info = env.step(answer)
        parse = info["parse"]
        print(f"  {answer!r:24} -> {parse['method']:8} ok={parse['ok']!s:5} reward={reward:+.0f}")
        total += float(reward)
        done = terminated or truncated
    print(f"episode {episode}: return {total:+.0f}\n")
