"""Issue 52, part A: bad input at the edges (serve, play, bench, baselines) gets one sentence
and exit code 2, or a 4xx with one sentence; no traceback, no partial file."""

from __future__ import annotations

import errno
import json
import socket
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from typer.testing import CliRunner

from llmgym.bench import records
from llmgym.cli import app

BENCH = ["bench", "--envs", "Text-CliffWalking-v1", "--agents", "optimal", "--episodes", "3"]


def _error(args: list[str]) -> str:
    """The one sentence a refused command prints (exit code 2, no traceback; progress lines
    before it are stdout's)."""
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    errors = [line for line in result.output.splitlines() if "Error" in line]
    assert len(errors) == 1 and errors[0].startswith("Error: "), result.output
    return errors[0]


def test_serve_refuses_an_empty_host():
    assert "--host is empty" in _error(["serve", "Text-Blackjack-v1", "--host", ""])
    assert "--host is empty" in _error(["serve", "Text-Blackjack-v1", "--host", "  "])


@pytest.mark.parametrize(
    ("agents", "message"),
    [
        ("random,,random", "has an empty name"),
        ("random,", "has an empty name"),
        ("random,random", "names 'random' twice"),
        ("llm:tiny,mode=generate,mode=score", "sets 'mode' twice; set each option once."),
    ],
)
def test_bench_refuses_empty_duplicate_and_repeated_option_agents(tmp_path, agents, message):
    args = ["bench", "--envs", "Text-Taxi-v4", "--agents", agents, "--output", str(tmp_path)]
    assert message in _error(args)
    assert not any(tmp_path.iterdir())


def test_eval_refuses_an_agent_option_given_twice():
    args = ["eval", "Text-Taxi-v4", "--agent", "llm:tiny,temperature=1,temperature=0.5"]
    assert "sets 'temperature' twice" in _error(args)


@pytest.mark.parametrize(
    ("code", "reason"),
    [(errno.ENOSPC, "No space left on device"), (errno.EROFS, "Read-only file system")],
)
def test_bench_disk_errors_name_the_file(tmp_path, monkeypatch, code, reason):
    def refused(sink, data):
        raise OSError(code, reason)

    monkeypatch.setattr(records, "_write_all", refused)
    line = _error([*BENCH, "--output", str(tmp_path)])
    assert f"Cannot write {tmp_path / 'episodes.jsonl'} ({reason})" in line
    assert (tmp_path / "episodes.jsonl").read_bytes() == b""


