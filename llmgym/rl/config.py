"""The trainers' composed config: six sections and the algorithm's own fields.

``TrainConfig`` holds a ``run`` section (env, budget, seeds, where it goes), ``policy`` (the
model and how it acts: an :class:`~llmgym.policy.policy.PolicyConfig` plus the action head),
``lora``, ``optim``, ``sft`` and ``eval``; each algorithm's config (``PPOConfig``, ...) adds its
own fields at the top. Every field is defined once. Keys are written with dots
(``policy.temperature``, as ``llmgym train --set policy.temperature=0.7``); the flat names of
before the sections (``temperature``, ``lora_r``, ``sft_epochs``) stay accepted as aliases, so
every saved config and committed command still works.

Example:
    >>> from llmgym.rl.ppo import PPOConfig
    >>> cfg = PPOConfig.build({"policy.temperature": 2.0, "lora_r": 8, "gamma": 0.9})
    >>> cfg.policy.temperature, cfg.lora.r, cfg.gamma, cfg.run.env_id
    (2.0, 8, 0.9, 'Text-Blackjack-v1')
    >>> canonical_key("sft_epochs"), canonical_key("lora"), canonical_key("gamma")
    ('sft.epochs', 'lora.enabled', 'gamma')
"""

from __future__ import annotations

import dataclasses
import math
import typing
from dataclasses import dataclass, field
from typing import Any

from llmgym.errors import TrainingError
from llmgym.policy import PolicyConfig


@dataclass
class RunSection:
    """What to train on, for how long, with which seeds, and where the run goes."""

    env_id: str = "Text-Blackjack-v1"
    """Text env to train in (``llmgym envs`` lists them)."""
    env_kwargs: dict[str, Any] = field(default_factory=dict)
    """Keyword arguments for ``gym.make`` (base-env kwargs such as ``is_slippery=False``)."""
    num_envs: int = 8
    """K envs stepped in lockstep; every policy call is one batch of up to K observations."""
    total_env_steps: int = 3000
    """Stop after this many env steps (whichever of this and ``total_episodes`` comes first)."""
    total_episodes: int = 0
    """Stop after this many training episodes (0 = no episode limit)."""
    episodes_per_update: int = 32
    """Complete episodes collected per iteration (each iteration ends with one update)."""
    seed: int = 0
    """Seed for torch/numpy/python RNGs; the i-th training env seed is ``seed * 100_003 + i``."""
    device: str = "auto"
    """``auto``, ``cpu``, ``cuda`` or ``mps``."""
    output_dir: str = "runs/default"
    """Run directory: config, metrics.csv, TensorBoard events, checkpoints, plot."""
    checkpoint_every: int = 10
    """Save a checkpoint every this many iterations (and always at the end)."""
    log_every: int = 1
    """Write metrics every this many iterations."""
    collapse_warn: bool = True
    """Warn when the action distribution collapses, entropy falls to ~0 or KL runs away."""
    kl_warn: float = 2.0
    """KL to the reference above which a run-away warning is printed."""
    num_threads: int = 0
    """torch CPU threads (0 = torch's default; 1 is faster on a CPU shared with other jobs)."""
    progress: bool = True
    """Show a progress bar."""


@dataclass
class PolicySection(PolicyConfig):
    """The model and how it acts while training: every ``PolicyConfig`` field (``mode``,
    ``temperature`` for the training rollouts, ``history``, ``normalization``, ...) plus these.
    The trainer decides ``greedy`` and ``seed`` itself (sampled rollouts, greedy evaluation)."""

    model: str = "smollm2-135m"
    """Model short name, Hub id or local directory (``tiny`` = random tiny Llama for tests)."""
    dtype: str = "auto"
    """The model's weights while training and acting: ``auto`` (float32 on CPU and MPS,
    bfloat16 on GPUs that support it, else float16), ``float32``, ``bfloat16`` or ``float16``.
    LoRA weights and the heads stay float32."""
    action_head: bool = True
    """Score mode: add a zero-initialised action head on the hidden state at the answer
    position to the candidates' LM scores (``llmgym.policy.action_head``): updates that
    differ by state. The policy at initialisation is the language model's."""
    head_whiten_eps: float = 0.3
    """Ridge of the head's feature whitening, relative to the mean feature variance."""
    lm_prior: bool = True
    """Score mode with the action head: the candidates' LM scores are part of the policy (it
    starts as the language model's). False: the head alone scores them and the language model
    only supplies the hidden state, as LLaRP's learned output layer; the policy starts uniform,
    free of a prior that ignores the state (CartPole: SmolLM2-135M prefers LEFT everywhere)."""
    head_layers: list[int] | None = None
    """Score mode with the action head: the model's hidden states it reads at the answer
    position, concatenated; indices into transformers' ``hidden_states`` (0 the embeddings, i
    after decoder layer i, -1 the last). None: the last. PPO's value head reads the same
    features. (SmolLM2-135M on CartPole: the size of theta_dot is read best after layers
    2-8, theta's after 24-27; ``benchmarks/cartpole_readable.py --layers``.)"""

    def acting(self) -> PolicyConfig:
        """The ``PolicyConfig`` the trainer's ``LLMPolicy`` acts with."""
        names = [f.name for f in dataclasses.fields(PolicyConfig)]
        return PolicyConfig(**{n: getattr(self, n) for n in names})


