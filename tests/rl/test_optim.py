"""The action head's own optimizer (``head_optimizer``) and runs saved before it existed."""

import pytest
import torch

from llmgym.errors import TrainingError
from llmgym.rl import config_class, make_trainer
from llmgym.rl.optim import Optimizers


def test_configs_saved_before_head_optimizer_resume_with_adamw():
    cls = config_class("ppo")
    values = cls().to_dict()
    del values["optim"]["head_optimizer"]
    assert cls.from_dict(values).optim.head_optimizer == "adamw"
    flat = {"model": "tiny", "temperature": 2.0}  # a flat config of before the sections
    assert cls.from_dict(flat).optim.head_optimizer == "adamw"
    assert cls().optim.head_optimizer == "sgd"


def test_a_single_optimizer_state_restores_into_optimizers():
    layer = torch.nn.Linear(2, 1)
    old = torch.optim.AdamW(layer.parameters(), lr=0.1)
    layer(torch.ones(2)).sum().backward()
    old.step()
    new = Optimizers([torch.optim.AdamW(layer.parameters(), lr=0.1)])
    new.load_state_dict(old.state_dict())
    assert new.optimizers[0].state_dict()["state"][0]["step"] == 1
    two = Optimizers([torch.optim.AdamW(layer.parameters()), torch.optim.SGD(layer.parameters())])
    with pytest.raises(ValueError, match="optimizer states"):
        two.load_state_dict(old.state_dict())


def test_sgd_head_is_its_own_optimizer_and_bad_names_fail_early(tmp_path):
    common = dict(model="tiny", env_id="Text-Blackjack-v1", output_dir=str(tmp_path))
    trainer = make_trainer("ppo", train_backbone=False, progress=False, **common)
    kinds = [type(o).__name__ for o in trainer.learner.optimizer.optimizers]
    assert kinds == ["AdamW", "SGD"]
    assert trainer.learner.optimizer.param_groups[-1]["lr"] == 0.3
    with pytest.raises(TrainingError, match="head_optimizer must be one of sgd, adamw"):
        make_trainer("ppo", head_optimizer="lion", **common)
    for bad in ("fast", -0.1, float("nan")):
        with pytest.raises(TrainingError, match="head_lr must be a"):
            make_trainer("ppo", head_lr=bad, **common)
