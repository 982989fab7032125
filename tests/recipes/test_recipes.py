"""Recipes as data (issue 50): files that read back, a default that learns and says so, records
that match their recipes, and the algorithm table."""

from __future__ import annotations

import dataclasses
import importlib.util
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from llmgym import recipes
from llmgym.cli import app
from llmgym.errors import ConfigError
from llmgym.rl.config import canonical_key, default_value
from llmgym.rl.plan import TrainRequest, plan_run

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = recipes.all_recipes()
EXPERIMENTS = [r for r in recipes.all_recipes(package_only=False) if r not in PACKAGE]


def _script(name: str):
    spec = importlib.util.spec_from_file_location(name, ROOT / "benchmarks" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("recipe", PACKAGE + EXPERIMENTS, ids=lambda r: r.name)
def test_a_recipe_reads_builds_and_explains_every_setting(recipe):
    from llmgym.rl import config_class

    assert recipe.name == Path(recipe.path).stem
    cls = config_class(recipe.algo)
    config = cls.build(recipe.values())  # every key is a config key, every value valid
    config.validate()
    assert recipe.policy in ("lm", "head") and recipe.goal.get("text")
    for key, value in recipe.settings.items():
        assert recipe.why(key).strip(), key
        section, _, name = canonical_key(key).partition(".")
        got = getattr(getattr(config, section), name) if name else getattr(config, section)
        assert got == value, key
    if recipe in PACKAGE:  # the package's files hold only what differs from the defaults
        same = [k for k, v in recipe.settings.items() if v == default_value(cls, k)]
        inherited = {"optim.average_decay"}  # blackjack-lm-ppo undoes its parent's averaging
        assert set(same) <= inherited, same


def test_a_recipe_file_round_trips_and_extends(tmp_path):
    base = recipes.get("blackjack-ppo")
    child = tmp_path / "faster.toml"
    child.write_text(
        'extends = "blackjack-ppo"\nname = "faster"\n'
        '[settings]\n"optim.learning_rate" = { value = 0.001, why = "a test" }\n'
        'target_kl = { null = true, why = "never stop early" }\n'
    )
    got = recipes.get(str(child))
    assert got.settings == base.settings | {"optim.learning_rate": 0.001, "target_kl": None}
    assert got.env == base.env and got.algo == base.algo and not got.default
    assert got.fingerprint() != base.fingerprint()
    config = recipes.load(str(child), seed=3)
    assert config.optim.learning_rate == 0.001 and config.target_kl is None and config.run.seed == 3


@pytest.mark.parametrize(
    "text, words",
    [
        ('name = "x"\nenv = "Text-Blackjack-v1"\n', "lacks"),
        ("name = [", "not valid TOML"),
        ('oops = 1\nname = "x"', "unknown keys oops"),
        (
            'name="x"\nenv="E"\nalgo="ppo"\npolicy="lm"\nmode="score"\nmodel="m"\n'
            "[settings]\ngamma = 0.9\n",
            "must be {value",
        ),
        (
            'name="x"\nenv="E"\nalgo="ppo"\npolicy="lm"\nmode="score"\nmodel="m"\n'
            '[settings]\n"run.seed" = { value = 1, why = "w" }\n',
            "the command's to choose",
        ),
    ],
)
def test_a_bad_recipe_file_is_one_sentence(tmp_path, text, words):
    path = tmp_path / "bad.toml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=words):
        recipes.get(str(path))


@pytest.mark.parametrize("path, words", [("/dev/zero", "not a file"), ("/", "not a file")])
def test_a_recipe_path_that_is_no_file_is_refused_before_it_is_read(path, words):
    with pytest.raises(ConfigError, match=words):  # /dev/zero once read without end
        recipes.get(path)


def test_a_huge_recipe_file_is_refused(tmp_path):
    path = tmp_path / "huge.toml"
    path.write_text("# " + "x" * (1 << 20))
    with pytest.raises(ConfigError, match="over 1 MiB"):
        recipes.get(str(path))


def test_each_record_ran_its_recipe_and_stores_its_hash():
    """The recipe resolves to exactly the config each of its records' commands ran (parsed as
    ``llmgym train`` parses it), and each record stores the recipe's name and hash: editing a
    recipe after its runs fails here (``benchmarks/recipe_records.py`` rewrites the hashes once
    the runs are made again)."""
    script = _script("recipe_records")
    for recipe in PACKAGE:
        records = recipes.committed_records(recipe)
        assert sorted(records) == sorted(recipe.record_names()), recipe.name
        for seed, name in zip(recipe.seeds, recipe.record_names()):
            record = records[name]
            assert record["recipe"] == recipe.name, name
            assert record["recipe_hash"] == recipe.fingerprint(), name
            assert script.differences(recipe, seed, record) == {}, name


def test_each_research_variant_that_has_records_ran_it():
    """``experiments/recipes``: the variants' records (those not resumed by a bare
    ``--resume``, whose commands do not repeat their settings) store their recipe's hash."""
    checked = 0
    for recipe in EXPERIMENTS:
        for record in recipes.committed_records(recipe).values():
            if "recipe" not in record:
                assert "--resume" in record["command"], recipe.name
                continue
            assert record["recipe_hash"] == recipe.fingerprint(), recipe.name
            checked += 1
    assert checked >= 20


def test_the_table_and_the_goals_agree_with_the_records():
    result = CliRunner().invoke(app, ["recipes"], env={"COLUMNS": "250"})
    assert result.exit_code == 0, result.output
    for recipe in PACKAGE:
        assert recipe.name in result.output
    # the README's headline: the LM alone reached Blackjack's goal on 2 of 3 seeds (records
    # made again on 2026-11-29, twice)
    ema = recipes.get("blackjack-lm-ppo-ema")
    assert recipes.describe_goal(ema, recipes.committed_records(ema)) == "2 of 3"
    lm_cartpole = recipes.get("cartpole-lm-ppo")
    assert recipes.describe_goal(lm_cartpole, recipes.committed_records(lm_cartpole)) == "0 of 1"
    bad = CliRunner().invoke(app, ["recipes", "Text-Nope-v0"])
    assert bad.exit_code == 2 and "No recipe for" in bad.output


def test_each_env_has_at_most_one_default_and_it_met_its_goal():
    """The default is the recipe that reached its goal with the language model itself where
    one exists, else the best head recipe (one per env and env kwargs)."""
    defaults = [r for r in PACKAGE if r.default]
    keys = [(r.env, json.dumps(r.env_kwargs, sort_keys=True)) for r in defaults]
    assert len(keys) == len(set(keys))
    for recipe in defaults:
        records = recipes.committed_records(recipe)
        assert any(recipe.reached(r) for r in records.values()), recipe.name
        rivals = [r for r in PACKAGE if (r.env, r.env_kwargs) == (recipe.env, recipe.env_kwargs)]
        lm_met = [
            r for r in rivals
            if r.policy == "lm"
            and all(r.reached(x) for x in recipes.committed_records(r).values())
        ]  # fmt: skip
        if lm_met:
            assert recipe.policy == "lm", recipe.name


def test_the_default_recipe_is_chosen_printed_and_refused_for_another_model():
    plan = plan_run(TrainRequest("Text-Blackjack-v1", given={"run.seed": 2}))
    assert plan.recipe.name == "blackjack-lm-ppo-ema" and plan.algo == "qac"
    assert plan.config.run.recipe == "blackjack-lm-ppo-ema" and plan.config.run.seed == 2
    assert plan.notes[0].startswith("Recipe blackjack-lm-ppo-ema: the default for")
    # another model, another algorithm or other env kwargs: generic settings, said so
    other = plan_run(TrainRequest("Text-Blackjack-v1", given={"policy.model": "tiny"}))
    assert other.recipe is None and other.algo == "ppo"
    assert other.notes[0] == (
        "No recipe for tiny / ppo / no env kwargs: generic settings, not known to learn."
    )
    reinforce = plan_run(TrainRequest("Text-Blackjack-v1", algo="reinforce"))
    assert reinforce.recipe is None and "/ reinforce /" in reinforce.notes[0]
    ppo = plan_run(TrainRequest("Text-Blackjack-v1", algo="ppo"))  # the best PPO recipe
    assert ppo.recipe.name == "blackjack-ppo"
    # FrozenLake: gymnasium's default map is slippery, so the slippery recipe applies; the
    # LM recipe only where the user asks for its env kwargs (a recipe never changes them)
    lake = plan_run(TrainRequest("Text-FrozenLake-v1"))
    assert lake.recipe.name == "frozenlake-slippery-ppo-t1g" and lake.config.run.env_kwargs == {}
    kwargs = {"is_slippery": False, "max_episode_steps": 30}
    lm = plan_run(TrainRequest("Text-FrozenLake-v1", env_kwargs=kwargs))
    assert lm.recipe.name == "frozenlake-lm-ppo-g08"
    none = plan_run(TrainRequest("Text-Blackjack-v1", recipe="none"))
    assert none.recipe is None and none.algo == "ppo" and "--recipe none" in none.notes[0]


def test_an_explicit_recipe_applies_its_env_kwargs_and_options_override_it():
    plan = plan_run(
        TrainRequest(
            "Text-FrozenLake-v1",
            recipe="frozenlake-lm-ppo-g08",
            given={"optim.learning_rate": 1e-3, "gamma": 0.5},
        )
    )
    assert plan.config.run.env_kwargs == {"is_slippery": False, "max_episode_steps": 30}
    assert "env kwargs is_slippery=false, max_episode_steps=30" in plan.notes[0]
    assert plan.config.optim.learning_rate == 1e-3 and plan.config.gamma == 0.5
    assert plan.config.q_window == 10  # the rest is the recipe's
    assert plan.overrides == {"optim.learning_rate": 1e-3, "gamma": 0.5}
    with pytest.raises(ConfigError, match="is for Text-Blackjack-v1, not Text-FrozenLake-v1"):
        plan_run(TrainRequest("Text-FrozenLake-v1", recipe="blackjack-ppo"))
    with pytest.raises(ConfigError, match="Unknown recipe 'nope'"):
        plan_run(TrainRequest("Text-FrozenLake-v1", recipe="nope"))


def test_train_prints_the_recipe_first_and_records_it(tmp_path):
    out = tmp_path / "run"
    result = CliRunner().invoke(
        app,
        ["train", "Text-Blackjack-v1", "--recipe", "blackjack-ppo", "--model", "tiny",
         "--episodes", "8", "--episodes-per-update", "8", "--num-envs", "8", "--output",
         str(out), "--no-progress", "--threads", "1", "--final-eval-episodes", "8"],
        terminal_width=200,
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert result.output.startswith("Recipe blackjack-ppo: as asked")
    record = json.loads((out / "result.json").read_text())
    assert record["recipe"] == "blackjack-ppo" and record["algo"] == "ppo"
    assert record["versions"]["torch"] and record["versions"]["transformers"]
    assert record["recipe_hash"] == recipes.get("blackjack-ppo").fingerprint()
    assert record["recipe_overrides"] == {
        "policy.model": "tiny",
        "run.total_episodes": 8,
        "run.episodes_per_update": 8,
    }
    assert json.loads((out / "run.json").read_text())["config"]["run"]["recipe"] == "blackjack-ppo"


@pytest.fixture(scope="module")
def qwen2(tmp_path_factory):
    from llmgym.policy.testing import tiny_model_dir

    return str(tiny_model_dir("qwen2", tmp_path_factory.mktemp("qwen2")))


@pytest.mark.parametrize("recipe", PACKAGE, ids=lambda r: r.name)
def test_every_recipe_builds_for_a_second_architecture_or_says_it_is_bound(recipe, qwen2, tmp_path):
    from llmgym.rl import make_trainer

    small = {"policy.model": qwen2, "run.num_envs": 2, "run.episodes_per_update": 2,
             "run.output_dir": str(tmp_path), "run.progress": False, "sft.source": "none",
             "run.device": "cpu"}  # fmt: skip
    values = recipe.values() | small
    if recipe.bound_to_model:  # its layer indices are SmolLM2-135M's: refused, one sentence
        with pytest.raises(ConfigError, match="head_layers must be"):
            make_trainer(recipe.algo, **values)
        return
    trainer = make_trainer(recipe.algo, **values)
    assert trainer.algo == recipe.algo
    base = getattr(trainer.model, "get_base_model", lambda: trainer.model)()  # LoRA or frozen
    assert base.config.model_type == "qwen2"


def test_the_python_api_returns_the_config():
    cfg = recipes.load("frozenlake-lm-ppo-g08")
    assert type(cfg).__name__ == "QACConfig" and cfg.gamma == 0.8
    assert cfg.run.env_kwargs == {"is_slippery": False, "max_episode_steps": 30}
    assert dataclasses.is_dataclass(cfg)


def test_the_reproduction_commands_in_the_docs_name_recipes_that_exist():
    text = (ROOT / "docs" / "recipes.md").read_text()
    for recipe in PACKAGE:
        assert recipe.name in text, recipe.name
