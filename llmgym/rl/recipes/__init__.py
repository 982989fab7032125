"""Training recipes as data, one small TOML file each (as rl-baselines3-zoo's hyperparameter
files): the env and its kwargs, the algorithm, the policy family, the mode, the model it was
measured with, every setting that differs from the config's defaults with a one-line reason,
its goal, and the records it produced (``benchmarks/results/rl/NAME-sSEED.json``).

The package's recipes are the results table's rows (``llmgym/rl/recipes/*.toml``); research
variants live in ``experiments/recipes/`` and say ``extends = "NAME"`` plus the keys they
change. ``llmgym train ENV --recipe NAME`` trains one (explicit options and ``--set`` override
it); with no ``--recipe`` the env's default recipe applies where the model, algorithm and env
kwargs match (:func:`default_for`). ``llmgym recipes`` lists them.

Example:
    >>> recipe = get("blackjack-lm-ppo-ema")
    >>> recipe.env, recipe.algo, recipe.policy, recipe.mode, recipe.default
    ('Text-Blackjack-v1', 'qac', 'lm', 'score', True)
    >>> recipe.values()["q_window"], recipe.why("q_window")[:32]
    (40, 'Q(s, stick) does not depend on t')
    >>> default_for("Text-Blackjack-v1", "smollm2-135m").name
    'blackjack-lm-ppo-ema'
    >>> default_for("Text-Blackjack-v1", "my-model") is None  # measured on another model
    True
"""

from __future__ import annotations

import hashlib
import json
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from llmgym.errors import ConfigError

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10: the same parser from PyPI
    import tomli as tomllib

#: The package's recipes (the results table's rows).
PACKAGE_DIR = Path(__file__).resolve().parent
#: Keys of a recipe file; ``settings`` maps config keys to ``{value = ..., why = "..."}``.
KEYS = {
    "name", "title", "env", "env_kwargs", "algo", "policy", "mode", "model", "default",
    "bound_to_model", "final_eval_episodes", "seeds", "records", "goal", "settings", "extends",
    "about",
}  # fmt: skip
#: Config keys a recipe may not set: they say where and how fast a run goes, not what it learns.
LOCAL_KEYS = (
    "run.output_dir",
    "run.num_threads",
    "run.progress",
    "run.device",
    "run.seed",
    "run.recipe",
)
#: ``goal`` keys -> the test each applies to a record (all must hold).
GOAL_TESTS = {
    "min_value": lambda r, x: r["eval_value"] >= x,
    "max_episodes": lambda r, x: r["episodes"] <= x,
    "max_env_steps": lambda r, x: r["env_steps"] <= x,
    "min_parse_rate": lambda r, x: r["parse_rate"] >= x,
    "above_start": lambda r, x: r["eval_value"] >= r["start_value"] + x,
    "above_sft": lambda r, x: r["eval_value"] >= r["sft_value"] + x,
}


@dataclass(frozen=True)
class Recipe:
    """One recipe file, resolved (``extends`` applied). ``settings``: config key -> value
    (None for a null); ``reasons``: config key -> why it differs from the default."""

    name: str
    title: str
    env: str
    algo: str
    policy: str
    mode: str
    model: str
    env_kwargs: dict[str, Any] = field(default_factory=dict)
    settings: dict[str, Any] = field(default_factory=dict)
    reasons: dict[str, str] = field(default_factory=dict)
    goal: dict[str, Any] = field(default_factory=dict)
    records: str = ""
    seeds: tuple[int, ...] = ()
    default: bool = False
    bound_to_model: str = ""
    final_eval_episodes: int | None = None
    about: str = ""
    path: str = ""

    def values(self) -> dict[str, Any]:
        """The config values this recipe sets: env, model, mode and its settings (keys as
        ``TrainConfig.build`` takes them)."""
        base = {"env_id": self.env, "env_kwargs": dict(self.env_kwargs)}
        return base | {"policy.model": self.model, "policy.mode": self.mode} | self.settings

    def why(self, key: str) -> str:
        """The reason given for a setting."""
        return self.reasons[key]

    def fingerprint(self) -> str:
        """A hash of what the recipe sets (12 hex digits): a record stores its recipe's, so a
        recipe edited after its runs no longer matches them (``tests/recipes``).

        Example:
            >>> len(get("blackjack-ppo").fingerprint())
            12
        """
        fixed = {"algo": self.algo, "final_eval_episodes": self.final_eval_episodes}
        text = json.dumps(fixed | self.values(), sort_keys=True, default=str)
        return hashlib.sha256(text.encode()).hexdigest()[:12]

    def record_names(self) -> list[str]:
        """The committed records' names, one per seed (``NAME-sSEED``)."""
        return [self.records.format(seed=seed) for seed in self.seeds]

    def reached(self, record: dict[str, Any]) -> bool:
        """Whether ``record`` reached this recipe's goal (False where it has none).

        Example:
            >>> get("blackjack-ppo").reached({"eval_value": -0.0686, "episodes": 2000})
            True
        """
        tests = [(GOAL_TESTS[k], v) for k, v in self.goal.items() if k in GOAL_TESTS]
        try:
            return bool(tests) and all(test(record, x) for test, x in tests)
        except (KeyError, TypeError):  # the value the goal compares with was not recorded
            return False

    def matches(
        self, env: str, model: str, algo: str | None, mode: str | None, env_kwargs: dict
    ) -> bool:
        """Whether this recipe was measured with this env, model, algorithm (None: any) and
        mode (None: any) and the same env kwargs."""
        from llmgym.policy.models import same_model

        return (
            env == self.env
            and same_model(model, self.model)
            and algo in (None, self.algo)
            and mode in (None, self.mode)
            and env_kwargs == self.env_kwargs
        )


