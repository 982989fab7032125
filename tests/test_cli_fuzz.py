"""Every option and argument of every ``llmgym`` subcommand, driven with generated bad values
(issue 37): NaN, +-inf, negative numbers, 0, 1e30, the empty string, non-UTF-8 bytes (as the
surrogate-escaped text Python gives for them), a directory, ``/dev/full`` and a missing path,
bare and inside the ``KEY=VALUE`` options (``--set``, ``--env-kwarg``, ``llm:`` options).

Each command must end with exit code 2 and exactly one line on stderr, ``Error: ...``, or, where
the value is one the option takes (``--seed 0``, a new ``--output`` folder), succeed (exit 0);
never a traceback or any other code. Invocations stay small: the tiny model, 8-step trainings, 2
episodes, a server stopped at once.

Two hypothesis profiles: ``cli-small`` (``make test``: a few examples per option, well under a
minute; where a value is accepted, loading a model or building a trainer stops there, as a
success) and ``cli-full`` (``make test-fuzz``, marker ``fuzz``: many examples per option, and
accepted values train for real). SB3 training and serving are always stopped at their start.

``ISSUE_52`` holds issue 52's bad inputs as explicit cases, each run every time (counts above
their caps, LoRA and token limits past the model's shape, empty, duplicate and repeated-option
agents, ``--host ''``, ``--output ''``, ``--stop-after nan``, ``render_mode=human`` with no
display): exit 2 and one sentence.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.main import get_command
from typer.testing import CliRunner

from llmgym.cli import app

sys.path.insert(0, str(Path(__file__).parent / "support"))
from bandit import register  # noqa: E402

BANDIT = register("a")
settings.register_profile(
    "cli-small",
    max_examples=5,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=list(HealthCheck),
)
settings.register_profile(
    "cli-full",
    max_examples=200,
    deadline=None,
    database=None,
    suppress_health_check=list(HealthCheck),
)

#: Per command: (its positional arguments, options that keep it small). ``{tmp}`` is a fresh
#: folder, ``{run}`` a small trained run (metrics and a checkpoint).
BASE: dict[str, tuple[list[str], list[str]]] = {
    "envs": ([], []),
    "play": (["Text-Blackjack-v1"], ["--episodes", "1"]),
    "eval": (
        ["Text-Blackjack-v1"],
        ["--agent", "random", "--episodes", "2", "--num-envs", "2", "--no-progress"],
    ),
    "bench": (
        [],
        ["--envs", BANDIT, "--agents", "random", "--episodes", "1"] + ["--output", "{tmp}/bench"],
    ),
    "baselines train": (["CartPole-v1"], ["--timesteps", "64"]),
    "train": (
        [BANDIT],
        ["--model", "tiny", "--steps", "8", "--num-envs", "8", "--episodes-per-update", "8"]
        + ["--no-progress", "--no-start-eval", "--final-eval-episodes", "2"]
        + ["--eval-episodes", "2", "--threads", "1", "--output", "{tmp}/run"],
    ),
    "plot": (["{run}"], ["--out", "{tmp}/curve.png"]),
    "serve": (["Text-Blackjack-v1"], ["--port", "0", "--stop-after", "0.05"]),
    "export": (["{run}", "{tmp}/export"], []),
    "recipes": (["Text-Blackjack-v1"], []),
}
#: Keys whose values the KEY=VALUE options get bad values for.
SET_KEYS = ["lr", "learning_rate", "lora.r", "gamma", "num_envs", "minibatch_size"]
SET_KEYS += ["temperature", "eval.episodes", "max_grad_norm", "total_env_steps", "model"]
SET_KEYS += ["sft", "head_lr", "history", "seed", "device"]
ENV_KEYS = ["max_episode_steps", "history", "invalid_penalty", "describer", "on_invalid"]
ENV_KEYS += ["good", "nope"]
LLM_KEYS = ["temperature", "top_p", "history", "max_new_tokens", "mode", "bogus"]
# issue 52: counts with caps, limits from the model's shape, a window without a display
SET_KEYS += ["episodes_per_update", "sft.episodes", "max_new_tokens", "lora.layers"]
SET_KEYS += ["lora.target_modules"]
ENV_KEYS += ["render_mode"]
ISSUE_52_VALUES = ["1000000000", "[]", "human"]

NON_UTF8 = b"\xff\xfe run".decode("utf-8", "surrogateescape")


def bad_values(tmp: Path) -> st.SearchStrategy[str]:
    """The bad values the issue lists, as the text a shell would pass."""
    (tmp / "a-folder").mkdir(exist_ok=True)
    plain = [
        "nan",
        "NaN",
        "inf",
        "-inf",
        "-1",
        "-7.5",
        "0",
        "0.0",
        "1e30",
        "100000000000000000000",
        "",
        NON_UTF8,
        str(tmp / "a-folder"),
        "/dev/full",
        str(tmp / "missing" / "path"),
    ]
    return st.sampled_from(plain + ISSUE_52_VALUES)


def value_strategy(command: str, option: str, tmp: Path, run: Path) -> st.SearchStrategy[str]:
    """Bad values for one option: bare, or the value of a KEY=VALUE option's key (an ``llm:``
    agent's options on the small trained run: a model that loads in a second)."""
    bad = bad_values(tmp)
    if option == "--set":
        return st.builds(lambda k, v: f"{k}={v}", st.sampled_from(SET_KEYS), bad) | bad
    if option == "--env-kwarg":
        return st.builds(lambda k, v: f"{k}={v}", st.sampled_from(ENV_KEYS), bad) | bad
    if option in ("--agent", "--agents"):
        options = st.builds(lambda k, v: f"llm:tiny@{run},{k}={v}", st.sampled_from(LLM_KEYS), bad)
        runs = bad.map(lambda v: f"llm:tiny@{v}")
        return bad | options | runs
    return bad


