"""CPU milliseconds per HF-backend weights key: a fresh walk over the modules (before issue 51's
change) against the kept walk (after). LoRA r 16 on the last 8 layers (tiny: both), one thread.

    python experiments/weights_key_cost.py
"""

import time

import torch
from peft import LoraConfig, get_peft_model

from llmgym.policy.backends.hf import TransformersBackend, weights_key_walked
from llmgym.policy.models import load_model_for
from llmgym.rl.weights import lora_targets

torch.set_num_threads(1)
for name in ("tiny", "smollm2-135m"):
    model, tok = load_model_for(name, "cpu", "float32")
    model = get_peft_model(
        model, LoraConfig(r=16, lora_alpha=32, target_modules=lora_targets(model, "all-linear", 8))
    )
    backend = TransformersBackend(model, tok.pad_token_id, "cpu")
    backend.weights_key()
    n = 200
    for label, f in (
        ("fresh walk", lambda m=model: weights_key_walked(m)),
        ("kept walk", backend.weights_key),
    ):
        c = time.process_time()
        for _ in range(n):
            f()
        print(f"{name}: {label}: {(time.process_time() - c) / n * 1e3:.3f} CPU ms per key")
