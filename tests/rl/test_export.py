"""``llmgym export``: a tiny LoRA run (with an adapter merged during training) as a PEFT
adapter and as a merged model, both acting exactly as the trained policy; runs with an action
head are refused."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
peft = pytest.importorskip("peft")

sys.path.insert(0, str(Path(__file__).parents[1] / "support"))
from bandit import register  # noqa: E402

from llmgym.policy import LLMPolicy, PolicyConfig  # noqa: E402
from llmgym.policy.testing import text_observations, tiny_model  # noqa: E402
from llmgym.rl import load_trained_policy, make_trainer  # noqa: E402
from llmgym.rl.export import INFO_FILE, ExportError, export_run  # noqa: E402

BANDIT = register("a")
FAST = dict(
    model="tiny",
    env_id=BANDIT,
    num_envs=8,
    episodes_per_update=8,
    minibatch_size=8,
    learning_rate=1e-2,
    eval_episodes=8,
    eval_every=0,
    checkpoint_every=0,
    eval_method="sampled",
    progress=False,
    num_threads=1,
    lora_r=4,
)


def _train(run_dir: Path, **config) -> Path:
    """Two updates, the adapter merged into the weights (a reference refresh), two more."""
    settings = FAST | {"total_episodes": 16, "output_dir": str(run_dir)} | config
    trainer = make_trainer("reinforce", **settings)
    trainer.train()
    if trainer.config.lora.enabled and trainer.config.optim.train_backbone:
        trainer.learner.refresh_reference()
    for _ in range(2):
        trainer.run_iteration()
    trainer.checkpointer.save_checkpoint()
    return run_dir


@pytest.fixture(scope="module")
def lora_run(tmp_path_factory):
    return _train(tmp_path_factory.mktemp("lora"), action_head=False)


def _logprobs(policy) -> np.ndarray:
    """Log-probabilities of Blackjack's actions in four states, under the policy."""
    return np.log(policy.action_probabilities(*text_observations("Text-Blackjack-v1", 4)))


def _trained(run: Path, mode: str = "score"):
    return load_trained_policy(str(run), device="cpu", policy_config=_config(mode))


def _config(mode: str) -> PolicyConfig:
    return PolicyConfig(mode=mode, greedy=True, max_new_tokens=8)


def test_adapter_loads_in_peft_and_acts_as_trained(lora_run, tmp_path):
    out = export_run(lora_run, tmp_path / "adapter")
    config = json.loads((out / "adapter_config.json").read_text())
    assert config["r"] == 2 * FAST["lora_r"]  # the merged adapter folded in
    assert config["lora_alpha"] == 2 * 32
    assert json.loads((out / INFO_FILE).read_text())["kind"] == "peft_adapter"
    base, tokenizer = tiny_model(0)
    model = peft.PeftModel.from_pretrained(base, str(out)).eval()
    exported = _logprobs(LLMPolicy(model, tokenizer, _config("score")))
    trained = _logprobs(_trained(lora_run))
    untrained = _logprobs(LLMPolicy(tiny_model(0)[0], tokenizer, _config("score")))
    np.testing.assert_allclose(exported, trained, atol=1e-4)
    assert np.abs(trained - untrained).max() > 0.1


def test_cli_export_states_the_rank_and_turns_errors_into_one_sentence(
    lora_run, tmp_path, monkeypatch
):
    from typer.testing import CliRunner

    from llmgym.cli import app
    from llmgym.errors import LLMGymError
    from llmgym.rl import export as export_module

    assert issubclass(ExportError, LLMGymError) and issubclass(ExportError, ValueError)
    result = CliRunner().invoke(app, ["export", str(lora_run), str(tmp_path / "adapter")])
    assert result.exit_code == 0, result.output
    rank = 2 * FAST["lora_r"]
    assert f"LoRA rank is {rank}: serve it with vLLM's --max-lora-rank {rank}" in result.output

    def broken(*args, **kwargs):
        raise KeyError("lora_A")

    monkeypatch.setattr(export_module, "export_run", broken)
    result = CliRunner().invoke(app, ["export", str(lora_run), str(tmp_path / "out")])
    assert result.exit_code == 2
    assert "Could not export" in result.output and "Traceback" not in result.output


