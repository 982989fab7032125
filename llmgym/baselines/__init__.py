"""Agents that are not language models: random, optimal or heuristic (with the exact planners
of the tabular envs) and Stable-Baselines3 with its per-env recipes. They play the text envs
from ``info["raw_obs"]`` and write their answers as text, so every agent meets the same seeds.
"""