@dataclass
class LoraSection:
    """Which weights train: a LoRA adapter (peft) or the whole model."""

    enabled: bool = True
    """Train a LoRA adapter (the reference policy is the adapter switched off); False = full
    fine-tune (the reference is then a frozen copy, only built when a KL term needs it)."""
    r: int = 16
    """LoRA rank."""
    alpha: int = 32
    """LoRA scaling numerator (scale = alpha / r)."""
    dropout: float = 0.0
    """LoRA dropout (0 keeps logprobs of a sample identical between rollout and update)."""
    target_modules: list[str] | None = None
    """Modules LoRA adapts; None = the model registry's default for this model."""
    layers: int = 8
    """LoRA only in the last N transformer layers (0 = all layers). Backward then stops below
    them: ~3x cheaper updates on CPU, enough capacity for small action spaces."""


#: ``head_optimizer`` choices and their default learning rates.
HEAD_OPTIMIZERS = {"sgd": 0.3, "adamw": 3e-3}


@dataclass
class OptimSection:
    """How the weights move: rates, batch sizes, clipping, what is frozen."""

    learning_rate: float = 5e-4
    """AdamW learning rate (LoRA weights tolerate large rates; use ~1e-5 for full fine-tune)."""
    weight_decay: float = 0.0
    """AdamW weight decay."""
    max_grad_norm: float = 1.0
    """Clip the global gradient norm to this value."""
    minibatch_size: int = 32
    """Samples (turns) per optimizer step."""
    micro_batch_size: int = 16
    """Samples per forward/backward pass; ``minibatch_size / micro_batch_size`` accumulation
    steps make one optimizer step (lower it to save memory)."""
    train_backbone: bool = True
    """Train the language model (LoRA or full). False: it stays frozen, only the heads learn,
    and each distinct prompt's features are computed once and reused (memoised)."""
    head_optimizer: str = "sgd"
    """Optimizer of the action head: ``sgd`` (a step that follows the gradient's size;
    ``llmgym.rl.optim``) or ``adamw`` (as the other weights)."""
    head_lr: float | None = None
    """Learning rate of the action head (default: 0.3 with SGD, 3e-3 with AdamW)."""
    anneal_lr: bool = False
    """Decay every learning rate linearly to 0 over the budget (as CleanRL's PPO): the last
    updates are small, so the final policy is not the noise of its last batches."""
    prefix_cache_grad: bool = True
    """Score mode: the update reuses the KV cache of the prompt prefix all samples share (the
    system prompt), computed without gradient under the current weights; gradients flow
    through the observation and action tokens only. 3-6x cheaper updates on CPU."""

    def head_rate(self) -> float:
        """The action head's learning rate: ``head_lr``, else its optimizer's default.

        Example:
            >>> OptimSection().head_rate(), OptimSection(head_optimizer="adamw").head_rate()
            (0.3, 0.003)
        """
        if self.head_optimizer not in HEAD_OPTIMIZERS:
            raise TrainingError(
                f"head_optimizer must be one of {', '.join(HEAD_OPTIMIZERS)}, "
                f"not {self.head_optimizer!r}."
            )
        if self.head_lr is None:
            return HEAD_OPTIMIZERS[self.head_optimizer]
        if isinstance(self.head_lr, bool) or not isinstance(self.head_lr, (int, float)):
            raise TrainingError(f"head_lr must be a number, not {self.head_lr!r}.")
        if not math.isfinite(self.head_lr) or self.head_lr <= 0:
            raise TrainingError(f"head_lr must be a positive number, not {self.head_lr!r}.")
        return float(self.head_lr)


