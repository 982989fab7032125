"""Agents: reference baselines (random, optimal, SB3) and the LLM policy."""
