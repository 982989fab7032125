"""The vLLM client without vLLM: a fake OpenAI-compatible server on 127.0.0.1 whose log-prob
of token t after a prompt of n tokens is -(t + n) / 1000, and the one-sentence errors."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from llmgym.agents.backends import vllm as vllm_backend
from llmgym.agents.backends.vllm import VLLMError, VLLMServer
from llmgym.errors import LLMGymError


class FakeVLLM(BaseHTTPRequestHandler):
    requests: list[dict] = []

    def log_message(self, *args) -> None:  # quiet
        pass

    def _reply(self, body: dict) -> None:
        data = json.dumps(body).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        self._reply({"data": [{"id": "fake-model"}]})

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        FakeVLLM.requests.append(body)
        ids = body.get("logprob_token_ids") or []
        choices = [
            {
                "index": i,
                "token_ids": [7],
                "logprobs": {
                    "token_logprobs": [-0.5],
                    "top_logprobs": [{f"token_id:{t}": -(t + len(p)) / 1000 for t in ids}],
                },
            }
            for i, p in enumerate(body["prompt"])
        ]
        self._reply({"choices": choices[::-1]})  # out of order: the client sorts by index


@pytest.fixture
def server():
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), FakeVLLM)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    FakeVLLM.requests = []
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()


def test_candidate_logprobs_follow_each_candidate_prefix(server, monkeypatch):
    monkeypatch.setattr(vllm_backend, "MAX_TOKEN_IDS", 2)  # forces chunked requests
    client = VLLMServer(server)
    assert client.model == "fake-model"
    prompts = [[1, 2, 3], [4]]
    candidates = [[[10, 11], [12]], [[13, 14, 15], [13, 16]]]
    got = client.candidate_logprobs(prompts, candidates)
    want = [
        [[-(10 + 3) / 1000, -(11 + 4) / 1000], [-(12 + 3) / 1000]],
        [[-(13 + 1) / 1000, -(14 + 2) / 1000, -(15 + 3) / 1000], [-(13 + 1) / 1000, -0.018]],
    ]
    flat = [x for env in got for cand in env for x in cand]
    assert [len(c) for env in got for c in env] == [len(c) for env in want for c in env]
    assert flat == pytest.approx([x for env in want for cand in env for x in cand])
    assert all(len(r["logprob_token_ids"]) <= 2 for r in FakeVLLM.requests)


def test_generate_returns_the_ids_and_logprobs_with_the_stop_rules(server):
    rows = VLLMServer(server, model="m").complete(
        [[1, 2]],
        max_tokens=5,
        stop_token_ids=[9],
        temperature=0.7,
        top_p=0.9,
        greedy=False,
        seed=3,
    )
    assert rows == [([7], [-0.5])]
    sent = FakeVLLM.requests[-1]
    assert (sent["model"], sent["stop_token_ids"], sent["seed"], sent["max_tokens"]) == (
        "m",
        [9],
        3,
        5,
    )


def test_identical_prompts_in_one_batch_get_their_own_seeds(server):
    client = VLLMServer(server, model="m")
    kwargs = dict(max_tokens=5, stop_token_ids=[9], temperature=0.7, top_p=0.9)
    rows = client.complete([[1, 2], [1, 2], [1, 2]], greedy=False, seed=3, **kwargs)
    assert rows == [([7], [-0.5])] * 3
    sampled = FakeVLLM.requests[-3:]
    assert all(len(r["prompt"]) == 1 for r in sampled)
    assert sorted(r["seed"] for r in sampled) == [3, 4, 5]
    FakeVLLM.requests = []
    client.complete([[1, 2], [1, 2]], greedy=True, seed=3, **kwargs)
    assert len(FakeVLLM.requests) == 1 and "seed" not in FakeVLLM.requests[0]
    assert FakeVLLM.requests[0]["temperature"] == 0.0


def test_a_reply_missing_a_requested_token_is_one_sentence(server, monkeypatch):
    client = VLLMServer(server)
    real = client._complete

    def drop_token_12(prompts, **params):
        choices = real(prompts, **params)
        for choice in choices:
            choice["logprobs"]["top_logprobs"][0].pop("token_id:12", None)
        return choices

    monkeypatch.setattr(client, "_complete", drop_token_12)
    with pytest.raises(VLLMError, match="returned no log-prob for token 12"):
        client.candidate_logprobs([[1]], [[[10], [12]]])


def test_errors_are_one_sentence():
    from llmgym.agents.policy import LLMPolicy, PolicyConfig
    from llmgym.agents.testing import tiny_tokenizer

    with pytest.raises(VLLMError, match="needs the server's URL"):
        VLLMServer("")
    with pytest.raises(VLLMError, match="No vLLM server answers at http://127.0.0.1:9"):
        LLMPolicy(
            None, tiny_tokenizer(), PolicyConfig(backend="vllm", vllm_url="http://127.0.0.1:9")
        )
    assert issubclass(VLLMError, LLMGymError) and issubclass(VLLMError, ValueError)
    with pytest.raises(ValueError, match="backend must be one of hf, vllm"):
        PolicyConfig(backend="sglang")
