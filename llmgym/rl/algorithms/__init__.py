"""The algorithms, one module each, and the one table that names them.

An algorithm is a module with an ``XConfig`` dataclass (a ``TrainConfig`` with the algorithm's
own fields) and the algorithm itself (:class:`AlgorithmParts`: its targets into a
``RolloutBatch`` and its loss, handed to the learner), which the ``Trainer`` composes with the
learner, the collector and the run state. ``ALGORITHMS`` maps each ``llmgym train --algo``
name to its entry; the CLI's choices and help, ``make_trainer`` and checkpoint restoring all
read it. To add an algorithm, add its module and
one entry (``docs/development.md``). ``sft.py`` is the supervised warm start that any of them
can run first (``--sft``), not an ``--algo``.

Example:
    >>> list(ALGORITHMS)
    ['ppo', 'qac', 'grpo', 'reinforce']
    >>> ALGORITHMS["qac"].config_class().__name__
    'QACConfig'
    >>> legacy_algo("ppo", {"q_critic": True, "gamma": 0.9})
    ('qac', {'gamma': 0.9})
    >>> legacy_algo("ppo", {"q_critic": False, "q_window": 0, "gamma": 0.9})
    ('ppo', {'gamma': 0.9})
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import import_module
from typing import Any, Protocol

from llmgym.errors import ConfigError


class AlgorithmParts(Protocol):
    """What the ``Trainer`` asks of an algorithm, built as
    ``Entry(config, learner, collector, state)`` (``llmgym.rl.learner.Learner``,
    ``llmgym.rl.collector.Collector``, ``llmgym.rl.state.RunState``). Optional methods:
    ``collect()`` (episodes of one iteration; default the collector's), and for checkpoints
    ``extra_state()`` (JSON), ``extra_tensors()`` (safetensors) and
    ``load_extra_state(state, tensors)``."""

    def update(self, episodes: list[Any], acted: list[Any] | None) -> dict[str, float]:
        """The targets into a ``RolloutBatch`` and the loss through ``learner.run_epochs``;
        returns metrics. ``acted``: the samples' outputs under the acting weights, when
        already computed."""
        ...


@dataclass(frozen=True)
class Algorithm:
    """One ``--algo`` entry: its config class and the algorithm (or ``"module:Name"``
    strings, imported when first used, so the table costs no torch import) and a one-line
    summary."""

    config: type | str
    algorithm: Any
    summary: str

    def config_class(self) -> type:
        """The config dataclass."""
        return _resolve(self.config)

    def algorithm_class(self) -> Any:
        """What builds the algorithm: ``algorithm_class()(config, learner, collector, state)``."""
        return _resolve(self.algorithm)


def _resolve(target: Any) -> Any:
    if not isinstance(target, str):
        return target
    module, _, name = target.partition(":")
    return getattr(import_module(module), name)


_HERE = __name__
ALGORITHMS: dict[str, Algorithm] = {
    "ppo": Algorithm(
        f"{_HERE}.ppo:PPOConfig",
        f"{_HERE}.ppo:PPO",
        "PPO: clipped surrogate, a value head as critic, GAE across turns",
    ),
    "qac": Algorithm(
        f"{_HERE}.qac:QACConfig",
        f"{_HERE}.qac:make_qac",
        "Q-critic actor-critic: a critic of every valid action, the actor fitted to its "
        "improved policy (the recipes where the language model itself learns)",
    ),
    "grpo": Algorithm(
        f"{_HERE}.grpo:GRPOConfig",
        f"{_HERE}.grpo:GRPO",
        "GRPO: advantages relative to a group of episodes from one seed, no critic",
    ),
    "reinforce": Algorithm(
        f"{_HERE}.reinforce:ReinforceConfig",
        f"{_HERE}.reinforce:Reinforce",
        "REINFORCE with a baseline and a KL penalty to the reference model",
    ),
}
"""``--algo`` name -> its entry."""


def algorithm(name: str) -> Algorithm:
    """The entry of an ``--algo`` name; a ConfigError lists the names."""
    try:
        return ALGORITHMS[name]
    except (KeyError, TypeError):
        raise ConfigError(
            f"Unknown algorithm {name!r}; choose one of {', '.join(ALGORITHMS)}."
        ) from None


#: The Q-critic's own settings, once PPO's (dropped with ``q_critic=false``).
QAC_ONLY = ("q_step", "q_target", "q_window", "q_ridge")


def legacy_algo(algo: str, values: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """``(algo, values)`` of before the Q-critic was its own algorithm, as they are now: PPO
    with ``q_critic`` true is ``qac``; the ``q_critic`` key itself is dropped. The one mapping
    that lets records, checkpoints and ``--resume`` of such runs work."""
    if "q_critic" not in values:
        return algo, values
    if algo == "ppo" and values["q_critic"]:
        return "qac", {k: v for k, v in values.items() if k != "q_critic"}
    # q_critic=false: PPO's own; the Q-critic's settings did nothing there (saved configs hold
    # them at their defaults)
    return algo, {k: v for k, v in values.items() if k != "q_critic" and k not in QAC_ONLY}


def summary_help() -> str:
    """The ``--algo`` option's help: each name and its summary."""
    return "; ".join(f"{name}: {entry.summary}" for name, entry in ALGORITHMS.items()) + "."


__all__ = ["ALGORITHMS", "Algorithm", "AlgorithmParts", "algorithm", "legacy_algo", "summary_help"]