def recipe_dirs() -> list[Path]:
    """Where named recipes are looked up: the package's, then ``experiments/recipes`` of the
    source tree where there is one."""
    experiments = PACKAGE_DIR.parents[2] / "experiments" / "recipes"
    return [PACKAGE_DIR] + ([experiments] if experiments.is_dir() else [])


def all_recipes(package_only: bool = True) -> list[Recipe]:
    """Every recipe, the package's first (in file-name order)."""
    dirs = recipe_dirs()[:1] if package_only else recipe_dirs()
    return [read(path) for d in dirs for path in sorted(d.glob("*.toml"))]


def get(name: str) -> Recipe:
    """The recipe of a name (a package or experiments recipe) or of a ``.toml`` file path.

    Example:
        >>> get("no-such-recipe")  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        llmgym.errors.ConfigError: Unknown recipe 'no-such-recipe'; ...
    """
    if name.endswith(".toml") or "/" in name:
        return read(Path(name))
    for directory in recipe_dirs():
        if (directory / f"{name}.toml").is_file():
            return read(directory / f"{name}.toml")
    raise ConfigError(
        f"Unknown recipe {name!r}; `llmgym recipes` lists them, or pass a .toml file."
    )


def load(name: str, **overrides: Any) -> Any:
    """The trainer config of a recipe (``PPOConfig``, ``QACConfig``, ...), with ``overrides``
    (keys as ``TrainConfig.build`` takes them), for notebooks and TRL users.

    Example:
        >>> cfg = load("blackjack-lm-ppo-ema", seed=1)
        >>> type(cfg).__name__, cfg.q_window, cfg.optim.learning_rate, cfg.run.seed
        ('QACConfig', 40, 0.003, 1)
    """
    from llmgym.rl import config_class

    recipe = get(name)
    return config_class(recipe.algo).build(recipe.values() | overrides)


def default_for(
    env: str,
    model: str,
    algo: str | None = None,
    mode: str | None = None,
    env_kwargs: dict[str, Any] | None = None,
) -> Recipe | None:
    """The recipe ``llmgym train ENV`` uses with no ``--recipe``: among the package's recipes
    measured with this env, model, algorithm and mode (None: any) and exactly these env kwargs,
    the env's default one, else the first that trains the language model, else the first."""
    found = [r for r in all_recipes() if r.matches(env, model, algo, mode, env_kwargs or {})]
    found.sort(key=lambda r: (not r.default, r.policy != "lm"))
    return found[0] if found else None


def read(path: Path) -> Recipe:
    """A recipe file, with its ``extends`` resolved; a ConfigError names what is wrong."""
    data = _toml(path)
    parent = data.pop("extends", None)
    if parent is not None:
        base = get(str(parent))
        data = _merge(_as_data(base), data)
    missing = [k for k in ("name", "env", "algo", "policy", "mode", "model") if k not in data]
    if missing:
        raise ConfigError(f"Recipe {path} lacks {', '.join(missing)}.")
    settings, reasons = _settings(path, data.pop("settings", {}))
    data["seeds"] = tuple(data.get("seeds", ()))
    return Recipe(**data, settings=settings, reasons=reasons, path=str(path))


#: A recipe file is a few kilobytes; anything much larger is not one (nor is /dev/zero).
MAX_RECIPE_BYTES = 1 << 20