def test_a_torn_line_in_the_middle_of_episodes_jsonl_is_dropped_and_replayed(tmp_path):
    assert CliRunner().invoke(app, [*BENCH, "--output", str(tmp_path)]).exit_code == 0
    path = tmp_path / "episodes.jsonl"
    lines = path.read_bytes().splitlines(keepends=True)
    lines[1] = lines[1][:25] + b"\xff\n"  # seed 1's row, torn, with a byte that is not UTF-8
    path.write_bytes(b"".join(lines))
    with pytest.warns(RuntimeWarning, match="dropped 1 torn line"):
        result = CliRunner().invoke(app, [*BENCH, "--output", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert "1 episodes to play" in result.output
    rows = [json.loads(line) for line in path.read_bytes().splitlines()]
    assert sorted(r["seed"] for r in rows) == [0, 1, 2]


def test_baselines_train_refuses_a_cache_that_is_a_zip_of_pickles(tmp_path, monkeypatch):
    pytest.importorskip("stable_baselines3")
    from llmgym.baselines import sb3

    monkeypatch.setenv("LLMGYM_CACHE", str(tmp_path))
    path = sb3.model_path("CartPole-v1", "ppo", 0, None)
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("data.pkl", b"\x80\x04N.")  # pickle.dumps(None)
    line = _error(["baselines", "train", "CartPole-v1", "--algo", "ppo"])
    assert f"The cached baseline {path} is unreadable" in line
    assert "Reused" not in line


def _play(stdin: bytes | str, tmp_path: Path, limit_kb: int = 0) -> subprocess.CompletedProcess:
    """``llmgym play`` in a real process reading ``stdin`` (a path: that file), its memory
    capped at ``limit_kb`` (0: no cap)."""
    cap = f"ulimit -v {limit_kb}; " if limit_kb else ""
    source = f"< {stdin}" if isinstance(stdin, str) else ""
    command = f"{cap}exec {sys.executable} -m llmgym play Text-Blackjack-v1 {source}"
    given = None if isinstance(stdin, str) else stdin
    return subprocess.run(
        ["bash", "-c", command], input=given, capture_output=True, timeout=120, cwd=tmp_path
    )


def test_play_refuses_an_answer_line_above_64_kib(tmp_path):
    result = _play(b"x" * (1 << 17) + b"\n", tmp_path)
    assert result.returncode == 2
    assert result.stderr.decode().strip() == (
        "Error: An answer line is above 65,536 bytes; answer in fewer."
    )


def test_play_reads_dev_zero_in_bounded_memory(tmp_path):
    """An endless line (/dev/zero) ends the game with the sentence, under a 2 GB cap that an
    unbounded read would pass within seconds."""
    result = _play("/dev/zero", tmp_path, limit_kb=2_000_000)
    assert result.returncode == 2
    assert "answer line is above 65,536 bytes" in result.stderr.decode()


def test_play_takes_answers_that_are_not_utf8(tmp_path):
    result = _play(b"\xff\xfe\nstick\n", tmp_path)
    assert result.returncode == 0, result.stderr.decode()
    assert "Episode over" in result.stdout.decode()


@pytest.fixture(scope="module")
def server():
    """``llmgym serve`` on loopback at a free port (it stops itself after 120 s at the latest)."""
    pytest.importorskip("openenv")
    process = subprocess.Popen(
        [sys.executable, "-m", "llmgym", "serve", "Text-Blackjack-v1", "--port", "0"]
        + ["--stop-after", "120"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    line = process.stdout.readline()
    port = int(line.split("http://127.0.0.1:")[1].split()[0])
    yield port
    process.terminate()
    process.wait(timeout=30)


def _get(port: int, header_bytes: int) -> bytes:
    """The start of the answer to a GET /health whose one header is ``header_bytes`` long."""
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        head = b"GET /health HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * header_bytes + b"\r\n\r\n"
        sock.sendall(head)
        answer = b""
        while b"\r\n\r\n" not in answer or answer.count(b"}") < 1:
            chunk = sock.recv(4096)
            if not chunk:
                break
            answer += chunk
        return answer


@pytest.mark.parametrize("size", [70_000, 100_000, 300_000, 2_000_000])
def test_headers_above_64_kib_get_431_with_a_sentence(server, size):
    answer = _get(server, size)
    assert answer.startswith(b"HTTP/1.1 431 "), answer[:80]
    assert b"headers are above the limit of 65,536 bytes" in answer


def test_headers_below_64_kib_are_served(server):
    assert _get(server, 60_000).startswith(b"HTTP/1.1 200 ")


def test_deeply_nested_json_gets_a_sentence_not_internal_text(server):
    from websockets.sync.client import connect

    with connect(f"ws://127.0.0.1:{server}/ws", max_size=None) as ws:
        for depth in (40, 10_000, 100_000):
            ws.send('{"type": "step", "data": ' + "[" * depth + "]" * depth + "}")
            message = json.loads(ws.recv())["data"]["message"]
            assert message == (
                "The request nests lists or objects deeper than 32 levels; send less."
            )
        ws.send('{"type": "reset", "data": {"seed": 0}}')  # the session goes on
        assert json.loads(ws.recv())["type"] == "observation"
    import urllib.error
    import urllib.request

    body = b'{"seed": ' + b"[" * 50_000 + b"]" * 50_000 + b"}"
    request = urllib.request.Request(
        f"http://127.0.0.1:{server}/reset", body, {"content-type": "application/json"}
    )
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request, timeout=30)
    assert refused.value.code == 400
    assert "deeper than 32 levels" in json.loads(refused.value.read())["detail"]
