"""One table of bad command-line inputs over every subcommand (issue 13, items 5 and 6; issue
37: counts past the limits, full disks, a resume of another run, bad env keywords and agents).

Each row must end with exit code 2 and exactly one line on stderr, ``Error: <one sentence>``,
never a traceback or a doubled "Error: Error:". Options that later issues add join the table as
they land; tests/test_cli_fuzz.py drives every option with generated bad values.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from llmgym.cli import app

sys.path.insert(0, str(Path(__file__).parent / "support"))
from bandit import register  # noqa: E402

BANDIT = register("a")
TRAIN = ["train", BANDIT, "--model", "tiny", "--no-progress", "--steps", "16"]
EVAL = ["eval", "Text-Blackjack-v1", "--agent", "random", "--episodes", "2", "--no-progress"]
BENCH = ["bench", "--envs", "Text-Blackjack-v1", "--agents", "random", "--episodes", "1"]
LAKE = ["eval", "Text-FrozenLake-v1", "--agent", "random", "--episodes", "2", "--no-progress"]
MATH = ["eval", "Text-Arithmetic-v0", "--agent", "random", "--episodes", "2", "--no-progress"]
BENCH_BJ = [*BENCH, "--output", str]  # --agents given after it replaces random
NON_UTF8 = b"\xff\xfe".decode("utf-8", "surrogateescape")  # undecodable bytes, as Python reads them
HUGE = "100000000000000000000"  # 10**20: past every count limit (llmgym.rollout.MAX_*)
#: The cheapest training that gets to its end: no start evaluation, a small final one.
FAST = ["--no-start-eval", "--final-eval-episodes", "2", "--eval-episodes", "2"]


def _file(tmp: Path) -> str:
    (tmp / "file").write_text("x")
    return str(tmp / "file")


def _readonly(tmp: Path) -> str:
    (tmp / "ro").mkdir()
    os.chmod(tmp / "ro", 0o500)
    return str(tmp / "ro" / "out")


def _not_a_run(tmp: Path) -> str:
    (tmp / "run").mkdir()
    return f"llm:tiny@{tmp / 'run'}"


def _damaged_run(tmp: Path) -> str:
    ckpt = tmp / "run" / "checkpoints" / "iter_000001"
    ckpt.mkdir(parents=True)
    (ckpt / "trainer_state.json").write_text('{"algo": "reinf')
    (tmp / "run" / "checkpoints" / "latest").write_text("iter_000001")
    return f"llm:tiny@{tmp / 'run'}"


def _blackjack_run(tmp: Path) -> str:
    """A run of PPO on Text-Blackjack-v1 with the tiny model, as far as a resume reads it."""
    run = tmp / "bj"
    (run / "checkpoints" / "iter_000001").mkdir(parents=True)
    (run / "checkpoints" / "iter_000001" / "trainer_state.json").write_text('{"algo": "ppo"}')
    config = {"run": {"env_id": "Text-Blackjack-v1", "env_kwargs": {}}, "policy": {"model": "tiny"}}
    (run / "run.json").write_text(json.dumps({"config": config, "algo": "ppo"}))
    return str(run)


RESUME_BJ = ["train", "Text-Blackjack-v1", "--resume", "--output", _blackjack_run]


def _damaged_run_json(tmp: Path) -> str:
    run = _blackjack_run(tmp)
    Path(run, "run.json").write_text('{"config": [1')
    return run


class _Code:
    """Pickled as a call of ``print``: a global that torch.load(weights_only=True) refuses."""

    def __reduce__(self):
        return (print, ("this ran",))


def _pickle_model(tmp: Path) -> str:
    """A model directory whose weights are a pickle holding more than tensors."""
    import torch
    from safetensors.torch import load_file

    from llmgym.policy.testing import tiny_model

    model, tokenizer = tiny_model(0)
    model.save_pretrained(tmp / "pk")
    tokenizer.save_pretrained(tmp / "pk")
    weights = load_file(tmp / "pk" / "model.safetensors") | {"code": _Code()}
    torch.save(weights, tmp / "pk" / "pytorch_model.bin")
    (tmp / "pk" / "model.safetensors").unlink()
    return str(tmp / "pk")


def _bad_jsonl(tmp: Path) -> str:
    (tmp / "b").mkdir()
    (tmp / "b" / "episodes.jsonl").write_text('{"x": 1}\n[1, 2]\n')
    return str(tmp / "b")


def _metrics_run(tmp: Path, rows: str = '{"env_steps": 16, "eval/mean_return": 0.5}\n') -> str:
    """A run directory with ``rows`` logged (by default one row, which plots)."""
    (tmp / "m").mkdir()
    (tmp / "m" / "metrics.jsonl").write_text(rows)
    return str(tmp / "m")


def _empty_csv(tmp: Path) -> str:
    (tmp / "c").mkdir()
    (tmp / "c" / "metrics.csv").write_text("")
    return str(tmp / "c")


def _bad_metrics(tmp: Path) -> str:
    (tmp / "r").mkdir()
    (tmp / "r" / "metrics.csv").write_bytes(b'\x00\xff garbage,\n"unclosed')
    return str(tmp / "r")


# (id, args; a callable fills in a path under tmp_path, env: extra environment variables)
ROWS = [
    ("play-seed", ["play", "Text-Blackjack-v1", "--seed", "-1"]),
    ("play-episodes", ["play", "Text-Blackjack-v1", "--episodes", "0"]),
    ("play-env", ["play", "Text-Nope-v0"]),
    ("play-episodes-huge", ["play", "Text-Blackjack-v1", "--episodes", HUGE]),
    ("eval-seed", [*EVAL, "--seed", "-1"]),
    ("eval-episodes", [*EVAL, "--episodes", "-5"]),
    ("eval-num-envs", [*EVAL, "--num-envs", "0"]),
    ("eval-episodes-huge", [*EVAL[:-3], "--episodes", HUGE]),
    ("eval-num-envs-huge", [*EVAL, "--num-envs", HUGE]),
    ("eval-output-full", [*EVAL, "--output", "/dev/full"]),
    ("eval-device", [*EVAL, "--device", "tpu"]),
    ("eval-mode", [*EVAL, "--mode", "dance"]),
    ("eval-env", ["eval", "Text-Nope-v0", "--agent", "random"]),
    ("eval-exact-unsupported", ["eval", "Text-CartPole-v1", "--agent", "optimal", "--exact"]),
    ("eval-exact-random", ["eval", "Text-FrozenLake-v1", "--agent", "random", "--exact"]),
    ("eval-env-kwarg", [*EVAL, "--env-kwarg", "nope"]),
    ("eval-describer", [*EVAL, "--env-kwarg", "describer=fancy"]),
    # item 8: tracebacks on bad input
    ("eval-map-name", [*LAKE, "--env-kwarg", "map_name=9x9"]),
    ("eval-llm-option-type", [*EVAL, "--agent", "llm:smollm2-135m,temperature=abc"]),
    ("eval-temperature-nan", [*EVAL, "--agent", "llm:smollm2-135m", "--temperature", "nan"]),
    ("eval-dataset-config", [*MATH, "--env-kwarg", 'config={"min_terms": -3}'], "reasoning"),
    ("eval-sb3-on-text", ["eval", "Text-GSM-v0", "--agent", "sb3-a2c"], "reasoning"),
    ("eval-pickle-weights", [*EVAL, "--agent", lambda t: f"llm:{_pickle_model(t)}"]),
    # item 9: accepted silently before
    ("eval-map-desc", [*LAKE, "--env-kwarg", "desc=[[1]]"]),
    ("eval-max-steps", [*LAKE, "--env-kwarg", "max_episode_steps=-1"]),
    ("eval-slippery-maybe", [*LAKE, "--env-kwarg", "is_slippery=maybe"]),
    ("eval-env-kwarg-unknown", [*LAKE, "--env-kwarg", "slippery=false"]),
    ("eval-temperature-inf", [*EVAL, "--agent", "llm:smollm2-135m", "--temperature", "inf"]),
    ("eval-llm-empty-run", [*EVAL, "--agent", "llm:smollm2-135m@"]),
    # found by tests/test_cli_fuzz.py
    ("eval-history-huge", [*EVAL, "--history", HUGE]),
    ("eval-llm-mode-number", [*EVAL, "--agent", "llm:smollm2-135m,mode=0"]),
    ("baselines-seed-huge", ["baselines", "train", "CartPole-v1", "--seed", HUGE]),
    ("baselines-threads-huge", ["baselines", "train", "CartPole-v1", "--threads", HUGE]),
    ("serve-host-bytes", ["serve", "Text-Blackjack-v1", "--host", NON_UTF8, "--port", "0"]),
    ("serve-stop-after-huge", ["serve", "Text-Blackjack-v1", "--stop-after", "1e30"]),
    ("train-sft-folder", [*TRAIN, "--sft", lambda t: str(t), "--output", str]),
    ("train-set-sft-device", [*TRAIN, "--set", "sft=/dev/full", "--output", str]),
    ("train-output-bytes", [*TRAIN, "--output", NON_UTF8]),
    ("train-threads-huge", [*TRAIN, "--threads", HUGE]),
    ("serve-env", ["serve", "Text-Nope-v0"]),
    ("serve-port", ["serve", "Text-Blackjack-v1", "--port", "70000"]),
    ("serve-sessions", ["serve", "Text-Blackjack-v1", "--max-sessions", "0"]),
    ("eval-agent", [*EVAL[:2], "--agent", "alien"]),
    ("eval-model", [*EVAL[:2], "--agent", "llm:no-such-model-xyz"]),
    ("eval-not-a-run", [*EVAL[:2], "--agent", _not_a_run]),
    ("eval-damaged-run", [*EVAL[:2], "--agent", _damaged_run]),
    ("eval-output-dir", [*EVAL, "--output", lambda t: str(t)]),
    ("eval-output-under-file", [*EVAL, "--output", lambda t: _file(t) + "/r.json"]),
    ("eval-output-readonly", [*EVAL, "--output", _readonly], "not-root"),
    ("eval-sb3-cache-file", [*EVAL[:2], "--agent", "sb3-ppo"], "cache-file"),
    ("bench-seed", [*BENCH, "--seed", "-1"]),
    ("bench-episodes", [*BENCH[:-1], "0"]),
    ("bench-batch", [*BENCH, "--batch-size", "0"]),
    ("bench-episodes-huge", [*BENCH[:-1], HUGE]),
    ("bench-batch-huge", [*BENCH, "--batch-size", HUGE]),
    ("bench-env", ["bench", "--envs", "Text-Nope-v0"]),
    ("bench-suite", ["bench", "--suite", "nope"]),
    ("bench-agent", ["bench", "--envs", "Text-Blackjack-v1", "--agents", "alien"]),
    ("bench-model", ["bench", "--envs", "Text-Blackjack-v1", "--agents", "llm:no-such-model-xyz"]),
    ("bench-output-file", [*BENCH, "--output", _file]),
    ("bench-output-readonly", [*BENCH, "--output", _readonly], "not-root"),
    ("bench-bad-jsonl", [*BENCH, "--output", _bad_jsonl]),
    # item 9: a bench that played nothing, or an agent that cannot be built, is not a success
    ("bench-agents-empty", [*BENCH_BJ, "--agents", ""]),
    ("bench-agents-commas", [*BENCH_BJ, "--agents", " , "]),
    ("bench-envs-empty", [*BENCH[:1], "--envs", "", *BENCH[3:]]),
    # issue 52: an empty agent name or one named twice
    ("bench-agents-empty-name", [*BENCH_BJ, "--agents", "random,,random"]),
    ("bench-agents-trailing-comma", [*BENCH_BJ, "--agents", "random,"]),
    ("bench-agents-twice", [*BENCH_BJ, "--agents", "random,random"]),
    ("bench-llm-option", [*BENCH_BJ, "--agents", "llm:smollm2-135m,bogus=1"]),
    ("bench-llm-option-value", [*BENCH_BJ, "--agents", "llm:smollm2-135m,temperature=inf"]),
    ("bench-llm-empty-run", [*BENCH_BJ, "--agents", "llm:smollm2-135m@"]),
    ("bench-llm-missing-run", [*BENCH_BJ, "--agents", lambda t: f"llm:tiny@{t / 'nope'}"]),
    ("bench-llm-damaged-run", [*BENCH_BJ, "--agents", _damaged_run, "--output", str]),
    ("bench-nothing-playable", ["bench", "--envs", "Text-Pendulum-v1", "--agents", "sb3-dqn"]),
    ("bench-ray-unreachable", [*BENCH, "--ray", "127.0.0.1:9", "--output", str], "ray"),
    ("baselines-seed", ["baselines", "train", "CartPole-v1", "--seed", "-1"]),
    ("baselines-timesteps-neg", ["baselines", "train", "CartPole-v1", "--timesteps", "-5"]),
    ("baselines-timesteps-0", ["baselines", "train", "CartPole-v1", "--timesteps", "0"]),
    ("baselines-timesteps-huge", ["baselines", "train", "CartPole-v1", "--timesteps", HUGE]),
    ("baselines-threads", ["baselines", "train", "CartPole-v1", "--threads", "0"]),
    ("baselines-algo", ["baselines", "train", "CartPole-v1", "--algo", "sac"]),
    ("baselines-env", ["baselines", "train", "Nope-v0"]),
    ("baselines-cache-file", ["baselines", "train", "CartPole-v1"], "cache-file"),
    ("train-seed", [*TRAIN, "--seed", "-1"]),
    ("train-lr", [*TRAIN, "--lr", "-1"]),
    ("train-episodes", [*TRAIN, "--episodes", "-5"]),
    ("train-threads", [*TRAIN, "--threads", "-1"]),
    ("train-num-envs", [*TRAIN, "--num-envs", "0"]),
    ("train-epu", [*TRAIN, "--episodes-per-update", "0"]),
    ("train-steps", [*TRAIN[:-2], "--steps", "0"]),
    ("train-algo", [*TRAIN, "--algo", "dqn"]),
    ("train-mode", [*TRAIN, "--mode", "dance"]),
    ("train-env", ["train", "Text-Nope-v0", "--model", "tiny"]),
    ("train-model", ["train", BANDIT, "--model", "no-such-model-xyz", "--output", str]),
    ("train-set-type", [*TRAIN, "--set", "lora_r=abc", "--output", str]),
    ("train-set-unknown", [*TRAIN, "--set", "nope=1", "--output", str]),
    ("train-set-form", [*TRAIN, "--set", "lora_r"]),
    ("train-set-null", [*TRAIN, "--set", "gamma=null", "--output", str]),
    ("train-env-kwarg", [*TRAIN, "--env-kwarg", "nope=1", "--output", str]),
    ("train-mirror", [*TRAIN, "--set", "mirror=true", "--output", str]),
    ("train-device", [*TRAIN, "--device", "tpu"]),
    ("train-dtype", [*TRAIN, "--dtype", "int8"]),
    ("train-backend", [*TRAIN, "--backend", "sglang"]),
    ("train-lr-nan", [*TRAIN, "--lr", "nan"]),
    ("train-set-nan", [*TRAIN, "--set", "learning_rate=NaN"]),
    ("train-set-inf", [*TRAIN, "--set", "temperature=inf"]),
    ("train-set-huge", [*TRAIN, "--set", "lora_r=1e30"]),
    ("train-set-range", [*TRAIN, "--set", "gamma=1.5"]),
    ("train-set-lora-r-huge", [*TRAIN, "--set", "lora.r=1e30"]),
    ("train-set-minibatch-0", [*TRAIN, "--set", "minibatch_size=0"]),
    ("train-set-grad-norm", [*TRAIN, "--set", "max_grad_norm=-1"]),
    ("train-env-kwarg-type", [*TRAIN, "--env-kwarg", "good=1", "--output", str]),
    ("train-pickle-weights", [*TRAIN[:2], "--model", _pickle_model, "--output", str]),
    ("train-eval-episodes", [*TRAIN, "--eval-episodes", "0"]),
    ("train-steps-huge", [*TRAIN[:-2], "--steps", HUGE]),
    ("train-episodes-huge", [*TRAIN, "--episodes", HUGE]),
    ("train-num-envs-huge", [*TRAIN, "--num-envs", HUGE]),
    ("train-eval-episodes-huge", [*TRAIN, "--eval-episodes", HUGE]),
    ("train-final-eval-huge", [*TRAIN, "--final-eval-episodes", HUGE]),
    ("train-set-steps-huge", [*TRAIN, "--set", f"total_env_steps={HUGE}"]),
    # after training: result.json's copy cannot be written (a full disk)
    ("train-result-json-full", [*TRAIN, *FAST, "--result-json", "/dev/full", "--output", str]),
    # The rest of the table of bad config values: tests/rl/test_config_cli.py.
    ("train-output-file", [*TRAIN, "--output", _file]),
    ("train-output-under-file", [*TRAIN, "--output", lambda t: _file(t) + "/run"]),
    ("train-output-readonly", [*TRAIN, "--output", _readonly], "not-root"),
    ("train-resume-nothing", [*TRAIN, "--resume", "--output", str]),
    ("train-sft-file", [*TRAIN, "--sft", "missing.jsonl"]),
    # item 7: a resume keeps the run's env, env kwargs, model and algorithm, or is refused
    ("resume-other-env", [*RESUME_BJ[:1], "Text-FrozenLake-v1", *RESUME_BJ[2:]]),
    ("resume-other-model", [*RESUME_BJ, "--model", "smollm2-135m"]),
    ("resume-set-model", [*RESUME_BJ, "--set", "policy.model=smollm2-135m"]),
    ("resume-other-algo", [*RESUME_BJ, "--algo", "grpo"]),
    ("resume-other-env-kwargs", [*RESUME_BJ, "--env-kwarg", "natural=true"]),
    ("resume-damaged-run-json", [*RESUME_BJ[:-1], _damaged_run_json]),
    ("plot-missing", ["plot", lambda t: str(t / "nothing")]),
    ("plot-garbage", ["plot", _bad_metrics]),
    ("plot-empty", ["plot", lambda t: _metrics_run(t, "")]),
    ("plot-no-llmgym-rows", ["plot", lambda t: _metrics_run(t, '{"a": 1}\n{"b": "x"}\n')]),
    ("plot-empty-csv", ["plot", _empty_csv]),
    ("plot-out-full", ["plot", _metrics_run, "--out", "/dev/full"]),
    ("plot-out-suffix", ["plot", _metrics_run, "--out", "x.xyz"]),
    ("plot-out-dir", ["plot", _metrics_run, "--out", lambda t: str(t)]),
]


@pytest.mark.parametrize("row", ROWS, ids=[r[0] for r in ROWS])
def test_bad_input_is_one_sentence_and_exit_2(row, tmp_path, monkeypatch):
    name, args, *flags = row
    if "not-root" in flags and os.geteuid() == 0:
        pytest.skip("root can write into a read-only folder")
    if "reasoning" in flags:
        pytest.importorskip("reasoning_gym")
    if "ray" in flags:
        pytest.importorskip("ray")
    monkeypatch.chdir(tmp_path)
    cache = tmp_path / "cache"
    if "cache-file" in flags:
        cache.write_text("not a folder")
    monkeypatch.setenv("LLMGYM_CACHE", str(cache))
    argv = [a(tmp_path) if callable(a) else a for a in args]
    result = CliRunner().invoke(app, argv)
    assert isinstance(result.exception, SystemExit), f"{name}: {result.exception!r}"
    assert result.exit_code == 2, f"{name}: {result.output}"
    assert "Traceback" not in result.output, result.output
    errors = result.stderr.splitlines()
    assert len(errors) == 1, f"{name}: {result.stderr!r}"
    assert errors[0].startswith("Error: ") and "Error: Error:" not in errors[0], errors[0]


def test_a_corrupt_sb3_cache_says_error_once(tmp_path, monkeypatch):
    pytest.importorskip("stable_baselines3")
    from llmgym.baselines import sb3

    monkeypatch.setenv("LLMGYM_CACHE", str(tmp_path))
    path = sb3.model_path("Blackjack-v1", "ppo")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"PK\x03\x04 corrupt")
    path.with_suffix(".json").write_text(json.dumps({"format": sb3.CACHE_FORMAT}))
    result = CliRunner().invoke(app, [*EVAL[:2], "--agent", "sb3-ppo", "--no-progress"])
    assert result.exit_code == 2 and result.output.startswith("Error: The cached baseline")
    assert "Error: Error" not in result.output
    assert len(result.output.strip().splitlines()) == 1