def _toml(path: Path) -> dict[str, Any]:
    path = Path(path)
    if path.exists() and not path.is_file():
        raise ConfigError(f"Recipe {path} is not a file; pass a recipe's name or a .toml file.")
    try:
        with path.open("rb") as f:
            raw = f.read(MAX_RECIPE_BYTES + 1)
        if len(raw) > MAX_RECIPE_BYTES:
            raise ConfigError(f"Recipe {path} is over 1 MiB; a recipe file is a few kilobytes.")
        data = tomllib.loads(raw.decode("utf-8"))
    except OSError as error:
        raise ConfigError(f"Cannot read recipe {path}: {error.strerror or error}.") from None
    except UnicodeDecodeError:
        raise ConfigError(f"Recipe {path} is not UTF-8 text.") from None
    except tomllib.TOMLDecodeError as error:
        raise ConfigError(f"Recipe {path} is not valid TOML: {error}.") from None
    unknown = sorted(set(data) - KEYS)
    if unknown:
        raise ConfigError(
            f"Recipe {path} has unknown keys {', '.join(unknown)}; "
            f"recipe keys are {', '.join(sorted(KEYS))}."
        )
    return data


def _settings(path: Path, raw: dict[str, Any]) -> tuple[dict[str, Any], dict[str, str]]:
    """``{key: {value = V, why = "..."}}`` -> (values, reasons); ``null = true`` for None."""
    from llmgym.rl.config import canonical_key

    values, reasons = {}, {}
    for key, entry in raw.items():
        ok = isinstance(entry, dict) and isinstance(entry.get("why"), str) and entry["why"]
        if not ok or ("value" in entry) == bool(entry.get("null")):
            raise ConfigError(
                f'Recipe {path}: setting {key!r} must be {{value = ..., why = "..."}} '
                '(or {null = true, why = "..."}).'
            )
        if canonical_key(key) in LOCAL_KEYS:
            raise ConfigError(f"Recipe {path}: {key} is the command's to choose, not a recipe's.")
        values[key] = None if entry.get("null") else entry["value"]
        reasons[key] = entry["why"]
    return values, reasons


def _as_data(recipe: Recipe) -> dict[str, Any]:
    """A resolved recipe as file data again (for ``extends``)."""
    data = {k: getattr(recipe, k) for k in KEYS - {"settings", "extends"}}
    data["settings"] = {
        k: ({"null": True} if v is None else {"value": v}) | {"why": recipe.reasons[k]}
        for k, v in recipe.settings.items()
    }
    data["default"] = False  # a variant is never an env's default
    return data


def _merge(base: dict[str, Any], child: dict[str, Any]) -> dict[str, Any]:
    """``child`` over ``base``; ``env_kwargs``, ``settings`` and ``goal`` merge key by key."""
    merged = dict(base)
    for key, value in child.items():
        if key in ("env_kwargs", "settings", "goal"):
            merged[key] = {**base.get(key, {}), **value}
        else:
            merged[key] = value
    return merged


#: Where the committed records are, in a source checkout (absent from an installed package).
RECORDS_DIR = PACKAGE_DIR.parents[2] / "benchmarks" / "results" / "rl"


def committed_records(recipe: Recipe, directory: Path = RECORDS_DIR) -> dict[str, dict]:
    """The recipe's committed records that exist, by name (``{}`` outside a source checkout).

    Example:
        >>> found = committed_records(get("blackjack-ppo"))
        >>> sorted(found) if found else ["blackjack-ppo-s0", "blackjack-ppo-s1", "blackjack-ppo-s2"]
        ['blackjack-ppo-s0', 'blackjack-ppo-s1', 'blackjack-ppo-s2']
    """
    found = {}
    for name in recipe.record_names():
        path = directory / f"{name}.json"
        try:
            found[name] = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
    return found


def describe_goal(recipe: Recipe, records: dict[str, dict]) -> str:
    """``"3 of 3"``: how many of the recipe's committed records reached its goal.

    Example:
        >>> describe_goal(get("blackjack-ppo"), {"blackjack-ppo-s0": {"eval_value": 0,
        ...     "episodes": 1}})
        '1 of 1'
    """
    found = [records[n] for n in recipe.record_names() if n in records]
    return f"{sum(recipe.reached(r) for r in found)} of {len(found)}"


__all__ = [
    "RECORDS_DIR",
    "Recipe",
    "all_recipes",
    "committed_records",
    "default_for",
    "describe_goal",
    "get",
    "load",
]