def _leaves(group, path=()):
    for name, command in sorted(group.commands.items()):
        if hasattr(command, "commands"):
            yield from _leaves(command, (*path, name))
        else:
            yield " ".join((*path, name)), command


def targets() -> list[tuple[str, str]]:
    """(command, option or positional) for every value-taking parameter of every command; a
    command with none (``envs``) gets an extra argument instead."""
    found = []
    for name, command in _leaves(get_command(app)):
        params = [p for p in command.params if not getattr(p, "is_flag", False)]
        values = [p.opts[0] if p.param_type_name == "option" else f"#{p.name}" for p in params]
        found += [(name, v) for v in (values or ["#extra"])]
    return found


TARGETS = targets()


def test_every_command_has_a_small_invocation():
    assert {name for name, _ in TARGETS} == set(BASE)


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory) -> Path:
    """A small run: metrics that plot and a checkpoint that exports."""
    pytest.importorskip("peft")
    from llmgym.rl import make_trainer

    run = tmp_path_factory.mktemp("fuzz") / "run"
    trainer = make_trainer(
        "reinforce",
        env_id=BANDIT,
        model="tiny",
        output_dir=str(run),
        num_envs=8,
        episodes_per_update=8,
        minibatch_size=8,
        eval_every=0,
        progress=False,
    )
    trainer.run_iteration()
    trainer.checkpointer.save_checkpoint()
    (run / "metrics.jsonl").write_text('{"env_steps": 8, "eval/mean_return": 0.5}\n')
    return run


class Started(Exception):
    """Raised where an accepted value would start the expensive part (a success)."""


@pytest.fixture
def cheap(monkeypatch, request):
    """Stop SB3 training and serving at their start; under ``cli-small`` also model loading
    and trainers."""

    def started(*args, **kwargs):
        raise Started()

    sb3 = pytest.importorskip("stable_baselines3")
    monkeypatch.setattr(sb3.common.base_class.BaseAlgorithm, "learn", started)
    uvicorn = pytest.importorskip("uvicorn")
    monkeypatch.setattr(uvicorn.Server, "run", started)
    if request.param == "cli-small":
        import llmgym.policy.models
        import llmgym.rl.trainer

        monkeypatch.setattr(llmgym.rl.trainer, "Trainer", started)
        monkeypatch.setattr(llmgym.policy.models, "load_model", started)


def argv_for(command: str, target: str, value: str, tmp: Path, run: Path) -> list[str]:
    positionals, options = BASE[command]
    fill = [a.format(tmp=tmp, run=run) for a in positionals]
    rest = [a.format(tmp=tmp, run=run) for a in options]
    if target == "#extra":
        fill.append(value)
    elif target.startswith("#"):
        index = [p.name for p in _command(command).params if p.param_type_name == "argument"]
        fill[index.index(target[1:])] = value
    else:
        rest += [target, value]
    return [*command.split(), *fill, *rest]


def _command(name: str):
    return dict(_leaves(get_command(app)))[name]


def check(argv: list[str]) -> Any:
    """Run ``argv``: exit 0, or exit 2 with one ``Error:`` line; never a traceback. The result."""
    result = CliRunner().invoke(app, argv)
    shown = f"{argv!r}\nexit {result.exit_code}\nstdout {result.stdout!r}\nstderr {result.stderr!r}"
    if isinstance(result.exception, Started):
        return result  # accepted: it got as far as loading a model or training
    assert result.exception is None or isinstance(result.exception, SystemExit), (
        f"{shown}\n{result.exception!r}"
    )
    assert "Traceback" not in result.output, shown
    assert result.exit_code in (0, 2), shown
    if result.exit_code == 2:
        lines = result.stderr.splitlines()
        assert len(lines) == 1 and lines[0].startswith("Error: "), shown
        assert "Error: Error" not in lines[0], shown
    return result


def _fuzz(profile: str, command: str, target: str, tmp_path_factory, run_dir, monkeypatch):
    tmp = tmp_path_factory.mktemp("cli")
    monkeypatch.chdir(tmp)

    @settings(settings.get_profile(profile))
    @given(value=value_strategy(command, target, tmp, run_dir))
    def drive(value):
        check(argv_for(command, target, value, tmp_path_factory.mktemp("case"), run_dir))

    drive()


