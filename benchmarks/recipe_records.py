"""Tie each committed RL record to its recipe: check that the record's command resolves to the
recipe's config, then write the recipe's name and hash into the record.

Each recipe (the package's, ``llmgym/rl/recipes/*.toml``, and the research variants in
``experiments/recipes/``) names its records
(``benchmarks/results/rl/NAME-sSEED.json``). A record's ``command`` is parsed as ``llmgym
train`` parses it (``--recipe none``: the generic settings those commands ran on), and the
config it gives must equal the recipe's for that seed, key for key, but for where the run went
and on how many threads. Then ``recipe`` and ``recipe_hash`` (``Recipe.fingerprint``) are set in
the record; tests/recipes/test_recipes.py fails when a recipe and its records disagree.

    python benchmarks/recipe_records.py           # check, then write the fields
    python benchmarks/recipe_records.py --check   # check only; exit 1 on a disagreement
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from pathlib import Path
from typing import Any

from llmgym import recipes
from llmgym.rl.config import flat_view

#: Config keys that say where and how a run went, not what it learned.
IGNORED = {"output_dir", "num_threads", "progress", "device", "recipe"}


def command_config(command: str, with_recipes: bool = False) -> Any:
    """The plan of a record's command as ``llmgym train`` makes it (``--resume`` dropped: a
    resumed run's config is its first part's): with generic settings for a command run before
    recipes existed, else as today, where a command without ``--recipe`` runs its env's
    default recipe."""
    from llmgym.cli.train import request_from_args
    from llmgym.rl.plan import plan_run

    args = [a for a in shlex.split(command)[2:] if a != "--resume"]
    return plan_run(request_from_args(args if with_recipes else [*args, "--recipe", "none"]))


def differences(recipe: recipes.Recipe, seed: int, record: dict[str, Any]) -> dict[str, Any]:
    """Config key -> (the recipe's, the record command's) where they differ; ``algo`` and
    ``final_eval_episodes`` too."""
    from llmgym.rl import config_class

    # a record written by a trainer that knew recipes says which settings the command overrode
    plan = command_config(record["command"], with_recipes="recipe_overrides" in record)
    mine = flat_view(config_class(recipe.algo).build(recipe.values() | {"seed": seed}).to_dict())
    theirs = flat_view(plan.config.to_dict())
    diff = {
        k: (mine.get(k), theirs.get(k))
        for k in mine.keys() | theirs.keys()
        if mine.get(k) != theirs.get(k) and k not in IGNORED
    }
    if plan.algo != recipe.algo:
        diff["algo"] = (recipe.algo, plan.algo)
    final = recipe.final_eval_episodes or 1000
    if plan.final_eval_episodes != final:
        diff["final_eval_episodes"] = (final, plan.final_eval_episodes)
    return diff


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="check only; write nothing")
    args = parser.parse_args(argv)
    bad = 0
    for recipe in recipes.all_recipes(package_only=False):
        for seed, name in zip(recipe.seeds, recipe.record_names()):
            path = recipes.RECORDS_DIR / f"{name}.json"
            if not path.exists() and not _in_package(recipe):
                print(f"{name}: no record (research variant {recipe.name})")
                continue
            record = json.loads(path.read_text())
            diff = differences(recipe, seed, record)
            if diff and "--resume" in record["command"] and not _in_package(recipe):
                print(f"{name}: resumed by a command that does not repeat its settings: unchecked")
                continue
            if diff:
                bad += 1
                print(f"{name}: not recipe {recipe.name}: {diff}")
                continue
            print(f"{name}: recipe {recipe.name} ({recipe.fingerprint()})")
            if not args.check:
                _write(path, record, recipe)
    return 1 if bad else 0


def _in_package(recipe: recipes.Recipe) -> bool:
    return recipe.name in {r.name for r in recipes.all_recipes()}


def _write(path: Path, record: dict[str, Any], recipe: recipes.Recipe) -> None:
    """``recipe`` and ``recipe_hash`` after ``sft``, the record otherwise as it was."""
    out = {}
    for key, value in record.items():
        if key in ("recipe", "recipe_hash"):
            continue
        out[key] = value
        if key == "sft":
            out["recipe"], out["recipe_hash"] = recipe.name, recipe.fingerprint()
    path.write_text(json.dumps(out, indent=2))  # as llmgym train writes it


if __name__ == "__main__":
    sys.exit(main())
