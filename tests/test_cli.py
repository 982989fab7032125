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