@pytest.mark.parametrize("cheap", ["cli-small"], indirect=True)
@pytest.mark.parametrize("command, target", TARGETS, ids=[f"{c}:{t}" for c, t in TARGETS])
def test_a_bad_value_is_one_sentence_and_exit_2(
    command, target, cheap, tmp_path_factory, run_dir, monkeypatch
):
    _fuzz("cli-small", command, target, tmp_path_factory, run_dir, monkeypatch)


@pytest.mark.fuzz
@pytest.mark.parametrize("cheap", ["cli-full"], indirect=True)
@pytest.mark.parametrize("command, target", TARGETS, ids=[f"{c}:{t}" for c, t in TARGETS])
def test_many_bad_values_are_one_sentence_and_exit_2(
    command, target, cheap, tmp_path_factory, run_dir, monkeypatch
):
    _fuzz("cli-full", command, target, tmp_path_factory, run_dir, monkeypatch)


#: Issue 52's bad inputs, each as the whole command the audit ran (the generated values above
#: reach most of them by chance; these reach each one every time): exit 2, one sentence.
ISSUE_52: dict[str, list[str]] = {
    "episodes-per-update 10^8": ["train", "--episodes-per-update", "100000000"],
    "group_size 10^9": ["train", "--algo", "grpo", "--set", "group_size=1000000000"],
    "lora_r 10^9": ["train", "--set", "lora_r=1000000000"],
    "lora_layers 999": ["train", "--set", "lora_layers=999"],
    "lora.target_modules []": ["train", "--set", "lora.target_modules=[]"],
    "max_new_tokens 10^9": ["train", "--mode", "generate", "--set", "max_new_tokens=1000000000"],
    "sft.episodes 1e15": ["train", "--sft", "auto", "--set", "sft.episodes=1e15"],
    "train --output ''": ["train", "--output", ""],
    "train render_mode=human": ["train", "--env-kwarg", "render_mode=human"],
    "eval render_mode=human": ["eval", "--env-kwarg", "render_mode=human"],
    "bench render_mode=human": ["bench", "--env-kwarg", "render_mode=human"],
    "eval --output ''": ["eval", "--output", ""],
    "serve --host ''": ["serve", "--host", ""],
    "serve --stop-after nan": ["serve", "--stop-after", "nan"],
    "agents random,,random": ["bench", "--agents", "random,,random"],
    "agents random,": ["bench", "--agents", "random,"],
    "agents random,random": ["bench", "--agents", "random,random"],
    "agent option twice (bench)": ["bench", "--agents", "llm:tiny,mode=generate,mode=score"],
    "agent option twice (eval)": ["eval", "--agent", "llm:tiny,mode=generate,mode=score"],
}


def issue_52_argv(case: str, tmp: Path) -> list[str]:
    """The case's command on the small invocation of its subcommand; its own options last, so
    they win over the small invocation's (``--output``, ``--agents``)."""
    command, *extra = ISSUE_52[case]
    positionals, options = BASE[command]
    return [command, *positionals, *[a.format(tmp=tmp) for a in options], *extra]


@pytest.mark.parametrize("case", list(ISSUE_52))
def test_the_bad_inputs_of_issue_52_are_one_sentence_and_exit_2(case, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("DISPLAY", raising=False)  # render_mode=human: a machine with no display
    monkeypatch.delenv("WAYLAND_DISPLAY", raising=False)
    monkeypatch.setattr(sys, "platform", "linux")
    argv = issue_52_argv(case, tmp_path)
    result = check(argv)
    assert result.exit_code == 2, f"{argv!r} exited {result.exit_code}: {result.output[-500:]}"


def _real(args: list, tmp: Path) -> subprocess.CompletedProcess:
    """``llmgym ARGS`` in its own process (the bandit registered), output as bytes."""
    code = "import sys; from bandit import register; register('a'); from llmgym.cli import main; "
    code += "main(sys.argv[1:])"
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).parent / "support"))
    return subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, cwd=tmp, env=env, timeout=600
    )


def test_a_path_of_undecodable_bytes_is_written_and_printed_escaped(tmp_path):
    """A terminal's stdout takes no lone surrogates: the path prints escaped, not a crash."""
    out = b"r\xff\xfe.json"
    args = ["eval", "Text-Blackjack-v1", "--agent", "random", "--episodes", "2", "--output"]
    proc = _real([*args, out], tmp_path)
    assert proc.returncode == 0 and not proc.stderr, proc.stderr
    assert (tmp_path / os.fsdecode(out)).exists()
    assert b"wrote r\\udcff\\udcfe.json" in proc.stdout


def test_an_error_after_a_model_loaded_is_one_line_in_a_real_process(tmp_path):
    """The libraries' deprecation notes, printed while the model loads and trains, stay off
    stderr: the error is its one line."""
    _, options = BASE["train"]
    args = ["train", BANDIT, *[a.format(tmp=tmp_path) for a in options]]
    proc = _real([*args, "--result-json", "/dev/full"], tmp_path)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.decode().splitlines() == [
        "Error: Cannot write /dev/full (No space left on device); free some space or pick "
        "another path."
    ]