def test_merged_model_loads_in_transformers_and_acts_as_trained(lora_run, tmp_path):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    out = export_run(lora_run, tmp_path / "merged", merge=True)
    model = AutoModelForCausalLM.from_pretrained(out).eval()
    tokenizer = AutoTokenizer.from_pretrained(out)
    assert not hasattr(model, "peft_config")
    score = LLMPolicy(model, tokenizer, _config("score"))
    np.testing.assert_allclose(_logprobs(score), _logprobs(_trained(lora_run)), atol=1e-4)
    observations, infos = text_observations("Text-Blackjack-v1", 4)
    generate = LLMPolicy(model, tokenizer, _config("generate"))
    got = [s.completion_ids for s in generate.act(observations, infos)]
    want = [s.completion_ids for s in _trained(lora_run, "generate").act(observations, infos)]
    assert got == want


def test_a_run_with_an_action_head_is_refused(tmp_path):
    from typer.testing import CliRunner

    from llmgym.cli import app

    run = _train(tmp_path / "head", total_episodes=8)
    with pytest.raises(ExportError, match="action_head=false"):
        export_run(run, tmp_path / "out")
    result = CliRunner().invoke(app, ["export", str(run), str(tmp_path / "out2"), "--merge"])
    assert result.exit_code == 2
    assert "not exportable" in result.output and "action_head=false" in result.output


def test_a_full_fine_tune_exports_merged_into_a_new_directory(tmp_path):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    run = _train(tmp_path / "full", lora=False, action_head=False, learning_rate=1e-3)
    with pytest.raises(ExportError, match="--merge"):
        export_run(run, tmp_path / "adapter")
    (tmp_path / "taken").mkdir()
    (tmp_path / "taken" / "file").write_text("x")
    with pytest.raises(ExportError, match="not an empty directory"):
        export_run(run, tmp_path / "taken", merge=True)
    out = export_run(run, tmp_path / "merged", merge=True)
    model = AutoModelForCausalLM.from_pretrained(out).eval()
    exported = _logprobs(LLMPolicy(model, AutoTokenizer.from_pretrained(out), _config("score")))
    untrained = _logprobs(LLMPolicy(*tiny_model(0), _config("score")))
    np.testing.assert_allclose(exported, _logprobs(_trained(run)), atol=1e-4)
    assert np.abs(exported - untrained).max() > 1e-3


def test_saving_lora_weights_offline_looks_nothing_up(tmp_path, monkeypatch):
    """A checkpoint and an adapter of a model named by a Hub id save without peft's Hub check
    (which warned on every save when offline)."""
    import warnings

    from llmgym.rl.adapters import write_adapter

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    trainer = make_trainer(
        "reinforce", **FAST, total_episodes=8, output_dir=str(tmp_path), action_head=False
    )
    trainer.model.peft_config["default"].base_model_name_or_path = "no-such-org/no-such-model"
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        trainer.checkpointer.save_checkpoint()
        write_adapter(trainer, tmp_path / "adapter")
    assert not [w for w in caught if "Could not find a config file" in str(w.message)]
    assert (tmp_path / "adapter" / "adapter_model.safetensors").is_file()


def test_the_adapter_names_its_base_by_hub_id_or_with_local_base_by_path(
    lora_run, tmp_path, monkeypatch
):
    # The embedded model loads from a converted local copy; an adapter that named that path
    # did not load on another machine (issue 52). Its Hub id is written now; --local-base
    # keeps this machine's path.
    from typer.testing import CliRunner

    from llmgym.cli import app
    from llmgym.rl import adapters

    monkeypatch.setattr(adapters, "base_model_hub_id", lambda name: "Org/Hub-Model")
    monkeypatch.setattr(adapters, "base_model_path", lambda name: "/local/copy")
    for args, want in (([], "Org/Hub-Model"), (["--local-base"], "/local/copy")):
        out = tmp_path / ("local" if args else "hub")
        result = CliRunner().invoke(app, ["export", str(lora_run), str(out), *args])
        assert result.exit_code == 0, result.output
        config = json.loads((out / "adapter_config.json").read_text())
        assert config["base_model_name_or_path"] == want
    monkeypatch.undo()  # the real one, for the embedded model:
    assert adapters.base_model_hub_id("smollm2-135m") == "HuggingFaceTB/SmolLM2-135M-Instruct"