@dataclass
class SFTSection:
    """The supervised warm start before RL (``llmgym.rl.sft``)."""

    source: str = "none"
    """Warm start: ``none``, ``auto`` (demos from an expert on this env) or a JSONL file."""
    episodes: int = 200
    """``source=auto``: expert episodes rolled out through the describer for demos."""
    epochs: int = 8
    """Passes over the SFT demos."""
    batch_size: int = 8
    """Demos per SFT optimizer step (small batches, many steps: the demo set is small)."""
    learning_rate: float = 3e-3
    """Learning rate for the SFT warm start (a fresh optimizer; RL gets its own)."""
    as_reference: bool = field(default=True, metadata={"flat": "reference_after_sft"})
    """After the SFT warm start, the warm-started policy becomes the KL reference (LoRA: the
    adapter is merged into the weights and a fresh one starts), as in SFT-then-RL pipelines."""
    during_rl: float = 0.0
    """Weight of a continued SFT loss on recent successful episodes during RL (0 = off)."""


EVAL_METHODS = ("auto", "exact", "sampled")


@dataclass
class EvalSection:
    """The periodic and final evaluations on fixed seeds (``1_000_000 + i``)."""

    every: int = 5
    """Evaluate every this many iterations (0 = only at the start and the end)."""
    episodes: int = 100
    """Episodes per periodic evaluation (the final report uses more)."""
    greedy: bool = True
    """Evaluate the greedy (arg-max) policy rather than sampling."""
    method: str = "auto"
    """``exact``: the greedy policy's expected return from the env's transition model
    (Blackjack, FrozenLake, Taxi, CliffWalking; ``llmgym.evaluation.exact``); ``sampled``: mean
    over evaluation episodes; ``auto``: exact where the env allows it (greedy, Markov prompt)."""


SECTIONS: dict[str, type] = {
    "run": RunSection,
    "policy": PolicySection,
    "lora": LoraSection,
    "optim": OptimSection,
    "sft": SFTSection,
    "eval": EvalSection,
}
#: Sections whose fields were flat under their own names (the others took the section's name
#: as a prefix: ``lora_r``, ``sft_epochs``, ``eval_every``).
_UNPREFIXED = ("run", "policy", "optim")
#: Values of fields added after runs were saved, for configs that lack them: what those runs
#: used (the head's optimizer was AdamW before ``head_optimizer`` existed).
LEGACY_DEFAULTS: dict[str, Any] = {"optim.head_optimizer": "adamw"}


def _flat_name(section: str, f: dataclasses.Field) -> str:
    if "flat" in f.metadata:
        return f.metadata["flat"]
    if f.name in ("enabled", "source"):  # lora=false, sft=auto
        return section
    return f.name if section in _UNPREFIXED else f"{section}_{f.name}"


FLAT_ALIASES: dict[str, str] = {
    _flat_name(s, f): f"{s}.{f.name}"
    for s, cls in SECTIONS.items()
    for f in dataclasses.fields(cls)
    if (s, f.name) not in (("policy", "greedy"), ("policy", "seed"))  # set by the trainer
}
"""Flat name of before the sections -> its dotted key (``lora_r`` -> ``lora.r``)."""
FLAT_ALIASES["policy_kwargs"] = "policy"  # a dict of extra PolicyConfig fields


def canonical_key(key: str) -> str:
    """The dotted key of a flat alias; other keys as they are."""
    return FLAT_ALIASES.get(key, key)


