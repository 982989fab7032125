"""Any causal LM trains: tiny random-init models of several architecture families, saved as
local directories (as a user's own model would be), train in score and generate mode, with
LoRA on the last layers and with a full fine-tune (issue 35, item 1)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("peft")

from llmgym.policy.testing import FAMILIES, tiny_model_dir  # noqa: E402
from llmgym.rl import make_trainer  # noqa: E402


@pytest.fixture(scope="module")
def model_dirs(tmp_path_factory):
    root = tmp_path_factory.mktemp("models")
    return {family: str(tiny_model_dir(family, root / family)) for family in FAMILIES}


CASES = [
    pytest.param(family, mode, lora, id=f"{family}-{mode}-{'lora' if lora else 'full'}")
    for family in FAMILIES
    for mode in ("score", "generate")
    for lora in (True, False)
]


@pytest.mark.parametrize("family, mode, lora", CASES)
def test_a_local_model_of_any_family_trains(family, mode, lora, model_dirs, tmp_path):
    trainer = make_trainer(
        "reinforce",
        model=model_dirs[family],
        mode=mode,
        normalization="token",  # random weights: "hit" and "stick" differ in length only
        action_head=False,
        lora=lora,
        lora_layers=2,  # a real subset of the 4 layers
        learning_rate=1e-2 if lora else 1e-3,
        env_id="Text-Blackjack-v1",
        num_envs=4,
        episodes_per_update=4,
        total_episodes=4,
        max_new_tokens=8,
        progress=False,
        device="cpu",
        output_dir=str(tmp_path),
    )
    trained = [p for p in trainer.model.parameters() if p.requires_grad]
    assert trained, "nothing trains"
    before = [p.detach().clone() for p in trained]
    trainer.run_iteration()
    assert any(not torch.equal(b, p) for b, p in zip(before, trained))
    if lora:
        names = [n for n, p in trainer.model.named_parameters() if p.requires_grad]
        depth = trainer.model.get_base_model().config.num_hidden_layers
        assert all(f".{depth - 2}." in n or f".{depth - 1}." in n for n in names), names


def test_an_exported_adapter_loads_its_base_offline(model_dirs, tmp_path, monkeypatch):
    """``llmgym export`` records the base model's local path: ``AutoPeftModelForCausalLM``
    loads the adapter with no network."""
    from peft import AutoPeftModelForCausalLM

    from llmgym.rl.export import export_run

    trainer = make_trainer(
        "reinforce",
        model=model_dirs["qwen2"],
        action_head=False,
        lora_layers=2,
        env_id="Text-Blackjack-v1",
        num_envs=2,
        episodes_per_update=2,
        total_episodes=2,
        progress=False,
        device="cpu",
        output_dir=str(tmp_path / "run"),
    )
    trainer.train(final_episodes=1)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    out = export_run(tmp_path / "run", tmp_path / "adapter")
    model = AutoPeftModelForCausalLM.from_pretrained(str(out))
    assert model.peft_config["default"].base_model_name_or_path == model_dirs["qwen2"]
