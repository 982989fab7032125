"""``--num-envs auto``: the envs and the micro-batch sized by the memory estimator
(``llmgym.rl.machine.size_auto``), with the memory available patched."""

from __future__ import annotations

import pytest

import llmgym.resources as resources
from llmgym.errors import ConfigError
from llmgym.policy.models import model_shape
from llmgym.resources import training_memory
from llmgym.rl.machine import AUTO_MEMORY_SHARE, run_size
from llmgym.rl.plan import TrainRequest, plan_run

SMOLLM2 = {"policy.model": "smollm2-135m", "run.episodes_per_update": 4096}


def _plan(monkeypatch, available, **given):
    monkeypatch.setattr(resources, "available_memory", lambda: available)
    given = {"run.device": "cpu", "run.num_envs": "auto"} | given
    return plan_run(TrainRequest("Text-Blackjack-v1", given=given, recipe="none"))


@pytest.mark.parametrize("gigabytes", [2, 4, 8])
def test_auto_picks_a_batch_that_fits_in_the_memory_patched(monkeypatch, gigabytes):
    available = gigabytes * 10**9
    plan = _plan(monkeypatch, available, **SMOLLM2)
    config = plan.config
    envs, micro = config.run.num_envs, config.optim.micro_batch_size
    assert isinstance(envs, int) and 1 <= envs <= 4096
    assert isinstance(micro, int) and 1 <= micro <= config.optim.minibatch_size
    assert micro & (micro - 1) == 0  # a power of two
    need = sum(training_memory(model_shape("smollm2-135m"), run_size(config, "cpu")).values())
    assert need <= AUTO_MEMORY_SHARE * available
    assert plan.notes[0].startswith(f"num_envs auto -> {envs}, micro_batch_size auto -> {micro}")
    assert f"of {gigabytes}.0 GB available" in plan.notes[0]
    config.validate()  # a valid config: whole numbers, within the caps


def test_more_memory_gives_more_envs_and_never_more_than_the_episodes(monkeypatch):
    sizes = [_plan(monkeypatch, n * 10**9, **SMOLLM2).config.run.num_envs for n in (2, 4, 8)]
    assert sizes[0] < sizes[1] < sizes[2]
    plan = _plan(monkeypatch, 10**12, **{"policy.model": "tiny", "run.episodes_per_update": 24})
    assert plan.config.run.num_envs == 24
    assert "the 24 episodes per update cap the envs" in plan.notes[0]
    plan = _plan(monkeypatch, None, **{"policy.model": "tiny", "run.episodes_per_update": 12})
    assert plan.config.run.num_envs == 12 and "of unknown" in plan.notes[0]


def test_a_micro_batch_given_is_kept_and_too_little_memory_is_refused(monkeypatch):
    plan = _plan(monkeypatch, 4 * 10**9, **SMOLLM2, **{"optim.micro_batch_size": 4})
    assert plan.config.optim.micro_batch_size == 4
    assert plan.notes[0].startswith("num_envs auto -> ") and "micro_batch" not in plan.notes[0]
    with pytest.raises(ConfigError, match="This needs about"):
        _plan(monkeypatch, 3 * 10**8, **SMOLLM2)  # not even the weights: one env is refused


def test_the_command_line_takes_auto_and_the_trainer_resolves_it(monkeypatch):
    from llmgym.cli.train import request_from_args
    from llmgym.rl.algorithms.ppo import PPOConfig
    from llmgym.rl.trainer import Trainer

    monkeypatch.setattr(resources, "available_memory", lambda: 8 * 10**9)
    args = ["Text-Blackjack-v1", "--model", "tiny", "--num-envs", "auto", "--device", "cpu"]
    plan = plan_run(request_from_args([*args, "--episodes-per-update", "6"]))
    assert plan.config.run.num_envs == 6 and plan.notes[0].startswith("num_envs auto -> 6")
    plan = plan_run(request_from_args([*args[:-4], "--num-envs", "5"]))
    assert plan.config.run.num_envs == 5 and not plan.notes[0].startswith("num_envs")
    config = PPOConfig.build(
        {"model": "tiny", "num_envs": "auto", "episodes_per_update": 3, "device": "cpu"}
    )
    trainer = Trainer(config)  # built from Python: the trainer sizes what is still auto
    assert len(trainer.envs) == config.run.num_envs == 3
    assert config.optim.micro_batch_size == 16  # not auto unless asked (plan_run asks)