@dataclass
class TrainConfig:
    """Fields shared by every trainer, in sections. Defaults are sized for a 2-core laptop CPU.
    Build one from flat, dotted or sectioned keys with :meth:`build`."""

    run: RunSection = field(default_factory=RunSection)
    """Env, budget, seeds, output directory, logging."""
    policy: PolicySection = field(default_factory=lambda: PolicySection(max_new_tokens=24))
    """The model and how it acts (a ``PolicyConfig`` plus the action head)."""
    lora: LoraSection = field(default_factory=LoraSection)
    """LoRA adapter or full fine-tune."""
    optim: OptimSection = field(default_factory=OptimSection)
    """Learning rates, batch sizes, clipping, what is frozen."""
    sft: SFTSection = field(default_factory=SFTSection)
    """The supervised warm start."""
    eval: EvalSection = field(default_factory=EvalSection)
    """Periodic and final evaluations."""
    min_entropy: float = 0.05
    """When the policy's mean entropy (nats) falls below this, the entropy bonus doubles every
    update (from 0.01, at most 1) until it recovers, then decays back (0 = off)."""

    @classmethod
    def build(cls, values: dict[str, Any] | None = None, *, strict: bool = True) -> TrainConfig:
        """A config from ``values`` keyed by dotted keys (``policy.temperature``), flat aliases
        (``temperature``), whole sections (``{"lora": {"r": 8}}`` or a ``LoraSection``) or the
        algorithm's own fields. ``strict=False`` skips unknown keys (saved configs of other
        versions); otherwise an unknown key is an error."""
        sections: dict[str, dict[str, Any]] = {name: {} for name in SECTIONS}
        top: dict[str, Any] = {}
        for key, value in (values or {}).items():
            for dotted, item in _expand(key, value):
                name, _, sub = dotted.partition(".")
                if name == "algo":
                    continue
                if not sub and name in SECTIONS:
                    raise TrainingError(
                        f"{name} is a section; set its keys, like {name}.KEY=VALUE."
                    )
                if _known(cls, name, sub):
                    (sections[name] if sub else top)[sub or name] = item
                elif strict:
                    raise TrainingError(
                        f"Unknown config key {key!r}; see {cls.__name__} and its sections."
                    )
        if strict and sections["policy"].keys() & {"greedy", "seed"}:
            raise TrainingError(
                "policy.greedy and policy.seed are set by the trainer, not the config."
            )
        built = {
            name: SECTIONS[name](**(_default_section(cls, name) | v))
            for name, v in sections.items()
        }
        return cls(**built, **top)

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> TrainConfig:
        """A saved config (:meth:`to_dict`, or the flat one of before the sections); fields it
        predates take the values that reproduce the run as it was (``LEGACY_DEFAULTS``)."""
        saved = {canonical_key(k) for k in _dotted_keys(values)}
        legacy = {k: v for k, v in LEGACY_DEFAULTS.items() if k not in saved}
        return cls.build(legacy | values, strict=False)

    def to_dict(self) -> dict[str, Any]:
        """Sections as nested dicts, the algorithm's fields and ``algo`` at the top."""
        return dataclasses.asdict(self) | {"algo": getattr(self, "algo", "")}


def default_value(cls: type, key: str) -> Any:
    """The default of a dotted or flat key in config class ``cls`` (a TrainingError if unknown).

    Example:
        >>> default_value(TrainConfig, "max_new_tokens"), default_value(TrainConfig, "lora.r")
        (24, 16)
    """
    name, _, sub = canonical_key(key).partition(".")
    if not is_key(cls, key):
        raise TrainingError(f"Unknown config key {key!r}; see {cls.__name__} and its sections.")
    default = getattr(cls(), name)
    return getattr(default, sub) if sub else default


def is_key(cls: type, key: str) -> bool:
    """Whether config class ``cls`` has this dotted or flat key."""
    name, _, sub = canonical_key(key).partition(".")
    return _known(cls, name, sub)


def is_optional(cls: type, key: str) -> bool:
    """Whether a dotted or flat key of config class ``cls`` may be None (``--set KEY=null``).

    Example:
        >>> from llmgym.rl.ppo import PPOConfig
        >>> is_optional(PPOConfig, "target_kl"), is_optional(PPOConfig, "gamma")
        (True, False)
    """
    name, _, sub = canonical_key(key).partition(".")
    owner, field_name = (SECTIONS[name], sub) if sub else (cls, name)
    hints = typing.get_type_hints(owner)
    return type(None) in typing.get_args(hints[field_name])


def flat_view(values: dict[str, Any]) -> dict[str, Any]:
    """A saved config (sectioned or flat) keyed by the flat names, for readers of ``run.json``.

    Example:
        >>> flat_view({"eval": {"method": "exact"}, "gamma": 0.9})
        {'eval_method': 'exact', 'gamma': 0.9}
    """
    flat_of = {dotted: flat for flat, dotted in FLAT_ALIASES.items() if flat != "policy_kwargs"}
    return {flat_of.get(d, d): v for key, value in values.items() for d, v in _expand(key, value)}


def _expand(key: str, value: Any) -> list[tuple[str, Any]]:
    """(dotted key, value) pairs of one input item."""
    if key in SECTIONS and isinstance(value, (dict, SECTIONS[key])):
        items = dataclasses.asdict(value) if dataclasses.is_dataclass(value) else value
        return [(f"{key}.{k}", v) for k, v in items.items()]
    if key == "policy_kwargs":
        return [(f"policy.{k}", v) for k, v in (value or {}).items()]
    return [(canonical_key(key), value)]


def _dotted_keys(values: dict[str, Any]) -> list[str]:
    return [dotted for key, value in values.items() for dotted, _ in _expand(key, value)]


def _known(cls: type, name: str, sub: str) -> bool:
    if sub:
        return name in SECTIONS and sub in {f.name for f in dataclasses.fields(SECTIONS[name])}
    return name in {f.name for f in dataclasses.fields(cls)} and name not in SECTIONS


def _default_section(cls: type, name: str) -> dict[str, Any]:
    """The values of section ``name`` in a default ``cls`` (e.g. ``max_new_tokens=24``)."""
    return dataclasses.asdict(getattr(cls(), name))
