import subprocess
import sys

from typer.testing import CliRunner

from llmgym.cli import app

runner = CliRunner()


def test_envs_lists_ids_and_thresholds():
    result = runner.invoke(app, ["envs"], env={"COLUMNS": "200"})
    assert result.exit_code == 0
    assert "Text-Blackjack-v1" in result.output and "stick, hit" in result.output
    assert "475" in result.output


def test_play_an_episode_from_stdin():
    result = runner.invoke(app, ["play", "Text-Blackjack-v1", "--seed", "3"], input="hit\nstick\n")
    assert result.exit_code == 0, result.output
    assert "parsed by regex: hit (1)" in result.output
    assert "Episode over" in result.output


def test_play_ends_cleanly_on_eof():
    result = runner.invoke(app, ["play", "Text-CartPole-v1"], input="LEFT\n")
    assert result.exit_code == 0
    assert "Bye." in result.output


def test_unknown_env_is_one_sentence_and_nonzero():
    proc = subprocess.run(
        [sys.executable, "-m", "llmgym", "play", "Text-Nope-v0"], capture_output=True, text=True
    )
    assert proc.returncode == 2
    assert "Unknown environment 'Text-Nope-v0'" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_bad_option_exits_nonzero_without_traceback():
    proc = subprocess.run(
        [sys.executable, "-m", "llmgym", "play", "Text-Blackjack-v1", "--bogus"],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "No such option" in proc.stderr


def _help_blocks(text: str) -> dict[str, str]:
    """Each option of a rich ``--help`` and the text of its rows, joined on one line."""
    blocks: dict[str, list[str]] = {}
    current = None
    for line in text.splitlines():
        row = line.strip().strip("│").strip()
        if row.startswith("--"):
            current = row.split()[0]
            blocks[current] = []
        if current is not None and row and not row.startswith("╰"):
            blocks[current].append(row)
    return {name: " ".join(" ".join(rows).split()) for name, rows in blocks.items()}


def test_train_help_shows_the_config_defaults_and_docs():
    """Every option that sets a config key takes its default and help from the dataclass, and
    every algorithm's config has that default (an option left out keeps the algorithm's)."""
    import re

    import typer

    from llmgym.cli.train import CONFIG_OPTIONS
    from llmgym.rl import ALGOS, config_class
    from llmgym.rl.config import default_value, field_doc

    command = typer.main.get_command(app).commands["train"]
    params = {p.name: p for p in command.params}
    result = runner.invoke(app, ["train", "--help"], env={"COLUMNS": "300"})
    assert result.exit_code == 0, result.output
    blocks = _help_blocks(result.output)
    for name, key in CONFIG_OPTIONS.items():
        defaults = {default_value(config_class(algo), key) for algo in ALGOS}
        assert defaults == {params[name].default}, (name, defaults)
        block = blocks[params[name].opts[0]]
        shown = re.findall(r"\[default: (.*?)\]", block)
        default = params[name].default  # none shown for "" and None (--stop-at)
        assert shown == ([str(default)] if default not in ("", None) else []), block
        doc = field_doc(config_class("ppo"), key).replace("``", "")
        assert doc and " ".join(doc.split()) in block and f"config key {key}" in block, block
