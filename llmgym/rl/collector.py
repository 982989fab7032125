"""The collector: plays a run's training episodes with the sampling policy in its envs, within
the env-step budget, each process its share of the seeds. Algorithms collect through it
(GRPO forms its groups with :meth:`Collector.play` and :meth:`Collector.next_seeds`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from llmgym.rl.state import RunState
from llmgym.rollout import Episode, play


class Collector:
    """Training episodes from ``envs`` (stepped in lockstep) acted by ``policy``, sampling."""

    def __init__(
        self, config: Any, envs: list[Any], policy: Any, processes: Any, state: RunState
    ) -> None:
        self.config = config
        self.envs = envs
        self.policy = policy
        self.processes = processes
        self.state = state

    def act(self, observations: list[str], infos: list[dict[str, Any]]) -> list[Any]:
        """The training rollouts' actor: the policy, sampling."""
        return self.policy.act(observations, infos, greedy=False)

    def next_seeds(self, n: int) -> list[int]:
        """Env seeds of the next ``n`` training episodes (:meth:`RunState.next_seeds`)."""
        return self.state.next_seeds(n)

    def collect(self) -> list[Episode]:
        """``episodes_per_update`` episodes, this process's share. They are complete unless
        the env-step budget runs out: the last collection stops when it is spent and the
        episodes it cuts end truncated (PPO bootstraps them from its value head)."""
        seeds = self.processes.shard(self.next_seeds(self.config.run.episodes_per_update))
        first = self.state.episodes_done
        return self.play(seeds, first_index=first, max_total_steps=self.steps_left_here())

    def play(self, seeds: Sequence[int], envs: list[Any] | None = None, **kwargs: Any) -> list:
        """:func:`~llmgym.rollout.play` with the sampling policy in ``envs`` (default: the
        run's); ``kwargs`` as ``play`` takes them (``first_index``, ``groups``, ``starts``,
        ``max_steps``, ...)."""
        return play(self.act, envs if envs is not None else self.envs, list(seeds), **kwargs)

    def steps_left_here(self) -> int:
        """This process's share of the env steps left in the budget."""
        left = max(self.config.run.total_env_steps - self.state.env_steps, 0)
        num, rank = self.processes.num, self.processes.rank
        return left // num + (rank < left % num)


__all__ = ["Collector"]
