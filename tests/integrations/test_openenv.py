"""``llmgym serve``: a real server on loopback, driven by OpenEnv's own client and validator."""

from __future__ import annotations

import json
import re
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import gymnasium as gym
import pytest

import llmgym  # noqa: F401

pytest.importorskip("openenv")
pytest.importorskip("uvicorn")

from openenv.core import GenericEnvClient  # noqa: E402
from websockets.sync.client import connect  # noqa: E402

from llmgym.integrations.openenv import TextAction, TextEnvClient  # noqa: E402

ENV_ID = "Text-Blackjack-v1"
MAX_SESSIONS = 3
ANSWERS = ['{"action": "hit"}', "stick", "HIT!!", "", "nonsense", '{"action": 7}', "hit"]


@pytest.fixture(scope="module")
def server():
    """``llmgym serve`` on 127.0.0.1 at a free port; it stops itself after 300 s at the latest."""
    process = subprocess.Popen(
        [sys.executable, "-m", "llmgym", "serve", ENV_ID, "--host", "127.0.0.1", "--port", "0"]
        + ["--max-sessions", str(MAX_SESSIONS), "--stop-after", "300"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    line = process.stdout.readline()
    match = re.search(r"http://127\.0\.0\.1:(\d+)", line)
    if not match:
        process.kill()
        pytest.fail(f"server did not start: {line!r}")
    yield f"http://127.0.0.1:{match.group(1)}"
    process.terminate()
    process.wait(timeout=30)


def client(url: str) -> TextEnvClient:
    return TextEnvClient(base_url=url, message_timeout_s=30).sync()


def replay(seed: int, answers: list[str]) -> list[tuple[str, float, bool]]:
    """(observation, reward, done) per step of ``gym.make`` played with ``answers``."""
    env = gym.make(ENV_ID)
    obs, _ = env.reset(seed=seed)
    out = [(obs, 0.0, False)]
    for text in answers:
        obs, reward, terminated, truncated, _ = env.step(text)
        out.append((obs, float(reward), bool(terminated or truncated)))
        if terminated or truncated:
            break
    return out


def play(c: TextEnvClient, seed: int, answers: list[str]) -> list[tuple[str, float, bool]]:
    result = c.reset(seed=seed)
    out = [(result.observation.text, 0.0, result.done)]
    for text in answers:
        result = c.step(TextAction(text=text))
        out.append((result.observation.text, float(result.reward), result.done))
        if result.done:
            break
    return out


def test_seeded_episodes_equal_gym_make(server):
    with client(server) as c:
        for seed in range(12):
            answers = ANSWERS[seed % 3 :]
            assert play(c, seed, answers) == replay(seed, answers)
        state = c.state()
        assert state.env_id == ENV_ID and state.seed == 11 and state.step_count >= 1


def test_observation_carries_prompt_actions_and_parse(server):
    with client(server) as c:
        first = c.reset(seed=3).observation
        assert first.valid_actions == ["stick", "hit"] and "blackjack" in first.system_prompt
        step = c.step(TextAction(text="nonsense")).observation
    env = gym.make(ENV_ID)
    env.reset(seed=3)
    parse = env.step("nonsense")[4]["parse"]
    assert step.parse == {k: v.item() if hasattr(v, "item") else v for k, v in parse.items()}
    assert step.parse["ok"] is False


def test_concurrent_sessions_are_isolated_and_capped(server):
    clients = [client(server) for _ in range(MAX_SESSIONS)]
    try:
        seeds = [100, 200, 300]
        results = [[(c.reset(seed=s).observation.text, 0.0, False)] for c, s in zip(clients, seeds)]
        for text in ["hit", "hit", "stick", "hit", "stick"]:
            for i, c in enumerate(clients):  # interleaved: each step lands between the others'
                if results[i][-1][2]:
                    continue
                r = c.step(TextAction(text=text))
                results[i].append((r.observation.text, float(r.reward), r.done))
        for s, got in zip(seeds, results):
            answers = ["hit", "hit", "stick", "hit", "stick"][: len(got) - 1]
            assert got == replay(s, answers)
        with pytest.raises(Exception, match="(?i)capacity|max"):
            with client(server) as extra:
                extra.reset(seed=0)
    finally:
        for c in clients:
            c.close()
    with client(server) as again:  # sessions closed: capacity is back
        assert again.reset(seed=1).observation.text == replay(1, [])[0][0]


def test_malformed_requests_are_answered_and_serving_continues(server):
    host, port = server.removeprefix("http://").split(":")
    ws_url = f"ws://{host}:{port}/ws"
    with connect(ws_url, open_timeout=10, close_timeout=5) as ws:
        for bad in [
            {"type": "step", "data": {"text": 5}},  # non-string action
            {"type": "step", "data": {"txt": "hit"}},  # wrong field
            {"type": "step", "data": {"text": "hit"}},  # before any reset
            {"type": "dance"},
        ]:
            ws.send(json.dumps(bad))
            reply = json.loads(ws.recv(timeout=10))
            assert reply["type"] == "error" and reply["data"]["message"]
        ws.send("{not json")
        assert json.loads(ws.recv(timeout=10))["data"]["code"] == "INVALID_JSON"
        ws.send(json.dumps({"type": "reset", "data": {"seed": 4}}))  # same session still serves
        reply = json.loads(ws.recv(timeout=10))
        assert reply["type"] == "observation"
        assert reply["data"]["observation"]["text"] == replay(4, [])[0][0]
    with connect(f"{ws_url}?session_id=no-such-session", open_timeout=10) as ws:
        reply = json.loads(ws.recv(timeout=10))
        assert reply["type"] == "error" and "Unknown session_id" in reply["data"]["message"]
    with GenericEnvClient(base_url=server).sync() as generic:  # OpenEnv's untyped client
        generic.reset(seed=0)
        with pytest.raises(RuntimeError, match="(?i)valid string|invalid"):
            generic.step({"text": ["hit"]})
        assert generic.reset(seed=5).observation["text"] == replay(5, [])[0][0]


def test_openenv_validate_passes(server):
    openenv = shutil.which("openenv", path=str(Path(sys.executable).parent))
    assert openenv, "the openenv CLI is installed with the openenv extra"
    result = subprocess.run(
        [openenv, "validate", "--url", server], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Verdict: PASS" in result.stdout


def test_serve_user_errors_are_one_sentence():
    from typer.testing import CliRunner

    from llmgym.cli import app

    runner = CliRunner()
    unknown = runner.invoke(app, ["serve", "Text-Nope-v0"], env={"COLUMNS": "200"})
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = str(busy.getsockname()[1])
        taken = runner.invoke(app, ["serve", ENV_ID, "--port", port], env={"COLUMNS": "200"})
    for result, words in [(unknown, "Unknown environment"), (taken, "Cannot listen")]:
        assert result.exit_code == 2 and words in result.output
        assert "Traceback" not in result.output and len(result.output.strip().splitlines()) == 1
