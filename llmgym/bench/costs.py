"""How much training each leaderboard agent used: env steps and, where recorded, wall time.

- ``random`` and the reference players (``optimal``...): none (0 steps).
- ``sb3-ALGO``: the SB3 model's training record, from ``sb3_models.json`` in the bench output
  folder (a list of records) or else beside the policy the bench plays (the SB3 cache, else the
  policies a checkout commits).
- ``llm:MODEL`` (zero-shot): none; ``llm:MODEL@RUN``: the run's ``result.json`` (env steps
  and wall time), else the training record in ``RUN_RECORDS`` whose ``weights`` is that
  folder (``llmgym train --result-json``: env steps, wall time, command), else the folder's
  ``trainer_state.json`` (env steps).
- Anything else, or a record that cannot be found: unknown (None).

A record's ``machine``, where it has one, says what its wall time was measured on.

Example:
    >>> from pathlib import Path
    >>> training_cost("random", "Text-Blackjack-v1", Path("nowhere"))
    TrainingCost(env_steps=0, wall_s=0.0, machine=None)
    >>> training_cost("llm:smollm2-135m,mode=generate", "Text-Blackjack-v1", Path("nowhere"))
    TrainingCost(env_steps=0, wall_s=0.0, machine=None)
    >>> training_cost("llm:smollm2-135m@no/such/run", "Text-Blackjack-v1", Path("nowhere")) is None
    True
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from llmgym.envs.registration import base_env_id

SB3_RECORDS = "sb3_models.json"
#: Where the records of the committed training runs are (``NAME.json``, relative to the
#: working directory like the checkpoint paths agents name), found by their ``weights``.
RUN_RECORDS = Path("benchmarks/results/rl")
_UNTRAINED = ("random", "optimal", "heuristic", "expert")


@dataclass(frozen=True)
class TrainingCost:
    """Training env steps, its wall time in seconds (None when not recorded) and the machine
    that wall time was measured on (None when the record does not say)."""

    env_steps: int
    wall_s: float | None
    machine: str | None = None


def training_cost(agent: str, env_id: str, output: Path) -> TrainingCost | None:
    """The training behind ``agent`` on ``env_id`` (see the module docstring); None if unknown."""
    kind, _, argument = agent.partition(":")
    if kind in _UNTRAINED:
        return TrainingCost(0, 0.0)
    if kind.startswith("sb3-"):
        return _sb3_cost(kind.removeprefix("sb3-"), base_env_id(env_id), Path(output))
    if kind == "llm":
        checkpoint = argument.split(",")[0].partition("@")[2]
        return _run_cost(Path(checkpoint)) if checkpoint else TrainingCost(0, 0.0)
    return None


def _read(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def _sb3_cost(algo: str, base_id: str, output: Path) -> TrainingCost | None:
    records = _read(output / SB3_RECORDS)
    if not isinstance(records, list):
        records = []
    if not any(r.get("env_id") == base_id and r.get("algo") == algo for r in records):
        from llmgym.baselines.sb3 import find_model
        from llmgym.errors import AgentError

        try:  # the policy the bench played: cached, else committed in a checkout
            found = find_model(base_id, algo, 0)[1]
        except AgentError:  # no recipe for this env and algorithm
            return None
        records = [(_read(found.with_suffix(".json")) if found else None) or {}]
    for record in records:
        if record.get("env_id") == base_id and record.get("algo") == algo:
            return TrainingCost(
                int(record["timesteps"]), record.get("train_seconds"), record.get("machine")
            )
    return None


def _run_record(path: Path) -> dict[str, Any] | None:
    """The record in ``RUN_RECORDS`` whose ``weights`` is the folder ``path``, if any (or
    whose ``weights_removed`` is: a policy no longer committed, whose leaderboard rows stay)."""
    target = path.resolve()
    for file in sorted(RUN_RECORDS.glob("*.json")):
        record = _read(file)
        weights = None
        if isinstance(record, dict):
            weights = record.get("weights") or record.get("weights_removed")
        if isinstance(weights, str) and Path(weights).resolve() == target:
            return record
    return None


def _run_cost(path: Path) -> TrainingCost | None:
    result = _read(path / "result.json")
    if isinstance(result, dict) and "env_steps" in result:
        return TrainingCost(int(result["env_steps"]), result.get("wall_s"), result.get("machine"))
    state = _read(path / "trainer_state.json")
    steps = state.get("env_steps") if isinstance(state, dict) else None
    record = _run_record(path)
    # The record counts only if it describes these weights (not an earlier run's).
    if record is not None and "env_steps" in record and steps in (None, record["env_steps"]):
        return TrainingCost(int(record["env_steps"]), record.get("wall_s"), record.get("machine"))
    return None if steps is None else TrainingCost(int(steps), None)


__all__ = ["RUN_RECORDS", "SB3_RECORDS", "TrainingCost", "training_cost"]
