"""Zero-shot transfer of the committed Blackjack and FrozenLake RL policies to held-out text
variants (issue 53, deliverable 2), with no training.

Each committed policy (a record in benchmarks/results/rl/*.json whose ``weights`` is set, and
the best-evaluated policies some records keep under ``best_eval.weights``) is evaluated
exactly (greedy, from the transition model: ``llmgym.agents.evaluate.evaluate_exact``) on its
own env, then on the same env with ``wording=alt``, ``action_names=alt``, both, and
``shuffle_actions=true`` (``llmgym.envs.variants``). One cell is one (policy, variant) pair;
the JSON is rewritten after each cell and cells already in it are skipped, so an interrupted
run resumes where it stopped. ``--budget-min`` stops starting new cells after that many minutes.

The random-init controls have no committed weights, so they cannot be evaluated on a variant;
their record values are listed, and for those that ended at a constant action the constant
answer itself is evaluated exactly on each variant (no model needed): once answering the
same action under the variant's own name, once answering the base name literally.

    python benchmarks/transfer.py --threads 1                 # run (resumes), then print
    python benchmarks/transfer.py --table                     # print the table only

Writes benchmarks/results/transfer.json; benchmarks/docs_results.py makes the docs table
(block ``transfer``) from it with ``markdown_tables``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RL = ROOT / "benchmarks" / "results" / "rl"
OUTPUT = ROOT / "benchmarks" / "results" / "transfer.json"
ENVS = ("Text-Blackjack-v1", "Text-FrozenLake-v1")

#: Variant label -> env kwargs added to the record's own.
VARIANTS: dict[str, dict[str, Any]] = {
    "base": {},
    "wording=alt": {"wording": "alt"},
    "action_names=alt": {"action_names": "alt"},
    "both": {"wording": "alt", "action_names": "alt"},
    "shuffle_actions=true": {"shuffle_actions": True},
}
SHORT = {
    "base": "base",
    "wording=alt": "wording",
    "action_names=alt": "names",
    "both": "wording+names",
    "shuffle_actions=true": "shuffled",
}
#: Policies run first, in this order (the rest follow in name order).
PRIORITY = (
    "blackjack-lm-ppo-ema-s0",
    "blackjack-ppo-s0",
    "blackjack-lm-gen-s0",
    "frozenlake-lm-ppo-g08-s0",
    "frozenlake-noslip-ppo-s0",
)
COMMAND = "python benchmarks/transfer.py --threads 1 --budget-min 80"


def family(record: dict[str, Any]) -> str:
    """``lm`` (the language model alone) or ``head`` (an action head on hidden states)."""
    return str(record.get("policy") or ("head" if record.get("action_head") else "lm"))


def policies(rl: Path = RL) -> dict[str, dict[str, Any]]:
    """Every committed Blackjack or FrozenLake policy with weights on disk, by name: the
    record's final policy (``weights``), and its best-evaluated one where that is committed
    (``NAME (best)``, ``best_eval.weights``)."""
    found: dict[str, dict[str, Any]] = {}
    for path in sorted(rl.glob("*.json")):
        record = json.loads(path.read_text())
        if record.get("env_id") not in ENVS:
            continue
        base = {
            "record": path.stem,
            "env_id": record["env_id"],
            "env_kwargs": record.get("env_kwargs") or {},
            "model": record.get("model", "smollm2-135m"),
            "policy": family(record),
            "backbone": record.get("backbone", "pretrained"),
            "mode": record.get("mode", "score"),
        }
        if record.get("weights"):
            found[path.stem] = {
                **base,
                "weights": record["weights"],
                "original": record["eval_value"],
                "original_parse_rate": record.get("parse_rate"),
                "which": "final",
            }
        best = (record.get("best_eval") or {}).get("weights")
        fresh = best != record.get("weights")
        if fresh and best and best.startswith("benchmarks/") and (ROOT / best).is_dir():
            found[f"{path.stem} (best)"] = {
                **base,
                "weights": best,
                "original": record["best_eval"]["value"],
                "original_parse_rate": None,
                "which": "best",
            }
    order = [p for p in PRIORITY if p in found] + [p for p in found if p not in PRIORITY]
    return {name: found[name] for name in order}


def controls(rl: Path = RL) -> dict[str, dict[str, Any]]:
    """The random-init controls of the Blackjack and FrozenLake recipes: no weights."""
    found = {}
    for path in sorted(rl.glob("*.json")):
        record = json.loads(path.read_text())
        if record.get("env_id") in ENVS and record.get("backbone") == "random-init":
            found[path.stem] = {
                "env_id": record["env_id"],
                "env_kwargs": record.get("env_kwargs") or {},
                "policy": family(record),
                "mode": record.get("mode", "score"),
                "weights": record.get("weights"),
                "original": record["eval_value"],
                "parse_rate": record.get("parse_rate"),
                "constant_policy": record.get("constant_policy"),
            }
    return found


def cells(names: list[str], variants: list[str]) -> list[tuple[str, str]]:
    """The cells in the order they run: the priority policies on wording and names first,
    then their base and both, then the other policies the same way, shuffled order last."""
    first = [n for n in names if n in PRIORITY]
    rest = [n for n in names if n not in PRIORITY]
    waves = [
        (first, ["wording=alt", "action_names=alt"]),
        (first, ["base", "both"]),
        (rest, ["wording=alt", "action_names=alt", "base", "both"]),
        (names, ["shuffle_actions=true"]),
    ]
    ordered = []
    for group, labels in waves:
        for name in group:
            ordered += [(name, v) for v in labels if v in variants and (name, v) not in ordered]
    return ordered


def constant_values(env_id: str, env_kwargs: dict[str, Any], name: str) -> dict[str, Any]:
    """The exact value of answering the base action ``name`` everywhere, on each variant: under
    the variant's own name for that action (``same_action``) and literally (``literal``)."""
    from llmgym.envs.registration import make_eval_env
    from llmgym.evaluation.exact import exact_value

    env = make_eval_env(env_id, **env_kwargs)
    _, info = env.reset(seed=0)
    action = list(info["valid_actions"]).index(name)
    out: dict[str, Any] = {}
    for label, extra in VARIANTS.items():
        kwargs = {**env_kwargs, **extra}

        def same(observations: list[str], infos: list[dict[str, Any]]) -> list[str]:
            return [json.dumps({"action": i["valid_actions"][action]}) for i in infos]

        def literal(observations: list[str], infos: list[dict[str, Any]]) -> list[str]:
            return [json.dumps({"action": name})] * len(infos)

        a, b = exact_value(env_id, same, kwargs), exact_value(env_id, literal, kwargs)
        out[label] = {
            "same_action": a.value,
            "same_action_parse_rate": a.parse_rate,
            "literal": b.value,
            "literal_parse_rate": b.parse_rate,
        }
    return out


