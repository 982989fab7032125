"""Benchmarks: suites of envs, a resumable runner over explicit seeds, and the leaderboard."""
