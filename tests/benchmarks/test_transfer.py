"""benchmarks/transfer.py builds its table from transfer.json alone (no model is loaded here):
drops against the record's value, agreement with the base actions, cells not run yet, and
the random-init controls."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def transfer():
    spec = importlib.util.spec_from_file_location("transfer", ROOT / "benchmarks" / "transfer.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def cell(value: float, actions: str, parse: float = 1.0) -> dict:
    return {"value": value, "parse_rate": parse, "actions": actions, "states": len(actions)}


def fake() -> dict:
    return {
        "policies": {
            "lake-lm": {
                "record": "lake-lm",
                "env_id": "Text-FrozenLake-v1",
                "env_kwargs": {"is_slippery": False},
                "policy": "lm",
                "backbone": "pretrained",
                "mode": "score",
                "original": 1.0,
                "cells": {
                    "base": cell(1.0, "1213"),
                    "action_names=alt": cell(0.0, "3333", parse=0.5),
                },
            }
        },
        "controls": {
            "jack-random": {
                "env_id": "Text-Blackjack-v1",
                "env_kwargs": {},
                "policy": "lm",
                "mode": "score",
                "weights": None,
                "original": -0.1829,
                "constant_policy": "stick",
                "constant_values": {
                    label: {
                        "same_action": -0.1829,
                        "same_action_parse_rate": 1.0,
                        "literal": -0.1829 if label != "action_names=alt" else -0.5,
                        "literal_parse_rate": 0.0 if "names" in label else 1.0,
                    }
                    for label in (
                        "base",
                        "wording=alt",
                        "action_names=alt",
                        "both",
                        "shuffle_actions=true",
                    )
                },
            }
        },
    }


def test_table_from_a_fake_json(transfer):
    data = fake()
    transfer.fill(data, {})
    got = data["policies"]["lake-lm"]["cells"]["action_names=alt"]
    assert got["drop"] == -1.0 and got["same_actions_as_base"] == 0.25
    table = transfer.markdown_tables(data)
    row = next(line for line in table.splitlines() if line.startswith("| lake-lm | lm"))
    cols = [c.strip() for c in row.strip("|").split("|")]
    assert cols[:6] == ["lake-lm", "lm", "score", "FrozenLake (not slippery)", "+1.0000", "+1.0000"]
    assert cols[6] == "not run" and cols[7] == "+0.0000 (-1.0000)"
    assert "| lake-lm | 1.00 / 1.00 | not run | 0.50 / 0.25 |" in table
    assert "| jack-random | lm | score | Blackjack | -0.1829 | stick | " in table
    assert "-0.5000 (parse 0.00)" in table


def test_cells_run_the_priority_policies_first(transfer):
    names = ["zeta", "blackjack-ppo-s0", "blackjack-lm-ppo-ema-s0"]
    order = transfer.cells(names, list(transfer.VARIANTS))
    assert order[:4] == [
        ("blackjack-ppo-s0", "wording=alt"),
        ("blackjack-ppo-s0", "action_names=alt"),
        ("blackjack-lm-ppo-ema-s0", "wording=alt"),
        ("blackjack-lm-ppo-ema-s0", "action_names=alt"),
    ]
    assert order[-1] == ("blackjack-lm-ppo-ema-s0", "shuffle_actions=true")
    assert len(order) == len(set(order)) == 3 * len(transfer.VARIANTS)


def test_the_committed_json_makes_a_table(transfer):
    data = json.loads((ROOT / "benchmarks" / "results" / "transfer.json").read_text())
    assert "| policy | family |" in transfer.markdown_tables(data)