def load(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text()) if path.exists() else {}


def save(data: dict[str, Any], path: Path) -> None:
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(data, indent=1) + "\n")
    os.replace(tmp, path)


def run_cell(spec: dict[str, Any], label: str, device: str) -> dict[str, Any]:
    """One exact evaluation of a committed policy on one variant."""
    from llmgym.agents.evaluate import evaluate_exact

    kwargs = {**spec["env_kwargs"], **VARIANTS[label]}
    agent = f"llm:{spec['model']}@{spec['weights']}"
    start = time.perf_counter()
    result = evaluate_exact(spec["env_id"], agent, env_kwargs=kwargs, device=device)
    actions = result["actions"]
    return {
        "env_kwargs": kwargs,
        "value": result["mean_return"],
        "parse_rate": result["parse_rate"],
        "states": result["states"],
        "mode": result["mode"],
        # the action id taken in each state, states in sorted(str(raw observation)) order
        "actions": "".join(str(actions[k]) for k in sorted(actions)),
        "wall_s": round(time.perf_counter() - start, 1),
    }


def _commit() -> str:
    """The checked-out commit, with ``+dirty`` when tracked files under llmgym/ differ from it."""
    import subprocess

    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True).stdout

    head = git("rev-parse", "HEAD").strip()
    return head + ("+dirty" if git("status", "--porcelain", "--", "llmgym").strip() else "")


def fill(data: dict[str, Any], specs: dict[str, dict[str, Any]]) -> None:
    """Derived fields: drop from the record's value, agreement with the base actions."""
    for name, row in data["policies"].items():
        row.update({k: v for k, v in specs.get(name, {}).items() if k not in row})
        base = row["cells"].get("base")
        for cell in row["cells"].values():
            cell["drop"] = cell["value"] - row["original"]
            if base and len(base["actions"]) == len(cell["actions"]):
                same = sum(a == b for a, b in zip(base["actions"], cell["actions"]))
                cell["same_actions_as_base"] = same / len(cell["actions"])


def _v(x: float | None) -> str:
    return "–" if x is None else f"{x:+.4f}"


def _env(spec: dict[str, Any]) -> str:
    env = spec["env_id"].removeprefix("Text-").removesuffix("-v1")
    slippery = spec.get("env_kwargs", {}).get("is_slippery")
    return env + (" (not slippery)" if slippery is False else "")


