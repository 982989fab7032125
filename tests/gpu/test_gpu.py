"""GPU checks (``make test-gpu``): the training step in bf16, where every tensor lives, and
acting and re-scoring on CUDA against the CPU. They skip where no CUDA device is present;
``benchmarks/gpu_check.sh`` runs them on a lent GPU machine with short trainings and the
throughput benchmark."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("peft")

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU"),
]

FAST = dict(
    model="tiny",
    env_id="Text-Blackjack-v1",
    num_envs=4,
    episodes_per_update=4,
    total_episodes=8,
    progress=False,
    device="cuda",
)


@pytest.mark.parametrize("mode", ["score", "generate"])
def test_a_bf16_lora_step_on_cuda_changes_the_weights(mode, tmp_path):
    from llmgym.rl import make_trainer

    trainer = make_trainer(
        "ppo", output_dir=str(tmp_path), mode=mode, dtype="bfloat16", action_head=False, **FAST
    )
    base = trainer.model.get_base_model()
    assert base.get_input_embeddings().weight.dtype == torch.bfloat16
    assert base.get_input_embeddings().weight.device.type == "cuda"
    trained = trainer.learner.trainable_parameters()
    assert all(p.device.type == "cuda" and p.dtype == torch.float32 for p in trained)
    before = [p.detach().clone() for p in trained]
    trainer.run_iteration()
    assert any(not torch.equal(b, p) for b, p in zip(before, trained))
    assert all(torch.isfinite(p).all() for p in trained)


def test_the_action_head_and_the_critic_live_on_cuda(tmp_path):
    from llmgym.rl import make_trainer

    trainer = make_trainer("ppo", output_dir=str(tmp_path), train_backbone=False, **FAST)
    for module in (trainer.policy.head, trainer.algorithm.critic.value_head):
        assert all(p.device.type == "cuda" for p in module.parameters())
    metrics = trainer.run_iteration()
    assert metrics["losses/grad_norm"] >= 0


@pytest.mark.parametrize("mode", ["score", "generate"])
def test_cuda_rescoring_matches_the_cpu(mode):
    """The same weights re-score the same samples alike on CUDA (fp32) and on the CPU."""
    from llmgym.policy import LLMPolicy, PolicyConfig
    from llmgym.policy.testing import text_observations, tiny_model

    config = PolicyConfig(mode=mode, greedy=True, max_new_tokens=8)
    model, tokenizer = tiny_model()
    cpu = LLMPolicy(model, tokenizer, config)
    obs, infos = text_observations("Text-Blackjack-v1", 4)
    samples = cpu.act(obs, infos)
    want = cpu.evaluate(samples).logprob.detach()
    cuda_model, _ = tiny_model()
    gpu = LLMPolicy(cuda_model.to("cuda"), tokenizer, config)
    got = gpu.evaluate(samples).logprob.detach().cpu()
    torch.testing.assert_close(got, want, atol=1e-4, rtol=1e-4)
    assert [s.text for s in gpu.act(obs, infos)] == [s.text for s in samples]
