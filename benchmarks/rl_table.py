"""The README's table of RL-from-scratch results, from the committed records in
benchmarks/results/rl/*.json (made by benchmarks/rl_from_scratch.sh).

    python benchmarks/rl_table.py
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

RECORDS = Path(__file__).parent / "results" / "rl"


def describe_env(record: dict) -> str:
    """The env id and its kwargs (a nested config flattened), without the training step cap.

    Example:
        >>> describe_env({"env_id": "E", "env_kwargs": {"config": {"a": 1}, "split": "train"}})
        'E (a=1, split=train)'
    """
    kwargs = {k: v for k, v in (record.get("env_kwargs") or {}).items() if k != "max_episode_steps"}
    flat = {}
    for key, value in kwargs.items():
        flat |= value if isinstance(value, dict) else {key: value}
    extra = ", ".join(f"{k}={v}" for k, v in flat.items())
    return f"{record['env_id']}" + (f" ({extra})" if extra else "")


def row(name: str, record: dict) -> str:
    start = record["start_value"]  # None: trained with --no-start-eval
    start = "not evaluated" if start is None else f"{start:+.4f}"
    value = f"{start} -> **{record['eval_value']:+.4f}**"
    if record["eval_method"] != "exact":
        value += f" ± {record['eval_ci95']:.3f}"
    minutes = f"{record['wall_s'] / 60:.1f} min"
    if record.get("resumed"):  # wall_s counts the last invocation only
        minutes = f"last of several sessions {minutes}"
    training = f"{record['episodes']} episodes, {record['env_steps']} env steps, {minutes}"
    return (
        f"| {describe_env(record)} | {record['algo']} | {record['sft']} | {training} | {value} "
        f"| {record['eval_method']} | `{name}` |"
    )


def main() -> None:
    argparse.ArgumentParser(description=__doc__.split("\n\n")[0]).parse_args()
    print("| env | algo | SFT | training | start -> final (greedy) | evaluation | record |")
    print("|---|---|---|---|---|---|---|")
    for path in sorted(RECORDS.glob("*.json")):
        print(row(path.stem, json.loads(path.read_text())))


if __name__ == "__main__":
    main()
