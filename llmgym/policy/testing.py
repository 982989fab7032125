"""A tiny random-init Llama model and a byte-level tokenizer for fast tests (no download).

Example:
    >>> model, tokenizer = tiny_model()
    >>> model.config.num_hidden_layers, tokenizer.padding_side
    (2, 'left')
    >>> tokenizer.decode(tokenizer("LEFT").input_ids)
    'LEFT'
"""

from __future__ import annotations

from typing import Any

CHATML_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def tiny_tokenizer() -> Any:
    """A byte-level tokenizer (256 bytes + 3 ChatML special tokens) with a ChatML template."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {c: i for i, c in enumerate(sorted(pre_tokenizers.ByteLevel.alphabet()))}
    backend = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    backend.decoder = decoders.ByteLevel()
    backend.add_special_tokens(["<|endoftext|>", "<|im_start|>", "<|im_end|>"])
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=backend,
        bos_token="<|im_start|>",
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        padding_side="left",
    )
    tokenizer.chat_template = CHATML_TEMPLATE
    return tokenizer


def tiny_model(seed: int = 0) -> tuple[Any, Any]:
    """A 2-layer, hidden-64 Llama (same architecture family as SmolLM2) with random weights
    drawn from ``seed`` (the global RNG is left untouched), in eval mode, and its tokenizer."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    tokenizer = tiny_tokenizer()
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=4096,
        tie_word_embeddings=True,
        initializer_range=0.2,  # peaked distributions: greedy choices are not near-ties
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = LlamaForCausalLM(config)
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    return model.eval(), tokenizer


def text_observations(
    env_id: str, n: int, seed: int = 0, action: str = '{"action": "LEFT"}'
) -> tuple[list[str], list[dict[str, Any]]]:
    """``n`` (observation, info) pairs from envs reset with seeds ``seed..seed+n-1``; every
    second env takes one step with ``action``, so prompts differ in content and length.

    Example:
        >>> obs, infos = text_observations("Text-Blackjack-v1", 2)
        >>> len(obs), infos[0]["valid_actions"]
        (2, ['stick', 'hit'])
    """
    import gymnasium as gym

    import llmgym  # noqa: F401  (registers the Text-* envs)

    observations, infos = [], []
    for i in range(n):
        env = gym.make(env_id)
        obs, info = env.reset(seed=seed + i)
        if i % 2:
            next_obs, _, terminated, truncated, next_info = env.step(action)
            if not (terminated or truncated):
                obs, info = next_obs, next_info
        observations.append(obs)
        infos.append(info)
    return observations, infos


def randomize_lora(model: Any, scale: float = 0.05, seed: int = 0) -> Any:
    """Give ``model``'s LoRA ``B`` matrices (zero at init) seeded random values, so the adapter
    visibly changes the policy (for tests of adapter export and hot-loading); returns ``model``.
    """
    import torch

    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, param in model.named_parameters():
            if "lora_B" in name:
                param.copy_(scale * torch.randn(param.shape, generator=generator))
    return model


#: Tiny configs of other architecture families (bring-your-own-model tests): each saves as a
#: local directory that ``load_model`` takes like any downloaded model.
FAMILIES = {
    "llama": dict(intermediate_size=128, num_key_value_heads=2),
    "qwen2": dict(intermediate_size=128, num_key_value_heads=2),
    "gpt_neox": dict(intermediate_size=128, rotary_pct=0.5),
    "phi": dict(intermediate_size=128),
    "gpt2": dict(n_embd=64, n_layer=4, n_head=4, n_positions=4096),
}


def tiny_model_dir(family: str, path: Any, layers: int = 4, seed: int = 0) -> Any:
    """Save a random-init tiny model of ``family`` (a key of :data:`FAMILIES`, built with
    ``AutoConfig.for_model``) with the tiny tokenizer into ``path``; returns ``path``.

    Example:
        >>> import tempfile
        >>> from transformers import AutoConfig
        >>> folder = tiny_model_dir("gpt_neox", tempfile.mkdtemp())
        >>> AutoConfig.from_pretrained(folder).model_type
        'gpt_neox'
    """
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    tokenizer = tiny_tokenizer()
    sizes = dict(
        vocab_size=len(tokenizer),
        hidden_size=64,
        num_hidden_layers=layers,
        num_attention_heads=4,
        max_position_embeddings=4096,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    config = AutoConfig.for_model(family, **(sizes | FAMILIES[family]))
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = AutoModelForCausalLM.from_config(config)
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


__all__ = [
    "FAMILIES",
    "randomize_lora",
    "text_observations",
    "tiny_model",
    "tiny_model_dir",
    "tiny_tokenizer",
]