def markdown_tables(data: dict[str, Any]) -> str:
    """The transfer table, a parse/agreement table and the controls table, as Markdown."""
    labels = [v for v in VARIANTS if v != "base"]
    head = ["policy", "family", "mode", "env", "record", "base (measured)"] + [
        f"{SHORT[v]} (drop)" for v in labels
    ]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    parse = [
        "| policy | " + " | ".join(SHORT[v] for v in VARIANTS) + " |",
        "|---|" + "---|" * len(VARIANTS),
    ]
    for name, row in data.get("policies", {}).items():
        got = row.get("cells", {})
        base = got.get("base")
        cells_ = [
            f"{got[v]['value']:+.4f} ({got[v]['drop']:+.4f})" if v in got else "not run"
            for v in labels
        ]
        lines.append(
            f"| {name} | {row['policy']} | {row['mode']} | {_env(row)} | {_v(row['original'])} "
            f"| {_v(base['value']) if base else 'not run'} | " + " | ".join(cells_) + " |"
        )
        parse.append(
            f"| {name} | "
            + " | ".join(
                (
                    f"{got[v]['parse_rate']:.2f} / {got[v].get('same_actions_as_base', 1.0):.2f}"
                    if v in got
                    else "not run"
                )
                for v in VARIANTS
            )
            + " |"
        )
    out = "\n".join(lines) + "\n\nParse rate / share of states acted as on the base env:\n\n"
    out += "\n".join(parse) + "\n"
    ctrl = data.get("controls", {})
    if ctrl:
        out += (
            "\nRandom-init controls (no committed weights, so no variant is measured; the "
            "record's own exact value; a constant policy's answer evaluated exactly on each "
            "variant):\n\n| record | family | mode | env | record value | constant | "
            "on wording, names, both, shuffled (same action) | literal base name on names |\n"
            "|---|---|---|---|---|---|---|---|\n"
        )
        for name, row in ctrl.items():
            const = row.get("constant_values")
            same = ", ".join(f"{const[v]['same_action']:+.4f}" for v in labels) if const else "–"
            lit = (
                f"{const['action_names=alt']['literal']:+.4f} (parse "
                f"{const['action_names=alt']['literal_parse_rate']:.2f})"
                if const
                else "–"
            )
            out += (
                f"| {name} | {row['policy']} | {row['mode']} | {_env(row)} | "
                f"{_v(row['original'])} | {row.get('constant_policy') or '–'} | {same} | {lit} |\n"
            )
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output", type=Path, default=OUTPUT)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--budget-min", type=float, default=80.0)
    parser.add_argument("--policies", default="", help="comma-separated names (default: all)")
    parser.add_argument("--variants", default=",".join(VARIANTS))
    parser.add_argument("--table", action="store_true", help="print the table, run nothing")
    args = parser.parse_args(argv)

    data = load(args.output)
    if args.table:
        print(markdown_tables(data))
        return 0
    import torch

    torch.set_num_threads(args.threads)
    specs = policies()
    data.setdefault("policies", {})
    data["command"] = COMMAND
    data["machine"] = (
        f"{platform.machine()} CPU, {os.cpu_count()} cores (shared), {args.threads} torch "
        f"thread, python {platform.python_version()}, torch {torch.__version__}"
    )
    data["variants"] = VARIANTS
    ctrl = controls()
    for name, row in ctrl.items():
        if row["constant_policy"]:
            old = data.get("controls", {}).get(name, {}).get("constant_values")
            row["constant_values"] = old or constant_values(
                row["env_id"], row["env_kwargs"], row["constant_policy"]
            )
    data["controls"] = ctrl
    for name, spec in specs.items():
        data["policies"].setdefault(name, {**spec, "cells": {}})
    fill(data, specs)
    save(data, args.output)
    chosen = [p for p in args.policies.split(",") if p] or list(specs)
    start = time.monotonic()
    for name, label in cells(chosen, args.variants.split(",")):
        if label in data["policies"][name]["cells"]:
            continue
        if time.monotonic() - start > 60 * args.budget_min:
            print(f"budget of {args.budget_min} min spent; stopping before {name} {label}")
            break
        print(f"{time.strftime('%H:%M:%S')} {name} on {label} ...", flush=True)
        try:
            cell = run_cell(specs[name], label, args.device)
        except Exception as error:  # noqa: BLE001 (reported, and the next cell runs)
            print(f"  failed: {type(error).__name__}: {error}", flush=True)
            data.setdefault("errors", {})[f"{name} {label}"] = f"{type(error).__name__}: {error}"
            save(data, args.output)
            continue
        data.get("errors", {}).pop(f"{name} {label}", None)
        data["policies"][name]["cells"][label] = cell
        data["commit"] = _commit()
        fill(data, specs)
        save(data, args.output)
        print(
            f"  {cell['value']:+.4f} (drop {cell['drop']:+.4f}), parse {cell['parse_rate']:.3f}"
            f", {cell['wall_s']:.0f} s",
            flush=True,
        )
    print(markdown_tables(data))
    return 0


if __name__ == "__main__":
    sys.exit(main())
