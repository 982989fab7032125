"""Issue 52, part B: bad values, limits and broken model directories, each one sentence with
exit code 2 before any model loads, and no run directory left behind."""

from __future__ import annotations

import json
import pickle
import shutil
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

import llmgym.resources
from llmgym.cli import app

sys.path.insert(0, str(Path(__file__).parent / "support"))
from bandit import register  # noqa: E402

BANDIT = register("a")
TRAIN = ["train", BANDIT, "--model", "tiny", "--no-progress", "--steps", "16"]
EVAL = ["eval", "Text-Blackjack-v1", "--episodes", "2", "--no-progress"]


@pytest.fixture(scope="module")
def good_model(tmp_path_factory) -> Path:
    """The tiny model saved as a model directory."""
    from llmgym.policy.testing import tiny_model

    path = tmp_path_factory.mktemp("models") / "good"
    model, tokenizer = tiny_model(0)
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


def _broken(good: Path, tmp: Path, kind: str) -> Path:
    """A copy of ``good`` with one file broken as ``kind`` says."""
    path = tmp / kind
    shutil.copytree(good, path)
    config = json.loads((good / "config.json").read_text())
    if kind == "truncated":
        weights = (path / "model.safetensors").read_bytes()
        (path / "model.safetensors").write_bytes(weights[: len(weights) // 2])
    elif kind == "negative":
        (path / "config.json").write_text(json.dumps(config | {"hidden_size": -5}))
    elif kind == "indivisible":  # transformers refuses it: 66 is no multiple of the 4 heads
        (path / "config.json").write_text(json.dumps(config | {"hidden_size": 66}))
    elif kind == "pickled":
        (path / "config.json").write_bytes(pickle.dumps(config))
    elif kind == "deep":
        (path / "config.json").write_text(json.dumps(config | {"num_hidden_layers": 10**6}))
    return path


def _invoke(argv: list[str], tmp: Path) -> str:
    """Run ``argv``; assert exit 2, one ``Error:`` line on stderr, no run directory. The line."""
    result = CliRunner().invoke(app, argv)
    assert isinstance(result.exception, SystemExit), repr(result.exception)
    assert result.exit_code == 2, result.output
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: "), result.stderr
    assert "Traceback" not in result.output
    assert not (tmp / "run").exists(), "a run directory was left behind"
    return lines[0]


@pytest.fixture
def no_trainer(monkeypatch):
    """Fail if a command gets as far as building a trainer (which loads the model)."""
    import llmgym.rl.trainer

    def refuse(config, *args, **kwargs):
        raise AssertionError("a trainer was built: the input was not refused first")

    monkeypatch.setattr(llmgym.rl.trainer, "Trainer", refuse)


ROWS = [
    (["--set", "lora_r=1000000000"], "lora.r is 1000000000 but LoRA's target modules have 32"),
    (["--set", "lora_layers=999"], "lora.layers is 999 but model tiny has 2 layers"),
    (["--set", "lora.target_modules=[]"], "lora.target_modules must be a non-empty list"),
    (["--mode", "generate", "--set", "max_new_tokens=1000000000"], "reads at most 4,096 tokens"),
    (["--sft", "auto", "--set", "sft.episodes=1e15"], "sft.episodes must be at most 1,000,000,000"),
    (["--episodes-per-update", "100000000"], "episodes_per_update must be at most 1,000,000"),
    (["--algo", "grpo", "--set", "group_size=1000000000"], "group_size must be at most 4,096"),
    (["--env-kwarg", "render_mode=human"], "render_mode=human opens a window"),
]


@pytest.mark.parametrize("args, says", ROWS, ids=[" ".join(r[0]) for r in ROWS])
def test_a_value_past_a_limit_is_refused_before_the_model_loads(
    args, says, tmp_path, monkeypatch, no_trainer
):
    monkeypatch.delenv("DISPLAY", raising=False)
    monkeypatch.delenv("WAYLAND_DISPLAY", raising=False)
    monkeypatch.setattr(sys, "platform", "linux")
    assert says in _invoke([*TRAIN, *args, "--output", str(tmp_path / "run")], tmp_path)


def test_lora_layers_default_takes_every_layer_of_a_shallower_model(tmp_path, no_trainer):
    """The default lora.layers (8) on the 2-layer model is not refused: only a value set."""
    result = CliRunner().invoke(app, [*TRAIN, "--output", str(tmp_path / "run")])
    assert isinstance(result.exception, AssertionError)  # got as far as building the trainer


def test_train_output_empty_is_refused(tmp_path, monkeypatch, no_trainer):
    monkeypatch.chdir(tmp_path)
    assert "--output '' names no directory" in _invoke([*TRAIN, "--output", ""], tmp_path)
    assert not (tmp_path / "runs").exists()


def test_a_run_above_the_memory_available_is_refused(tmp_path, monkeypatch, no_trainer):
    monkeypatch.setattr(llmgym.resources, "available_memory", lambda: 10**9)
    argv = [*TRAIN, "--episodes-per-update", "1000000", "--output", str(tmp_path / "run")]
    line = _invoke(argv, tmp_path)
    assert "This needs about 3.2 GB of memory (the rollout 3.2 GB" in line
    assert "but 1.0 GB is available" in line


@pytest.mark.parametrize("command", ["train", "eval"])
@pytest.mark.parametrize(
    "kind, says",
    [
        ("truncated", "The weights file {dir}/model.safetensors cannot be read"),
        ("negative", "{dir}/config.json sets hidden_size to -5, not a positive whole number"),
        ("pickled", "{dir}/config.json is not JSON text (it holds binary data"),
        ("indivisible", "({dir}/config.json) is refused: Class validation error"),
        ("deep", "the model's weights 148.0 GB"),
    ],
)
def test_a_broken_model_directory_is_named(command, kind, says, good_model, tmp_path, monkeypatch):
    monkeypatch.setattr(llmgym.resources, "available_memory", lambda: 8 * 10**9)
    model = _broken(good_model, tmp_path, kind)
    if command == "train":
        argv = ["train", BANDIT, "--model", str(model), "--output", str(tmp_path / "run")]
    else:
        argv = [*EVAL, "--agent", f"llm:{model}"]
    assert says.format(dir=model) in _invoke([*argv, "--no-progress"], tmp_path)


def test_a_model_too_large_for_memory_is_refused_before_it_is_built(good_model, monkeypatch):
    """Refused from its config.json, no weight allocated (here: the tiny model in 100 kB)."""
    import transformers

    from llmgym.errors import ConfigError
    from llmgym.policy.models import load_model

    def built(*args, **kwargs):
        raise AssertionError("the model was built")

    monkeypatch.setattr(transformers.AutoModelForCausalLM, "from_pretrained", built)
    monkeypatch.setattr(llmgym.resources, "available_memory", lambda: 10**5)
    with pytest.raises(ConfigError, match="but 0 MB is available; model .* is too large"):
        load_model(str(good_model), device="cpu")


@pytest.mark.parametrize("device", ["cuda", "cuda:7"])
def test_a_device_this_machine_lacks_is_one_sentence(device, tmp_path, no_trainer):
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    train = _invoke([*TRAIN, "--device", device, "--output", str(tmp_path / "run")], tmp_path)
    evaluate = _invoke([*EVAL, "--agent", "random", "--device", device], tmp_path)
    assert train == evaluate
    assert f"--device {device} needs an NVIDIA GPU" in train


@pytest.mark.parametrize("value", ["nan", "NaN", "-nan"])
def test_nan_for_a_number_option_says_it_is_not_a_number(value, tmp_path):
    line = _invoke(["serve", "Text-Blackjack-v1", f"--stop-after={value}"], tmp_path)
    assert line.startswith(f"Error: Invalid value for '--stop-after': {value} is not a number.")


def test_a_display_lets_render_mode_human_through(monkeypatch):
    from llmgym.resources import check_display

    monkeypatch.setattr(sys, "platform", "linux")
    monkeypatch.setenv("DISPLAY", ":0")
    check_display({"render_mode": "human"})


def test_a_model_directory_loads_on_the_device_torchrun_names(good_model):
    """Accelerate names a CPU process's device ``cpu:0`` (the documented torchrun command)."""
    from llmgym.policy.models import load_model_for

    model, _ = load_model_for(str(good_model), "cpu:0")
    assert next(model.parameters()).device.type == "cpu"
