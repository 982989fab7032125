"""The trainer's evaluations, one part of it: the policy it is handed, over fixed seeds or
exactly from the env's transition model, and how it says which (``Trainer.evaluate`` hands it
the policy, under the weights' average where one is kept).

Example:
    >>> from types import SimpleNamespace as NS
    >>> config = NS(eval=NS(episodes=100, greedy=True, method="sampled", env_kwargs={}))
    >>> RunEvaluation(config, envs=[], kwargs={}, torch=None).plan(1000).split(" (")[0]
    'the greedy policy over 1000 episodes'
    >>> config.eval.env_kwargs = {"map_set": "heldout"}
    >>> RunEvaluation(config, envs=[], kwargs={}, torch=None).plan(1000).split(" (")[0]
    'the greedy policy on map_set=heldout over 1000 episodes'
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import partial
from typing import Any

from llmgym.errors import TrainingError
from llmgym.evaluation.evaluator import EvalResult, evaluate
from llmgym.rollout import cached


class RunEvaluation:
    """Evaluations of a run's policy in ``envs`` (made with ``kwargs``: the registered step
    limit, held-out problems where split); ``last_exact`` keeps the newest exact one."""

    def __init__(
        self,
        config: Any,
        envs: list[Any],
        kwargs: dict[str, Any],
        torch: Any,
        show_progress: bool = False,
    ) -> None:
        self.config, self.envs, self.kwargs, self.torch = config, envs, kwargs, torch
        self.show_progress = show_progress  # a bar over an exact evaluation's states
        self.last_exact: Any = None  # the newest exact evaluation (ExactResult)

    def run(self, policy: Any, episodes: int | None, seed_base: int) -> dict:
        """Mean return, its 95 % CI, success rate and parse rate over the seeds ``seed_base``,
        ... (``EvalResult.summary``); or the greedy policy's exact expected return."""
        if self.exact():
            return self.exact_value(policy)
        cfg = self.config
        act = partial(policy.act, greedy=cfg.eval.greedy)
        if cfg.eval.greedy and cfg.policy.history == 0:  # Markov and greedy: one answer a prompt
            act = cached(act, {})
        n = episodes or cfg.eval.episodes
        with self.torch.no_grad():
            return evaluate(act, self.envs, range(seed_base, seed_base + n)).summary()

    def exact(self) -> bool:
        """Whether :meth:`run` computes the exact value (see ``eval.method``)."""
        cfg = self.config
        if cfg.eval.method == "sampled" or not cfg.run.env_id:
            return False
        from llmgym.evaluation.exact import supports_exact

        possible = supports_exact(cfg.run.env_id, self.kwargs)
        possible = possible and cfg.eval.greedy and cfg.policy.history == 0
        if cfg.eval.method == "exact" and not possible:
            raise TrainingError(
                f"Exact evaluation needs a greedy Markov policy on an env with a known model "
                f"(Blackjack, FrozenLake, Taxi, CliffWalking), not {cfg.run.env_id}; use "
                "eval_method=sampled."
            )
        return possible

    def exact_value(self, policy: Any) -> dict[str, Any]:
        """The greedy policy's exact expected return, in :meth:`run`'s format."""
        from llmgym.evaluation.exact import exact_value

        def act(observations: list[str], infos: list[dict[str, Any]]) -> list[str]:
            return [s.text for s in policy.act(observations, infos, greedy=True)]

        start = time.perf_counter()
        with self.torch.no_grad(), _states_bar(self.show_progress) as progress:
            result = exact_value(self.config.run.env_id, act, self.kwargs, progress=progress)
        self.last_exact = result  # the actions it took, for the run's record
        wall = time.perf_counter() - start
        return EvalResult.exact(result.value, result.parse_rate, wall).summary()

    def plan(self, episodes: int | None = None) -> str:
        """How :meth:`run` measures, and how to change it (printed before an evaluation)."""
        cfg = self.config.eval
        who = "the greedy policy" if cfg.greedy else "the sampling policy"
        if cfg.env_kwargs:  # evaluated elsewhere than it trains
            who += " on " + ", ".join(f"{k}={v}" for k, v in cfg.env_kwargs.items())
        if self.exact():
            return (
                f"the exact value of {who} from the env's model (eval.method={cfg.method}; "
                "--set eval.method=sampled plays episodes instead)"
            )
        n = episodes or cfg.episodes
        return (
            f"{who} over {n} episodes (eval.method={cfg.method}; --set eval.method=exact where "
            "the env allows it)"
        )


@contextmanager
def _states_bar(enabled: bool) -> Iterator[Callable[[int, int], None] | None]:
    """``exact_value``'s ``progress``: a tqdm bar over the states answered, closed after (None
    when off or tqdm is missing)."""
    try:
        from tqdm.auto import tqdm
    except ImportError:
        enabled = False
    if not enabled:
        yield None
        return
    bar = tqdm(total=0, unit=" states", desc="exact evaluation", leave=False, dynamic_ncols=True)

    def progress(done: int, total: int) -> None:
        bar.total = total
        bar.n = done
        bar.refresh()

    try:
        yield progress
    finally:
        bar.close()


__all__ = ["RunEvaluation"]
