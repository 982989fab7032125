"""How well an agent plays: the one evaluator (N episodes on explicit seeds -> mean, CI,
success and parse rates, env-steps/s), the exact value of a greedy Markov policy on the
tabular envs (and of each constant policy), and the statistics both report.
"""
