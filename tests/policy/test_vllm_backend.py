"""The vLLM client without vLLM: a fake OpenAI-compatible server on 127.0.0.1 whose log-prob
of token t after a prompt of n tokens is -(t + n) / 1000 (and which records adapter loads),
the one-sentence errors, and training through it (weight sync, the log-prob gap metric)."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from llmgym.errors import LLMGymError
from llmgym.policy.backends import vllm as vllm_backend
from llmgym.policy.backends.vllm import VLLMError, VLLMServer


class FakeVLLM(BaseHTTPRequestHandler):
    requests: list[dict] = []
    #: Weight syncs: (route, body, the adapter or checkpoint directory was complete).
    adapters: list[tuple[str, dict, bool]] = []
    dev_mode = True  # False: no /collective_rpc (a server started without VLLM_SERVER_DEV_MODE)

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
        if self.path.startswith(("/collective_rpc", "/reset_prefix_cache")) and not self.dev_mode:
            self.send_error(404, "Not Found")
            return
        if self.path != "/v1/completions":  # weight sync: record what the server saw
            lora_path = body.get("lora_path", "")
            weights_path = body.get("kwargs", {}).get("weights_path", "")
            exists = bool(lora_path) and (Path(lora_path) / "adapter_config.json").is_file()
            exists |= bool(weights_path) and (Path(weights_path) / "model.safetensors").is_file()
            FakeVLLM.adapters.append((self.path, body, exists))
            self._reply({"success": True} if "reset_prefix_cache" in self.path else {})
            return
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
    FakeVLLM.adapters = []
    FakeVLLM.dev_mode = True
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()


#: Two prompts and their candidates, and the log-probs the fake engines give them (each token's
#: log-prob is -(token + position) / 1000).
PROMPTS = [[1, 2, 3], [4]]
CANDIDATES = [[[10, 11], [12]], [[13, 14, 15], [13, 16]]]
WANT_CANDIDATE_LOGPROBS = [
    [[-(10 + 3) / 1000, -(11 + 4) / 1000], [-(12 + 3) / 1000]],
    [[-(13 + 1) / 1000, -(14 + 2) / 1000, -(15 + 3) / 1000], [-(13 + 1) / 1000, -0.018]],
]


def test_candidate_logprobs_follow_each_candidate_prefix(server, monkeypatch):
    monkeypatch.setattr(vllm_backend, "MAX_TOKEN_IDS", 2)  # forces chunked requests
    client = VLLMServer(server)
    assert client.model == "fake-model"
    prompts, candidates, want = PROMPTS, CANDIDATES, WANT_CANDIDATE_LOGPROBS
    got = client.candidate_logprobs(prompts, candidates)
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
    from llmgym.policy import LLMPolicy, PolicyConfig
    from llmgym.policy.testing import tiny_tokenizer

    with pytest.raises(VLLMError, match="needs the server's URL"):
        VLLMServer("")
    with pytest.raises(VLLMError, match="No vLLM server answers at http://127.0.0.1:9"):
        LLMPolicy(
            None, tiny_tokenizer(), PolicyConfig(backend="vllm", vllm_url="http://127.0.0.1:9")
        )
    assert issubclass(VLLMError, LLMGymError) and issubclass(VLLMError, ValueError)
    with pytest.raises(ValueError, match="backend must be one of hf, vllm"):
        PolicyConfig(backend="sglang")


def test_sync_weights_loads_the_new_adapter_and_unloads_the_old(server, tmp_path):
    client = VLLMServer(server)
    with pytest.raises(VLLMError, match="no weight writer"):
        client.sync_weights()
    written = []

    def write(path):
        path.mkdir(parents=True)
        (path / "adapter_config.json").write_text("{}")
        written.append(path)

    client.use_adapters(write, tmp_path / "adapters", prefix="run")
    client.sync_weights()
    assert client.model == "run-1" and client.base_model == "fake-model"
    route, body, complete = FakeVLLM.adapters[-1]
    assert route == "/v1/load_lora_adapter" and complete
    assert (body["lora_name"], body["lora_path"]) == ("run-1", str(written[0].resolve()))
    client.sync_weights()
    assert client.model == "run-2"
    routes = [(r, b["lora_name"]) for r, b, _ in FakeVLLM.adapters]
    assert routes == [
        ("/v1/load_lora_adapter", "run-1"),
        ("/v1/load_lora_adapter", "run-2"),
        ("/v1/unload_lora_adapter", "run-1"),
    ]
    assert not written[0].exists() and written[1].exists()  # the replaced adapter is deleted
    client.candidate_logprobs([[1]], [[[10]]])
    assert FakeVLLM.requests[-1]["model"] == "run-2"  # acting uses the newest adapter


def _write_checkpoint(path: Path) -> None:
    path.mkdir(parents=True)
    (path / "model.safetensors").write_text("weights")


def test_sync_weights_reloads_a_full_fine_tune_and_drops_the_prefix_cache(server, tmp_path):
    client = VLLMServer(server)
    client.use_weights(_write_checkpoint, tmp_path / "weights", prefix="run")
    for _ in range(2):
        client.sync_weights()
    assert client.model == "fake-model"  # the same served model, new weights
    checkpoints = [(tmp_path / "weights" / f"run-{n}").resolve() for n in (1, 2)]
    assert [(r, b.get("kwargs"), complete) for r, b, complete in FakeVLLM.adapters] == [
        ("/collective_rpc", {"weights_path": str(checkpoints[0])}, True),
        ("/reset_prefix_cache?reset_running_requests=true", None, False),
        ("/collective_rpc", {"weights_path": str(checkpoints[1])}, True),
        ("/reset_prefix_cache?reset_running_requests=true", None, False),
    ]
    assert FakeVLLM.adapters[0][1]["method"] == "reload_weights"
    assert not checkpoints[0].exists() and checkpoints[1].exists()  # the replaced one deleted


def test_a_server_without_dev_routes_says_how_to_start_one(server, tmp_path):
    FakeVLLM.dev_mode = False
    client = VLLMServer(server)
    client.use_weights(_write_checkpoint, tmp_path / "weights")
    with pytest.raises(VLLMError, match="VLLM_SERVER_DEV_MODE=1") as error:
        client.sync_weights()
    assert str(error.value).count(". ") == 0


def _vllm_trainer(server, tmp_path, algo="reinforce", **extra):
    pytest.importorskip("peft")
    from llmgym.policy.testing import tiny_model
    from llmgym.rl import make_trainer

    config = dict(total_env_steps=100) | extra
    return make_trainer(
        algo,
        tiny_model(),
        env_id="Text-Blackjack-v1",
        num_envs=2,
        episodes_per_update=2,
        action_head=False,
        backend="vllm",
        vllm_url=server,
        device="cpu",
        progress=False,
        output_dir=str(tmp_path / "run"),
        **config,
    )


@pytest.mark.parametrize("algo", ["reinforce", "ppo"])
def test_training_through_vllm_logs_the_gap_and_hot_loads_each_update(server, tmp_path, algo):
    import numpy as np

    trainer = _vllm_trainer(server, tmp_path, algo)
    assert trainer.policy.backend is trainer.vllm
    assert trainer.policy.update_backend is not trainer.vllm  # updates stay in transformers
    episodes = trainer.collect()
    assert FakeVLLM.requests and all(r["model"] == "fake-model" for r in FakeVLLM.requests)
    samples = [s.sample for e in episodes for s in e.steps]
    trainer.model.train()
    recomputed = [float(x) for out in trainer.learner.recompute(samples) for x in out.logprob]
    want = np.mean([abs(s.logprobs[0] - r) for s, r in zip(samples, recomputed)])
    metrics = trainer.train_on_episodes(episodes)
    # The fake server's log-probs are not the tiny model's: the gap is large and exact.
    assert metrics["perf/vllm_logprob_gap"] == pytest.approx(want, rel=1e-5) and want > 0.01
    assert metrics["perf/vllm_logprob_gap_max"] >= metrics["perf/vllm_logprob_gap"]
    route, body, complete = FakeVLLM.adapters[-1]
    assert route == "/v1/load_lora_adapter" and complete
    adapter = Path(body["lora_path"])
    assert adapter.parent == (tmp_path / "run" / "vllm_adapters").resolve()
    assert (adapter / "adapter_model.safetensors").is_file()
    assert trainer.vllm.model == body["lora_name"] == "llmgym-run-1"
    trainer.train_on_episodes(trainer.collect())
    assert FakeVLLM.requests[-1]["model"] == "llmgym-run-1"  # the second batch acted with it
    assert [(r, b["lora_name"]) for r, b, _ in FakeVLLM.adapters[1:]] == [
        ("/v1/load_lora_adapter", "llmgym-run-2"),
        ("/v1/unload_lora_adapter", "llmgym-run-1"),
    ]
    if algo != "reinforce":
        return
    # --resume: the checkpoint's adapter is loaded before anything acts.
    trainer.checkpointer.save_checkpoint()
    resumed = _vllm_trainer(server, tmp_path, algo, total_env_steps=1)  # budget already spent
    assert resumed.vllm.model == "fake-model"
    resumed.evaluate = lambda *args, **kwargs: dict.fromkeys(
        ("mean_return", "ci95", "success_rate", "parse_rate", "mean_length"), 0.0
    )
    loads = len(FakeVLLM.adapters)
    resumed.train(resume=True)
    route, body, _ = FakeVLLM.adapters[loads]
    assert route == "/v1/load_lora_adapter" and resumed.vllm.model == body["lora_name"]


def test_a_full_fine_tune_through_vllm_reloads_the_whole_model_each_update(server, tmp_path):
    from safetensors.torch import load_file

    trainer = _vllm_trainer(server, tmp_path, lora=False, learning_rate=1e-2)
    before = {k: v.clone() for k, v in trainer.model.state_dict().items()}
    for update in (1, 2):
        trainer.train_on_episodes(trainer.collect())
        route, body, complete = FakeVLLM.adapters[-2]
        assert route == "/collective_rpc" and complete
        checkpoint = Path(body["kwargs"]["weights_path"])
        assert checkpoint == (tmp_path / "run" / "vllm_weights" / f"llmgym-run-{update}").resolve()
        assert FakeVLLM.adapters[-1][0].startswith("/reset_prefix_cache")
    assert trainer.vllm.model == "fake-model"
    saved = load_file(str(checkpoint / "model.safetensors"))
    now = trainer.model.state_dict()
    assert all(bool((saved[k] == now[k]).all()) for k in saved)  # the trained weights
    assert any(not bool((saved[k] == before[k]).all()) for k in saved)  # which moved
    assert not (checkpoint.parent / "llmgym-run-1").exists()


def test_train_cli_refuses_an_action_head_in_one_sentence(tmp_path):
    from typer.testing import CliRunner

    from llmgym.cli import app

    args = ["train", "Text-Blackjack-v1", "--model", "tiny", "--backend", "vllm"]
    args += ["--vllm-url", "http://127.0.0.1:9", "--output", str(tmp_path / "run")]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 2
    message = " ".join(result.output.split())
    assert message.count(". ") == 0 and "--set action_head=false" in message
    assert not (tmp_path / "run").exists()  # refused before any work
    frozen = ["--set", "action_head=false", "--set", "train_backbone=false"]
    result = CliRunner().invoke(app, [*args, *frozen])
    assert result.exit_code == 2 and "train_backbone=true" in result.output


# ---- the in-process form (vllm.LLM) with a fake `vllm` module -----------------------------


class FakeLLM:
    """Records generate calls; the log-prob of token t after a prompt of n tokens is
    -(t + n) / 1000, the sampled token is 7 (-0.5), as the fake server above."""

    def __init__(self, model: str, **args) -> None:
        self.args = {"model": model, **args}
        self.calls: list[tuple[list, object, object]] = []
        self.llm_engine = self
        self.added: list = []
        self.removed: list[int] = []
        self.rpcs: list[tuple[str, dict | None]] = []

    def add_lora(self, request) -> bool:
        self.added.append(request)
        return True

    def remove_lora(self, lora_id: int) -> bool:
        self.removed.append(lora_id)
        return True

    def collective_rpc(self, method, timeout=None, args=(), kwargs=None):
        self.rpcs.append((method, kwargs))
        return [None]

    def reset_prefix_cache(self, reset_running_requests=False, reset_connector=False) -> bool:
        self.rpcs.append(("reset_prefix_cache", None))
        return True

    def generate(self, prompts, params, *, use_tqdm=True, lora_request=None):
        from types import SimpleNamespace as NS

        self.calls.append((prompts, params, lora_request))
        each = params if isinstance(params, list) else [params] * len(prompts)
        outputs = []
        for prompt, p in zip(prompts, each):
            n = len(prompt["prompt_token_ids"])
            top = {7: NS(logprob=-0.5)}
            top.update({t: NS(logprob=-(t + n) / 1000) for t in p.logprob_token_ids or []})
            outputs.append(NS(outputs=[NS(token_ids=[7], logprobs=[top])]))
        return outputs


@pytest.fixture
def fake_vllm(monkeypatch):
    import sys
    import types
    from dataclasses import dataclass

    @dataclass
    class SamplingParams:
        max_tokens: int = 16
        temperature: float = 1.0
        top_p: float = 1.0
        seed: int | None = None
        logprobs: int | None = None
        logprob_token_ids: list | None = None
        stop_token_ids: list | None = None
        skip_special_tokens: bool = True
        include_stop_str_in_output: bool = False

    @dataclass
    class LoRARequest:
        lora_name: str
        lora_int_id: int
        lora_path: str = ""

    module = types.ModuleType("vllm")
    module.LLM, module.SamplingParams = FakeLLM, SamplingParams
    lora, request = types.ModuleType("vllm.lora"), types.ModuleType("vllm.lora.request")
    request.LoRARequest = LoRARequest
    for name, mod in (("vllm", module), ("vllm.lora", lora), ("vllm.lora.request", request)):
        monkeypatch.setitem(sys.modules, name, mod)
    return module


def test_inprocess_maps_requests_and_converts_outputs(fake_vllm, monkeypatch, tmp_path):
    from llmgym.policy.backends import make_vllm_backend
    from llmgym.policy.backends.vllm_inprocess import ENGINE_DEFAULTS, VLLMInProcess

    monkeypatch.setattr(vllm_backend, "MAX_TOKEN_IDS", 2)
    engine = make_vllm_backend("", "", str(tmp_path), inprocess=True)  # a directory: as is
    assert isinstance(engine, VLLMInProcess)
    assert engine.llm.args == {"model": str(tmp_path), **ENGINE_DEFAULTS}
    assert engine.llm.args["enable_prefix_caching"] and engine.llm.args["enable_lora"]
    prompts, candidates, want = PROMPTS, CANDIDATES, WANT_CANDIDATE_LOGPROBS
    got = engine.candidate_logprobs(prompts, candidates)
    assert got == [[pytest.approx(c) for c in env] for env in want]
    sent = engine.llm.calls[0]
    assert sent[0][0] == {"prompt_token_ids": [1, 2, 3]}
    assert (sent[1].max_tokens, sent[1].temperature, sent[1].logprobs) == (1, 0.0, 2)
    assert all(len(params.logprob_token_ids) <= 2 for _, params, _ in engine.llm.calls)

    engine.llm.calls = []
    kwargs = dict(max_tokens=5, stop_token_ids=[9], temperature=0.7, top_p=0.9)
    rows = engine.complete([[1, 2], [1, 2], [1, 2]], greedy=False, seed=3, **kwargs)
    assert rows == [([7], [-0.5])] * 3
    [(batch, params, lora)] = engine.llm.calls  # one call, one SamplingParams per prompt
    assert len(batch) == 3 and [p.seed for p in params] == [3, 4, 5] and lora is None
    assert params[0].stop_token_ids == [9] and params[0].include_stop_str_in_output
    assert (params[0].temperature, params[0].top_p, params[0].logprobs) == (0.7, 0.9, 0)
    engine.complete([[1, 2], [1, 2]], greedy=True, seed=3, **kwargs)
    greedy = engine.llm.calls[-1][1]
    assert greedy.seed is None and greedy.temperature == 0.0 and greedy.skip_special_tokens is False


def test_inprocess_sync_weights_makes_a_new_lora_request_each_update(fake_vllm, tmp_path):
    from llmgym.policy.backends.vllm_inprocess import VLLMInProcess

    engine = VLLMInProcess(str(tmp_path), dtype="float32")
    assert engine.llm.args["dtype"] == "float32"

    def write(path: Path) -> None:
        path.mkdir(parents=True)
        (path / "adapter_config.json").write_text("{}")

    engine.use_adapters(write, tmp_path / "adapters", "llmgym-run")
    requests = []
    for update in (1, 2, 3):
        engine.sync_weights()
        engine.complete(
            [[1]], max_tokens=1, stop_token_ids=[], temperature=1.0, top_p=1.0, greedy=True, seed=0
        )
        request = engine.llm.calls[-1][2]
        requests.append(request)
        assert request.lora_name == engine.model == f"llmgym-run-{update}"
        assert Path(request.lora_path) == (tmp_path / "adapters" / f"llmgym-run-{update}").resolve()
        assert (Path(request.lora_path) / "adapter_config.json").is_file()
    assert [r.lora_int_id for r in requests] == [1, 2, 3]  # a new id per update
    assert engine.llm.added == requests and engine.llm.removed == [1, 2]
    assert sorted(p.name for p in (tmp_path / "adapters").iterdir()) == ["llmgym-run-3"]
    engine.unload_adapter("llmgym-run-3")
    assert engine.model == engine.base_model and engine._lora is None


def test_inprocess_full_fine_tune_sync_reloads_weights_in_place(fake_vllm, tmp_path):
    from llmgym.policy.backends.vllm_inprocess import VLLMInProcess

    engine = VLLMInProcess(str(tmp_path))
    engine.use_weights(_write_checkpoint, tmp_path / "weights", "run")
    engine.sync_weights()
    engine.sync_weights()
    path = str((tmp_path / "weights" / "run-2").resolve())
    assert engine.llm.rpcs[-2:] == [
        ("reload_weights", {"weights_path": path}),
        ("reset_prefix_cache", None),
    ]
    assert engine.model == engine.base_model and engine.llm.added == []
    assert sorted(p.name for p in (tmp_path / "weights").iterdir()) == ["run-2"]


def test_inprocess_policy_acts_and_refuses_a_head(fake_vllm, tmp_path):
    from llmgym.policy import LLMPolicy, PolicyConfig
    from llmgym.policy.action_head import ActionHead
    from llmgym.policy.testing import text_observations, tiny_tokenizer

    config = PolicyConfig(mode="score", backend="vllm-inprocess", vllm_model=str(tmp_path))
    policy = LLMPolicy(None, tiny_tokenizer(), config)
    observations, infos = text_observations("Text-Blackjack-v1", 2)
    probs = policy.action_probabilities(observations, infos)
    assert [len(p) for p in probs] == [2, 2]
    assert all(abs(sum(p) - 1) < 1e-6 for p in probs)
    with pytest.raises(ValueError, match="action_head=false"):
        LLMPolicy(None, tiny_tokenizer(), config, head=ActionHead(8, 8))


def test_inprocess_without_vllm_is_one_sentence(monkeypatch):
    import sys

    from llmgym.policy.backends import make_vllm_backend

    monkeypatch.setitem(sys.modules, "vllm", None)  # import vllm -> ImportError
    with pytest.raises(VLLMError, match="--vllm-url http://HOST:PORT instead of vllm-in") as e:
        make_vllm_backend("", "smollm2-135m", inprocess=True)
    assert isinstance(e.value, LLMGymError) and "\n" not in str(e.value)
    import llmgym  # noqa: F401  (still light: vllm is imported only when the backend is built)


def test_the_inprocess_url_is_a_deprecated_way_to_choose_the_inprocess_backend(fake_vllm, tmp_path):
    """``vllm_url="inprocess"`` (before ``backend="vllm-inprocess"``) still acts in process for
    one release, with a one-line DeprecationWarning, through the policy and the trainer."""
    from llmgym.policy import LLMPolicy, PolicyConfig
    from llmgym.policy.backends import make_vllm_backend
    from llmgym.policy.backends.vllm_inprocess import VLLMInProcess
    from llmgym.policy.testing import tiny_model, tiny_tokenizer

    message = r'^vllm_url="inprocess" is deprecated; use backend="vllm-inprocess"\.$'
    with pytest.warns(DeprecationWarning, match=message) as record:
        engine = make_vllm_backend("inprocess", str(tmp_path))
    assert isinstance(engine, VLLMInProcess) and len(record) == 1
    old = PolicyConfig(backend="vllm", vllm_url="inprocess", vllm_model=str(tmp_path))
    new = PolicyConfig(backend="vllm-inprocess", vllm_model=str(tmp_path))
    with pytest.warns(DeprecationWarning, match=message):
        old_policy = LLMPolicy(None, tiny_tokenizer(), old)
    new_policy = LLMPolicy(None, tiny_tokenizer(), new)
    assert type(old_policy.backend) is type(new_policy.backend) is VLLMInProcess
    assert old_policy.backend.llm.args == new_policy.backend.llm.args

    pytest.importorskip("peft")
    from llmgym.rl import make_trainer

    def trainer(**backend):
        settings = dict(env_id="Text-Blackjack-v1", num_envs=2, episodes_per_update=2)
        return make_trainer(
            "reinforce",
            tiny_model(),
            **settings,
            action_head=False,
            vllm_model=str(tmp_path),
            device="cpu",
            progress=False,
            output_dir=str(tmp_path / "run"),
            **backend,
        )

    with pytest.warns(DeprecationWarning, match=message):
        deprecated = trainer(backend="vllm", vllm_url="inprocess")
    explicit = trainer(backend="vllm-inprocess")
    for run in (deprecated, explicit):
        assert isinstance(run.vllm, VLLMInProcess) and run.policy.backend is run.vllm
        assert run.policy.update_backend is not run.vllm  # updates recompute with transformers
    metrics = explicit.train_on_episodes(explicit.collect())
    assert explicit.vllm.model == "llmgym-run-1" and "losses/policy" in metrics
