"""Issue 37, item 4: the OpenEnv server answers every request with a result or a 4xx with a
reason, never a 500; HTTP /step says HTTP is stateless; bodies are capped alike (1 MiB) on
HTTP and WebSocket; WebSocket errors name the problem, not internals."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("openenv")
pytest.importorskip("fastapi")

from fastapi.testclient import TestClient  # noqa: E402
from starlette.websockets import WebSocketDisconnect  # noqa: E402

from llmgym.integrations.openenv import MAX_BODY_BYTES, create_server_app  # noqa: E402

ENV_ID = "Text-Blackjack-v1"


@pytest.fixture(scope="module")
def client():
    with TestClient(create_server_app(ENV_ID), raise_server_exceptions=False) as client:
        yield client


def _post(client, path, body):
    raw = body if isinstance(body, (str, bytes)) else json.dumps(body)
    return client.post(path, content=raw, headers={"content-type": "application/json"})


def test_http_step_without_reset_says_http_is_stateless(client):
    response = _post(client, "/step", {"action": {"text": "hit"}})
    assert response.status_code == 409
    detail = response.json()["detail"]
    assert "HTTP is stateless" in detail and "WebSocket" in detail


BAD_HTTP = [
    ("/reset", '{"seed": NaN}', "finite"),
    ("/reset", '{"seed": Infinity}', "finite"),
    ("/reset", {"seed": "abc"}, "seed"),
    ("/reset", {"seed": -1}, "seed"),
    ("/reset", {"seed": 1.5}, "seed"),
    ("/reset", {"episode_id": 5}, "episode_id"),
    ("/reset", [1, 2], "dictionary"),
    ("/reset", "not json", "not valid JSON"),
    ("/step", {"action": {"text": 5}}, "text"),
    ("/step", '{"action": {"text": NaN}}', "text"),
    ("/step", {"action": [1]}, "action"),
    ("/step", {"action": "hit"}, "action"),
    ("/step", [1], "dictionary"),
    ("/step", {}, "action"),
    ("/step", "\xff\xfe", "JSON"),
    ("/reset", b"\xff\xfe{", "body"),
]


@pytest.mark.parametrize(("path", "body", "reason"), BAD_HTTP)
def test_bad_http_requests_get_a_4xx_with_a_reason(client, path, body, reason):
    response = _post(client, path, body)
    assert 400 <= response.status_code < 500, response.text
    detail = response.json()["detail"]
    assert isinstance(detail, str) and reason in detail, detail


def test_good_http_reset_still_works(client):
    response = _post(client, "/reset", {"seed": 0})
    assert response.status_code == 200
    assert response.json()["observation"]["valid_actions"] == ["stick", "hit"]


def test_bodies_are_capped_alike_on_http_and_websocket(client):
    big = json.dumps({"seed": 0, "pad": "x" * MAX_BODY_BYTES})
    response = _post(client, "/reset", big)
    assert response.status_code == 413 and "limit" in response.json()["detail"]

    def chunks():  # no Content-Length: the cap counts what arrives
        for _ in range(11):
            yield b"x" * (1 << 20)

    response = client.post("/reset", content=chunks())
    assert response.status_code == 413
    assert _post(client, "/reset", json.dumps({"seed": 0, "pad": "x" * 1000})).status_code == 200

    with client.websocket_connect("/ws") as ws:
        ws.send_text(
            json.dumps({"type": "reset", "data": {"seed": 0, "pad": "x" * MAX_BODY_BYTES}})
        )
        error = json.loads(ws.receive_text())
        assert error["type"] == "error" and "limit" in error["data"]["message"]
        with pytest.raises(WebSocketDisconnect) as closed:
            ws.receive_text()
        assert closed.value.code == 1009


BAD_WS = [
    ("[1]", "JSON object"),
    ('"x"', "JSON object"),
    ("null", "JSON object"),
    ("nonjson{", "not JSON"),
    ('{"type": 5}', '"type"'),
    ("{}", '"type"'),
    ('{"type": "step", "data": [1]}', '"data"'),
    ('{"type": "step", "data": {"text": 5}}', "text"),
    ('{"type": "step"}', "text"),
    ('{"type": "step", "data": {"text": "hit"}}', "reset first"),
    ('{"type": "reset", "data": {"seed": NaN}}', "seed"),
    ('{"type": "reset", "data": {"seed": "abc"}}', "seed"),
    ('{"type": "reset", "data": {"seed": -1}}', "seed"),
    ('{"type": "reset", "data": {"episode_id": 5}}', "episode_id"),
    ('{"type": "reset", "data": [1]}', '"data"'),
    ('{"type": "nope"}', "Unknown message type"),
]


def test_bad_websocket_messages_name_the_problem_and_the_session_goes_on(client):
    with client.websocket_connect("/ws") as ws:
        for message, reason in BAD_WS:
            ws.send_text(message)
            reply = json.loads(ws.receive_text())
            assert reply["type"] == "error", (message, reply)
            text = reply["data"]["message"]
            assert reason in text, (message, text)
            assert "object has no attribute" not in text and "Traceback" not in text
        ws.send_bytes(b"\x00\x01")
        assert "text frames" in json.loads(ws.receive_text())["data"]["message"]
        ws.send_text(json.dumps({"type": "reset", "data": {"seed": 0}}))
        assert json.loads(ws.receive_text())["type"] == "observation"
        ws.send_text(json.dumps({"type": "step", "data": {"text": "hit"}}))
        reply = json.loads(ws.receive_text())
        assert reply["type"] == "observation" and reply["data"]["observation"]["parse"]["ok"]
