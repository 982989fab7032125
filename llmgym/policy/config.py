"""``PolicyConfig``: how an ``LLMPolicy`` builds prompts and picks actions, checked where it is
built (each field's rule beside its default: ``llmgym.config``, the checks every config
dataclass shares).

Example:
    >>> PolicyConfig(mode="generate").history
    0
    >>> PolicyConfig(mode="chat")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    llmgym.errors.ConfigValueError: mode must be one of score, generate, not 'chat'.
    >>> PolicyConfig(top_p=float("nan"))  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    llmgym.errors.ConfigValueError: top_p must be a finite number, not nan.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, ClassVar

from llmgym.config import Checked, rule
from llmgym.errors import ConfigError

MODES = ("score", "generate")
BACKENDS = ("hf", "vllm", "vllm-inprocess")
NORMALIZATIONS = ("sum", "token", "word")
DEVICES = ("auto", "cpu", "cuda", "mps")
"""Where a model runs (the trainers' ``run.device``, ``llmgym eval --device``), or ``cuda:N``."""
DTYPES = ("auto", "float32", "bfloat16", "float16")
BACKBONES = ("pretrained", "random-init")
"""The model's weights (the trainers' ``policy.dtype``)."""


def is_device(name: Any) -> bool:
    """``auto``, ``cpu``, ``cuda``, ``cuda:N`` or ``mps``.

    Example:
        >>> is_device("cuda:1"), is_device("tpu")
        (True, False)
    """
    if not isinstance(name, str):
        return False
    return name in DEVICES or (name.startswith("cuda:") and name[5:].isdigit())


@dataclass
class PolicyConfig(Checked):
    """How an LLMPolicy builds prompts and picks actions."""

    mode: str = field(default="score", metadata=rule(choices=MODES))
    """``score`` (rank the valid actions, always valid) or ``generate`` (free text, parsed)."""
    history: int = field(default=0, metadata=rule(min=0))
    """Past (observation, answer) turns kept in the prompt; 0 for Markov envs."""
    temperature: float = field(
        default=1.0, metadata=rule(above=0, hint="greedy=true takes the arg-max")
    )
    """Softmax temperature: over candidate scores (score) or over tokens (generate)."""
    greedy: bool = False
    """Take the argmax instead of sampling."""
    normalization: str = field(default="sum", metadata=rule(choices=NORMALIZATIONS))
    """Score of a candidate: ``sum`` of token log-probs, mean per ``token``, or per ``word``."""
    max_new_tokens: int | None = field(default=None, metadata=rule(min=1))
    """Generation budget (generate mode); None takes the model's registry default."""
    top_p: float = field(default=1.0, metadata=rule(above=0, max=1))
    """Nucleus sampling threshold (generate mode); log-probs ignore it (they are under the
    temperature softmax, so trainers get a smooth distribution)."""
    think: bool = False
    """Ask the model to reason before answering (generate mode; disables ``prefill``)."""
    prefill: bool = True
    """Start the assistant turn with ``{"action": "`` so small models answer in format (in
    generate mode an env may name its own start in ``info["answer_prefill"]``, e.g. math's
    ``{"answer": ``)."""
    seed: int = 0
    """Seed of the policy's own torch.Generator: acting is reproducible."""
    prefix_cache: bool = True
    """Encode the prompt prefix shared by the batch once and keep it across calls."""
    stop_at_answer: bool = True
    """With the prefill, stop generating at the first token holding ``}``: the answer is
    complete (rambling past it costs decode steps for the whole batch)."""
    center_grad: bool = False
    """Score mode, in an update: centre each action's score gradient over the rows of a
    forward pass (rows with the same valid actions), so the update pushes the actions' scores
    state against state and not the direction every state shares (the language model's
    gradient is mostly that one: Blackjack turned to always-stick). The forward pass is
    unchanged. With AdamW the scores still drift together (every coordinate moves ~lr);
    pair it with ``optim.lm_optimizer=sgd``."""
    backend: str = field(default="hf", metadata=rule(choices=BACKENDS))
    """``hf``: transformers in this process. ``vllm``: act through a running vLLM server
    (``vllm_url``; ``llmgym.policy.backends.vllm``). ``vllm-inprocess``: act through
    ``vllm.LLM`` in this process (one GPU, vLLM installed). vLLM gives log-probs only, so no
    action head."""
    vllm_url: str = ""
    """The vLLM server's address, e.g. ``http://127.0.0.1:8000`` (backend ``vllm``). The old
    value ``inprocess`` still means backend ``vllm-inprocess``, with a DeprecationWarning."""
    vllm_model: str = ""
    """The served model (or loaded adapter) name; empty = the first the server lists. In
    process: the model ``vllm.LLM`` loads; empty = the policy's model."""

    @property
    def uses_vllm(self) -> bool:
        """Whether the policy acts through vLLM, a server or in process.

        >>> PolicyConfig(backend="vllm-inprocess").uses_vllm, PolicyConfig().uses_vllm
        (True, False)
        """
        return self.backend in ("vllm", "vllm-inprocess")


@dataclass
class PolicySection(PolicyConfig):
    """The trainers' ``policy`` section (``llmgym.rl.config``): the model and how it acts while
    training, every ``PolicyConfig`` field (``temperature`` for the training rollouts, ...) plus
    these. The trainer decides ``greedy`` and ``seed`` itself (sampled rollouts, greedy eval)."""

    prefix: ClassVar[str] = "policy."

    model: str = field(default="smollm2-135m", metadata=rule(test=bool, expect="a model name"))
    """Model short name, Hub id or local directory (``tiny`` = random tiny Llama for tests)."""
    dtype: str = field(default="auto", metadata=rule(choices=DTYPES))
    """The model's weights while training and acting: ``auto`` (float32 on CPU and MPS,
    bfloat16 on GPUs that support it, else float16), ``float32``, ``bfloat16`` or ``float16``.
    LoRA weights and the heads stay float32."""
    backbone: str = field(default="pretrained", metadata=rule(choices=BACKBONES))
    """``pretrained``: the model's own weights. ``random-init``: the same architecture and
    tokenizer with freshly initialised weights (drawn from the run's seed), the control that
    says what pretraining brings to a result."""
    action_head: bool = True
    """Score mode: add a zero-initialised action head on the hidden state at the answer
    position to the candidates' LM scores (``llmgym.policy.action_head``): updates that
    differ by state. The policy at initialisation is the language model's."""
    head_whiten_eps: float = field(default=0.3, metadata=rule(min=0))
    """Ridge of the head's feature whitening, relative to the mean feature variance."""
    lm_prior: bool = True
    """Score mode with the action head: the candidates' LM scores are part of the policy (it
    starts as the language model's). False: the head alone scores them and the language model
    only supplies the hidden state, as LLaRP's learned output layer; the policy starts uniform,
    free of a prior that ignores the state (CartPole: SmolLM2-135M prefers LEFT everywhere)."""
    head_layers: list[int] | None = field(
        default=None, metadata=rule(test=bool, expect="a non-empty list of hidden-state indices")
    )
    """Score mode: the model's hidden states the state features are made of, at the answer
    position, concatenated; indices into transformers' ``hidden_states`` (0 the embeddings, i
    after decoder layer i, -1 the last). None: the last. The action head and PPO's critics
    read them; without the head, the critics alone (a layer below LoRA's gives features that
    do not move as LoRA trains). (SmolLM2-135M on CartPole: the size of theta_dot is read best
    after layers 2-8, theta's after 24-27; ``benchmarks/cartpole_readable.py --layers``.)"""

    def validate(self) -> None:
        """Each field against its type and rule; ``lm_prior=false`` needs score mode with the
        head on (``head_layers``' mode: :func:`check_feature_layers`, by the trainer's config)."""
        super().validate()
        if self.action_head and self.mode == "score":
            return
        if not self.lm_prior:
            raise ConfigError(
                "lm_prior=false leaves the action head alone to score the actions, so it needs "
                "score mode with the head on (`--mode score --set action_head=true`)."
            )

    def acting(self) -> PolicyConfig:
        """The ``PolicyConfig`` the trainer's ``LLMPolicy`` acts with."""
        names = [f.name for f in dataclasses.fields(PolicyConfig)]
        return PolicyConfig(**{n: getattr(self, n) for n in names})


def check_feature_layers(policy: PolicySection, turns_scored: bool) -> None:
    """``head_layers`` needs score mode, or a trainer that scores each generated turn again in
    score form (``turns_scored``: ``--algo qac``).

    >>> generate = PolicySection(mode="generate", head_layers=[1])
    >>> check_feature_layers(generate, turns_scored=True)
    >>> check_feature_layers(generate, turns_scored=False)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    llmgym.errors.ConfigError: head_layers chooses ... or --algo qac in generate mode.
    """
    if policy.head_layers is not None and policy.mode != "score" and not turns_scored:
        raise ConfigError(
            "head_layers chooses the hidden states the state features are made of, so it "
            "needs score mode (`--mode score`), or --algo qac in generate mode."
        )


def check_vllm_training(policy: PolicySection, train_backbone: bool) -> None:
    """What cannot train through vLLM (``policy.uses_vllm``): an action head (vLLM returns no
    hidden states) and a frozen language model (nothing to sync). LoRA adapters are hot-loaded
    after each update, a full fine-tune reloaded whole."""
    if not policy.uses_vllm:
        return
    if policy.action_head and policy.mode == "score":
        raise ConfigError(
            "vLLM returns log-probs, not hidden states, so a policy with an action head "
            "cannot act through it; train with `--set action_head=false` to use the vllm backend."
        )
    if not train_backbone:
        raise ConfigError(
            "Training through vLLM syncs the language model's weights after each update, so "
            "it needs train_backbone=true (LoRA or a full fine-tune); a frozen model trains "
            "with the hf backend."
        )


__all__ = [
    "DEVICES",
    "DTYPES",
    "PolicyConfig",
    "PolicySection",
    "check_feature_layers",
    "check_vllm_training",
    "is_device",
]
