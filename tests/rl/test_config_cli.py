"""One source of values and checks (issue 34 item 4): a bad config value fails in the config
dataclasses, in one sentence, the same through ``PPOConfig.build(...).validate()``, through
``llmgym train --set KEY=VALUE`` and through the option that sets the key, before any model
loads; the command exits with code 2 and no traceback."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from llmgym.cli import app
from llmgym.cli.checks import key_values
from llmgym.errors import ConfigError, TrainingError
from llmgym.rl import config_class

sys.path.insert(0, str(Path(__file__).parents[1] / "support"))
from bandit import register  # noqa: E402

BANDIT = register("a")

# (algo, KEY=VALUE as typed after --set, the start of the sentence)
BAD_VALUES = [
    ("ppo", "total_env_steps=0", "run.total_env_steps must be at least 1, not 0."),
    ("ppo", "total_env_steps=-1", "run.total_env_steps must be at least 1"),
    ("ppo", "total_env_steps=1e30", "run.total_env_steps must be a whole number, not 1e+30."),
    ("ppo", "total_env_steps=NaN", "run.total_env_steps must be a whole number, not nan."),
    ("ppo", "total_episodes=-5", "run.total_episodes must be at least 0"),
    ("ppo", "num_envs=0", "run.num_envs must be a whole number from 1 to 4,096, or auto, not 0."),
    ("ppo", "num_envs=eight", "run.num_envs must be a whole number from 1 to 4,096, or auto"),
    ("ppo", "num_envs=2.5", "run.num_envs must be a whole number from 1 to 4,096, or auto"),
    ("ppo", "episodes_per_update=0", "run.episodes_per_update must be at least 1"),
    ("ppo", "run.seed=-1", "run.seed must be in [0, 4294967295], not -1."),
    ("ppo", "device=tpu", "run.device must be one of auto, cpu, cuda, cuda:N, mps, not 'tpu'."),
    ("ppo", "log_every=0", "run.log_every must be at least 1"),
    ("ppo", "kl_warn=inf", "run.kl_warn must be a finite number, not inf."),
    ("ppo", "collapse_warn=1", "run.collapse_warn must be true or false, not 1."),
    ("ppo", "env_kwargs=3", "run.env_kwargs must be a mapping"),
    ("ppo", "minibatch_size=0", "optim.minibatch_size must be at least 1"),
    ("ppo", "micro_batch_size=-1", "optim.micro_batch_size must be a whole number of at least 1"),
    ("ppo", "learning_rate=nan", "optim.learning_rate must be a finite number, not nan."),
    ("ppo", "learning_rate=inf", "optim.learning_rate must be a finite number, not inf."),
    ("ppo", "learning_rate=-inf", "optim.learning_rate must be a finite number, not -inf."),
    ("ppo", "learning_rate=0", "optim.learning_rate must be above 0, not 0."),
    ("ppo", "learning_rate=-1", "optim.learning_rate must be above 0, not -1."),
    ("ppo", "learning_rate=1e30", "optim.learning_rate must be at most 10, not 1e+30."),
    ("ppo", "learning_rate=fast", "optim.learning_rate must be a number, not 'fast'."),
    ("ppo", "learning_rate=true", "optim.learning_rate must be a number, not True."),
    ("ppo", "head_lr=NaN", "optim.head_lr must be a finite number, not nan."),
    ("ppo", "head_lr=fast", "optim.head_lr must be a number or null, not 'fast'."),
    ("ppo", "head_optimizer=lion", "optim.head_optimizer must be one of sgd, adamw, not 'lion'."),
    ("ppo", "max_grad_norm=0", "optim.max_grad_norm must be above 0, not 0."),
    ("ppo", "weight_decay=-0.1", "optim.weight_decay must be at least 0"),
    ("ppo", "temperature=0", "policy.temperature must be above 0"),
    ("ppo", "policy.temperature=nan", "policy.temperature must be a finite number, not nan."),
    ("ppo", "temperature=inf", "policy.temperature must be a finite number, not inf."),
    ("ppo", "temperature=hot", "policy.temperature must be a number, not 'hot'."),
    ("ppo", "top_p=0", "policy.top_p must be in (0, 1], not 0."),
    ("ppo", "top_p=1.5", "policy.top_p must be in (0, 1], not 1.5."),
    ("ppo", "history=-1", "policy.history must be at least 0"),
    ("ppo", "max_new_tokens=0", "policy.max_new_tokens must be at least 1"),
    ("ppo", "mode=chat", "policy.mode must be one of score, generate, not 'chat'."),
    ("ppo", "normalization=mean", "policy.normalization must be one of sum, token, word"),
    ("ppo", "dtype=int8", "policy.dtype must be one of auto, float32, bfloat16, float16"),
    ("ppo", "backend=sglang", "policy.backend must be one of hf, vllm, vllm-inprocess"),
    ("ppo", "model=", "policy.model must be a model name, not ''."),
    ("ppo", "head_layers=[]", "policy.head_layers must be a non-empty list"),
    ("ppo", 'head_layers=["4"]', "policy.head_layers must be a list of whole numbers or null"),
    ("ppo", "head_whiten_eps=-1", "policy.head_whiten_eps must be at least 0"),
    ("ppo", "lora.r=0", "lora.r must be at least 1, not 0."),
    ("ppo", "lora_r=abc", "lora.r must be a whole number, not 'abc'."),
    ("ppo", "lora_dropout=1", "lora.dropout must be in [0, 1), not 1."),
    ("ppo", "lora_target_modules=q_proj", "lora.target_modules must be a list of strings"),
    ("ppo", "sft_epochs=-1", "sft.epochs must be at least 0"),
    ("ppo", "sft_batch_size=0", "sft.batch_size must be at least 1"),
    ("ppo", "sft_learning_rate=Infinity", "sft.learning_rate must be a finite number"),
    ("ppo", "eval_episodes=0", "eval.episodes must be at least 1, not 0."),
    ("ppo", "eval.every=-1", "eval.every must be at least 0"),
    ("ppo", "eval_method=monte-carlo", "eval.method must be one of auto, exact, sampled"),
    ("ppo", "min_entropy=-0.1", "min_entropy must be at least 0"),
    ("ppo", "gamma=1.5", "gamma must be in [0, 1], not 1.5."),
    ("ppo", "gamma=-0.1", "gamma must be in [0, 1], not -0.1."),
    ("ppo", "gamma=null", "gamma must be a number, not None."),
    ("ppo", "gamma=nan", "gamma must be a finite number, not nan."),
    ("ppo", "gae_lambda=2", "gae_lambda must be in [0, 1], not 2."),
    ("ppo", "clip_coef=-0.2", "clip_coef must be at least 0"),
    ("ppo", "vf_coef=inf", "vf_coef must be a finite number, not inf."),
    ("ppo", "update_epochs=0", "update_epochs must be at least 1"),
    ("ppo", "target_kl=0", "target_kl must be above 0"),
    ("ppo", "value_lr=1e30", "value_lr must be at most 10, not 1e+30."),
    ("ppo", "value_norm_decay=1.0", "value_norm_decay must be in [0, 1), not 1.0."),
    ("ppo", "value_hidden=0", "value_hidden must be at least 1"),
    ("grpo", "group_size=1", "group_size must be at least 2"),
    ("grpo", "group_level=turn", "group_level must be one of episode, step, not 'turn'."),
    ("grpo", "beta=-1", "beta must be at least 0"),
    ("grpo", "clip_coef=nan", "clip_coef must be a finite number, not nan."),
    ("grpo", "max_branch_depth=0", "max_branch_depth must be at least 1"),
    ("grpo", "action_ent_coef=-0.1", "action_ent_coef must be at least 0"),
    ("reinforce", "baseline=mean", "baseline must be one of batch, ema, none, not 'mean'."),
    ("reinforce", "ema_decay=1", "ema_decay must be in [0, 1), not 1."),
    ("reinforce", "kl_coef=-0.05", "kl_coef must be at least 0"),
    ("reinforce", "ref_refresh_every=-1", "ref_refresh_every must be at least 0"),
]
IDS = [f"{algo}-{item}" for algo, item, _ in BAD_VALUES]


def _config_error(algo: str, values: dict) -> Exception:
    with pytest.raises(ConfigError) as info:
        config_class(algo).build(values).validate()
    return info.value


@pytest.mark.parametrize("algo, item, sentence", BAD_VALUES, ids=IDS)
def test_the_config_refuses_a_bad_value_in_one_sentence(algo, item, sentence):
    error = _config_error(algo, key_values([item], "--set"))
    assert isinstance(error, TrainingError)  # callers catching either keep catching it
    assert str(error).startswith(sentence), str(error)
    assert "\n" not in str(error) and str(error).endswith(".")
    assert not re.search(r"\.\s+[A-Z]", str(error))  # no second sentence


@pytest.fixture
def no_model_load(monkeypatch):
    """Fail the test if the command gets as far as building a trainer (which loads the model)."""
    import llmgym.rl.trainer

    built: list[str] = []

    def trainer(config, *args, **kwargs):
        built.append(config.algo)
        raise AssertionError("a bad value reached the trainer")

    monkeypatch.setattr(llmgym.rl.trainer, "Trainer", trainer)
    return built


def _train(tmp_path: Path, *args: str):
    argv = ["train", BANDIT, "--model", "tiny", "--no-progress", "--steps", "16"]
    argv += ["--output", str(tmp_path / "run"), *args]
    return CliRunner().invoke(app, argv)


def _one_error_line(result) -> str:
    assert isinstance(result.exception, SystemExit), repr(result.exception)
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output and "Error: Error" not in result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: "), result.output
    return lines[0].removeprefix("Error: ")


@pytest.mark.parametrize("algo, item, sentence", BAD_VALUES, ids=IDS)
def test_train_set_a_bad_value_exits_2_with_the_configs_sentence(
    algo, item, sentence, tmp_path, no_model_load
):
    result = _train(tmp_path, "--algo", algo, "--set", item)
    message = _one_error_line(result)
    assert message == str(_config_error(algo, key_values([item], "--set")))
    assert not no_model_load and not (tmp_path / "run").exists()


@pytest.mark.parametrize(
    "option, item",
    [
        (["--num-envs", "0"], "num_envs=0"),
        (["--steps", "0"], "total_env_steps=0"),
        (["--episodes", "-1"], "total_episodes=-1"),
        (["--episodes-per-update", "0"], "episodes_per_update=0"),
        (["--lr", "nan"], "learning_rate=nan"),
        (["--lr", "inf"], "optim.learning_rate=inf"),
        (["--lr", "-1"], "learning_rate=-1.0"),
        (["--lr", "1e30"], "learning_rate=1e30"),
        (["--seed", "-1"], "seed=-1"),
        (["--eval-every", "-1"], "eval_every=-1"),
        (["--eval-episodes", "0"], "eval.episodes=0"),
        (["--threads", "-1"], "num_threads=-1"),
        (["--device", "tpu"], "device=tpu"),
        (["--dtype", "int8"], "policy.dtype=int8"),
        (["--mode", "dance"], "mode=dance"),
        (["--backend", "sglang"], "backend=sglang"),
        (["--model", ""], "model="),
    ],
    ids=lambda v: v[0] if isinstance(v, list) else v,
)
def test_an_option_and_set_fail_with_the_same_sentence(option, item, tmp_path, no_model_load):
    by_option = _one_error_line(_train(tmp_path, *option))
    by_set = _one_error_line(_train(tmp_path, "--set", item))
    assert by_option == by_set
    assert not no_model_load


def test_set_null_is_accepted_where_the_field_may_be_none():
    config = config_class("ppo").build(key_values(["target_kl=null", "head_lr=null"], "--set"))
    config.validate()
    assert config.target_kl is None and config.optim.head_lr is None


def test_a_bad_value_in_a_real_process_is_one_line_on_stderr(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "llmgym", "train", "Text-Blackjack-v1", "--model", "tiny"]
        + ["--output", str(tmp_path / "run"), "--set", "learning_rate=NaN"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.strip() == "Error: optim.learning_rate must be a finite number, not nan."
    assert not (tmp_path / "run").exists()
