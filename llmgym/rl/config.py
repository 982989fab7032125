"""The trainers' composed config: six sections and the algorithm's own fields.

``TrainConfig`` holds a ``run`` section (env, budget, seeds, where it goes), ``policy`` (the
model and how it acts: ``llmgym.policy.config.PolicySection``, a ``PolicyConfig`` plus the
action head), ``lora``, ``optim``, ``sft`` and ``eval``; each algorithm's config (``PPOConfig``,
...) adds its own fields at the top. Every field is defined once. Keys are written with dots
(``policy.temperature``, as ``llmgym train --set policy.temperature=0.7``); the flat names of
before the sections (``temperature``, ``lora_r``, ``sft_epochs``) stay accepted as aliases, so
every saved config and committed command still works.

Defaults and checks live here only (``llmgym train`` takes its options' defaults and help from
the fields): each field declares the values it takes (``metadata=rule(min=1)``; the algorithms'
fields by name in ``ALGORITHM_RULES``), checked when a section is built and by ``validate()``.

Example:
    >>> from llmgym.rl.algorithms.ppo import PPOConfig
    >>> cfg = PPOConfig.build({"policy.temperature": 2.0, "lora_r": 8, "gamma": 0.9})
    >>> cfg.policy.temperature, cfg.lora.r, cfg.gamma, cfg.run.env_id
    (2.0, 8, 0.9, 'Text-Blackjack-v1')
    >>> canonical_key("sft_epochs"), canonical_key("lora"), canonical_key("gamma")
    ('sft.epochs', 'lora.enabled', 'gamma')
"""

from __future__ import annotations

import dataclasses
import difflib
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from llmgym.envs.registration import check_env_kwargs
from llmgym.errors import TrainingError
from llmgym.policy.config import (
    Checked,
    PolicySection,
    Rule,
    check_feature_layers,
    check_fields,
    check_vllm_training,
    field_docs,
    is_device,
    rule,
)
from llmgym.rollout import MAX_ENVS, MAX_EPISODES, MAX_TIMESTEPS

#: Learning rates above this are refused (AdamW moves each weight by about the rate a step; the
#: head's SGD steps follow the gradient; runs use at most 1). numpy's global seed is < 2**32.
MAX_LEARNING_RATE, MAX_SEED = 10.0, 2**32 - 1
#: The most torch CPU threads a command may ask for (``run.num_threads``, ``--threads``).
MAX_THREADS = 1024
#: A learning rate: above 0 and at most ``MAX_LEARNING_RATE`` (one sentence for each side).
LEARNING_RATE = Rule(
    above=0, test=lambda rate: rate <= MAX_LEARNING_RATE, expect=f"at most {MAX_LEARNING_RATE:g}"
)


def _demo_source(source: str) -> bool:
    """``none``, ``auto`` or a file: not a folder or a device (``/dev/full`` reads zeros without
    end); a missing file is left to the warm start to name."""
    path = Path(source)
    return bool(source) and (source in ("none", "auto") or not path.exists() or path.is_file())


def _utf8(text: str) -> bool:
    """Whether ``text`` is UTF-8 (a path of undecodable bytes is not: TensorBoard refuses it)."""
    return text.encode("utf-8", "surrogatepass").decode("utf-8", "replace") == text


def capped(limit: int, **bounds: Any) -> dict[str, Rule]:
    """A count's rule: ``bounds`` and at most ``limit`` (``llmgym.rollout``'s limits on what
    one command may ask for), each side refused in its own sentence."""
    return rule(**bounds, test=lambda count: count <= limit, expect=f"at most {limit:,}")


@dataclass
class RunSection(Checked):
    """What to train on, for how long, with which seeds, and where the run goes."""

    prefix: ClassVar[str] = "run."

    env_id: str = "Text-Blackjack-v1"
    """Text env to train in (``llmgym envs`` lists them)."""
    env_kwargs: dict[str, Any] = field(default_factory=dict)
    """Keyword arguments for ``gym.make`` (base-env kwargs such as ``is_slippery=False``)."""
    num_envs: int = field(default=8, metadata=capped(MAX_ENVS, min=1))
    """K envs stepped in lockstep; every policy call is one batch of up to K observations."""
    total_env_steps: int = field(default=3000, metadata=capped(MAX_TIMESTEPS, min=1))
    """Stop after this many env steps (whichever of this and ``total_episodes`` comes first)."""
    total_episodes: int = field(default=0, metadata=capped(MAX_EPISODES, min=0))
    """Stop after this many training episodes (0 = no episode limit)."""
    episodes_per_update: int = field(default=32, metadata=rule(min=1))
    """Complete episodes collected per iteration (each iteration ends with one update)."""
    seed: int = field(default=0, metadata=rule(min=0, max=MAX_SEED))
    """Seed for torch/numpy/python RNGs; the i-th training env seed is ``seed * 100_003 + i``."""
    device: str = field(
        default="auto", metadata=rule(test=is_device, expect="one of auto, cpu, cuda, cuda:N, mps")
    )
    """``auto``, ``cpu``, ``cuda`` (or ``cuda:N``) or ``mps``."""
    output_dir: str = field(default="runs/default", metadata=rule(test=_utf8, expect="UTF-8 text"))
    """Run directory: config, metrics.csv, TensorBoard events, checkpoints, plot."""
    checkpoint_every: int = field(default=10, metadata=rule(min=0))
    """Save a checkpoint every this many iterations (and always at the end; 0 = only then)."""
    log_every: int = field(default=1, metadata=rule(min=1))
    """Write metrics every this many iterations."""
    collapse_warn: bool = True
    """Warn when the action distribution collapses, entropy falls to ~0 or KL runs away."""
    kl_warn: float = field(default=2.0, metadata=rule(above=0))
    """KL to the reference above which a run-away warning is printed."""
    num_threads: int = field(default=0, metadata=rule(min=0, max=MAX_THREADS))
    """torch CPU threads (0 = torch's default; 1 is faster on a CPU shared with other jobs)."""
    progress: bool = True
    """Show a progress bar."""
    recipe: str = ""
    """The recipe the run's settings came from (``llmgym recipes``; "" for none)."""


@dataclass
class LoraSection(Checked):
    """Which weights train: a LoRA adapter (peft) or the whole model."""

    prefix: ClassVar[str] = "lora."

    enabled: bool = True
    """Train a LoRA adapter (the reference policy is the adapter switched off); False = full
    fine-tune (the reference is then a frozen copy, only built when a KL term needs it)."""
    r: int = field(default=16, metadata=rule(min=1))
    """LoRA rank."""
    alpha: int = field(default=32, metadata=rule(min=1))
    """LoRA scaling numerator (scale = alpha / r)."""
    dropout: float = field(default=0.0, metadata=rule(min=0, below=1))
    """LoRA dropout (0 keeps logprobs of a sample identical between rollout and update)."""
    target_modules: list[str] | None = None
    """Modules LoRA adapts; None = the model registry's default for this model."""
    layers: int = field(default=8, metadata=rule(min=0))
    """LoRA only in the last N transformer layers (0 = all layers). Backward then stops below
    them: ~3x cheaper updates on CPU, enough capacity for small action spaces."""
    init: str = field(default="random", metadata=rule(choices=("random", "states")))
    """A's start (B is 0): ``random`` (peft's) or ``states``, the directions in which the first
    batch's states differ (:func:`llmgym.rl.weights.init_lora_from_states`)."""


#: ``head_optimizer`` choices and their default learning rates.
HEAD_OPTIMIZERS = {"sgd": 0.3, "adamw": 3e-3}


@dataclass
class OptimSection(Checked):
    """How the weights move: rates, batch sizes, clipping, what is frozen."""

    prefix: ClassVar[str] = "optim."

    learning_rate: float = field(default=5e-4, metadata={"rule": LEARNING_RATE})
    """AdamW learning rate (LoRA weights tolerate large rates; use ~1e-5 for full fine-tune)."""
    weight_decay: float = field(default=0.0, metadata=rule(min=0))
    """AdamW weight decay."""
    max_grad_norm: float = field(default=1.0, metadata=rule(above=0))
    """Clip the global gradient norm to this value."""
    minibatch_size: int = field(default=32, metadata=rule(min=1))
    """Samples (turns) per optimizer step."""
    micro_batch_size: int = field(default=16, metadata=rule(min=1))
    """Samples per forward/backward pass (accumulated into one step; lower it to save memory)."""
    train_backbone: bool = True
    """Train the language model (LoRA or full). False: it stays frozen, only the heads learn,
    and each distinct prompt's features are computed once and reused (memoised)."""
    lm_optimizer: str = field(default="adamw", metadata=rule(choices=("adamw", "sgd")))
    """The language model's optimizer: ``adamw``, or ``sgd`` at ``learning_rate`` (a step that
    follows the gradient's size, as the head's; ``llmgym.rl.optim``)."""
    head_optimizer: str = field(default="sgd", metadata=rule(choices=tuple(HEAD_OPTIMIZERS)))
    """Optimizer of the action head: ``sgd`` (a step that follows the gradient's size;
    ``llmgym.rl.optim``) or ``adamw`` (as the other weights)."""
    head_lr: float | None = field(default=None, metadata={"rule": LEARNING_RATE})
    """Learning rate of the action head (default: 0.3 with SGD, 3e-3 with AdamW)."""
    anneal_lr: bool = False
    """Decay every learning rate linearly to 0 over the budget (as CleanRL's PPO)."""
    average_decay: float = field(default=0.0, metadata=rule(min=0, below=1))
    """Evaluate and save an average of the trained weights, ``avg <- decay * avg + (1 - decay)
    * weights`` after each update (``llmgym.rl.averaging``); acting uses the weights. 0: off."""
    prefix_cache_grad: bool = True
    """Score mode: the update reuses the shared system prompt's KV cache (no gradient through
    it; gradients flow through the observation and action tokens). 3-6x cheaper on CPU."""

    def head_rate(self) -> float:
        """The action head's learning rate: ``head_lr``, else its optimizer's default.

        Example:
            >>> OptimSection().head_rate(), OptimSection(head_optimizer="adamw").head_rate()
            (0.3, 0.003)
        """
        if self.head_lr is None:
            return HEAD_OPTIMIZERS[self.head_optimizer]
        return float(self.head_lr)


@dataclass
class SFTSection(Checked):
    """The supervised warm start before RL (``llmgym.rl.algorithms.sft``)."""

    prefix: ClassVar[str] = "sft."

    source: str = field(
        default="none", metadata=rule(test=_demo_source, expect="none, auto or a file")
    )
    """Warm start: ``none``, ``auto`` (demos from an expert on this env) or a JSONL file."""
    episodes: int = field(default=200, metadata=rule(min=1))
    """``source=auto``: expert episodes rolled out through the describer for demos."""
    epochs: int = field(default=8, metadata=rule(min=0))
    """Passes over the SFT demos."""
    batch_size: int = field(default=8, metadata=rule(min=1))
    """Demos per SFT optimizer step (small batches, many steps: the demo set is small)."""
    learning_rate: float = field(default=3e-3, metadata={"rule": LEARNING_RATE})
    """Learning rate for the SFT warm start (a fresh optimizer; RL gets its own)."""
    as_reference: bool = field(default=True, metadata={"flat": "reference_after_sft"})
    """After the SFT warm start, the warm-started policy becomes the KL reference (LoRA: the
    adapter is merged into the weights and a fresh one starts), as in SFT-then-RL pipelines."""
    during_rl: float = field(default=0.0, metadata=rule(min=0))
    """Weight of a continued SFT loss on recent successful episodes during RL (0 = off)."""


EVAL_METHODS = ("auto", "exact", "sampled")


@dataclass
class EvalSection(Checked):
    """The periodic and final evaluations on fixed seeds (``1_000_000 + i``)."""

    prefix: ClassVar[str] = "eval."

    every: int = field(default=5, metadata=rule(min=0))
    """Evaluate every this many iterations (0 = only at the start and the end)."""
    episodes: int = field(default=100, metadata=capped(MAX_EPISODES, min=1))
    """Episodes per periodic evaluation (the final report uses more)."""
    greedy: bool = True
    """Evaluate the greedy (arg-max) policy rather than sampling."""
    method: str = field(default="auto", metadata=rule(choices=EVAL_METHODS))
    """``exact``: the greedy policy's expected return from the env's transition model
    (Blackjack, FrozenLake, Taxi, CliffWalking; ``llmgym.evaluation.exact``); ``sampled``: mean
    over evaluation episodes; ``auto``: exact where the env allows it (greedy, Markov prompt)."""
    start: bool = True
    """Evaluate the policy before training (``llmgym train --no-start-eval`` skips it: no start
    value in the result and no iteration-0 row)."""
    stop_at: float | None = None
    """Stop training once a periodic evaluation's mean return reaches this (as SB3's
    ``StopTrainingOnRewardThreshold``); the final evaluation still runs."""


SECTIONS: dict[str, type] = {
    "run": RunSection,
    "policy": PolicySection,
    "lora": LoraSection,
    "optim": OptimSection,
    "sft": SFTSection,
    "eval": EvalSection,
}
#: Sections whose flat names were the fields' own (the others': ``lora_r``, ``eval_every``).
_UNPREFIXED = ("run", "policy", "optim")
#: Fields added after runs were saved -> what those runs used (for configs that lack them).
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


#: Rules of the algorithms' own fields, by name (``PPOConfig.gamma``, ``GRPOConfig.group_size``):
#: a field that declares no ``rule(...)`` in its metadata takes the rule of its name here.
ALGORITHM_RULES: dict[str, Rule] = {
    "gamma": Rule(min=0, max=1),
    "gae_lambda": Rule(min=0, max=1),
    "update_epochs": Rule(min=1),
    "clip_coef": Rule(min=0),
    "vf_coef": Rule(min=0),
    "ent_coef": Rule(min=0),
    "kl_coef": Rule(min=0),
    "beta": Rule(min=0),
    "target_kl": Rule(above=0, hint="null never stops the epochs early"),
    "value_hidden": Rule(min=1),
    "value_lr": LEARNING_RATE,
    "value_norm_decay": Rule(min=0, below=1),
    "group_size": Rule(min=2, hint="GRPO's advantages are relative to a group"),
    "group_level": Rule(choices=("episode", "step")),
    "max_branch_depth": Rule(min=1),
    "baseline": Rule(choices=("batch", "ema", "none")),
    "ema_decay": Rule(min=0, below=1),
    "ref_refresh_every": Rule(min=0),
}


@dataclass
class TrainConfig:
    """Fields shared by every trainer, in sections. Defaults are sized for a 2-core laptop CPU.
    Build one from flat, dotted or sectioned keys with :meth:`build`."""

    #: Whether the algorithm scores each generated turn again as the action taken (``qac``).
    scores_turns: ClassVar[bool] = False

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
    min_entropy: float = field(default=0.05, metadata=rule(min=0))
    """When the policy's mean entropy (nats) falls below this, the entropy bonus doubles every
    update (from 0.01, at most 1) until it recovers, then decays back (0 = off)."""

    def __post_init__(self) -> None:
        self._check_own_fields()

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
                    raise unknown_key(cls, key)
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

    def validate(self) -> None:
        """Refuse, in one sentence, values that cannot train, before the model loads. Each
        section checks its own fields, the algorithm's follow ``ALGORITHM_RULES``.

        Example:
            >>> cfg = TrainConfig.build({"policy.backend": "vllm", "policy.action_head": True})
            >>> cfg.validate()  # doctest: +ELLIPSIS
            Traceback (most recent call last):
            ...
            llmgym.errors.ConfigError: vLLM returns log-probs, not hidden states, so a policy ...
        """
        for name in SECTIONS:
            getattr(self, name).validate()
        check_feature_layers(self.policy, turns_scored=self.scores_turns)
        self._check_own_fields()
        if self.run.env_kwargs:  # the env is made once with them (a bad map name, a typo)
            check_env_kwargs(self.run.env_id, self.run.env_kwargs)
        check_vllm_training(self.policy, train_backbone=self.optim.train_backbone)

    def _check_own_fields(self) -> None:
        """The fields outside the sections (``min_entropy``, the algorithm's): types, rules."""
        check_fields(self, rules=ALGORITHM_RULES, skip=SECTIONS)


def default_value(cls: type, key: str) -> Any:
    """The default of a dotted or flat key in config class ``cls`` (a TrainingError if unknown).

    Example:
        >>> default_value(TrainConfig, "max_new_tokens"), default_value(TrainConfig, "lora.r")
        (24, 16)
    """
    name, _, sub = _owner(cls, key)[2].partition(".")
    default = getattr(cls(), name)
    return getattr(default, sub) if sub else default


def field_doc(cls: type, key: str) -> str:
    """The docstring written under a dotted or flat key's field in config class ``cls``, on one
    line ("" where it has none): the help of the ``llmgym train`` option that sets it.

    Example:
        >>> field_doc(TrainConfig, "eval_episodes")
        'Episodes per periodic evaluation (the final report uses more).'
    """
    owner, field_name, _ = _owner(cls, key)
    return field_docs(owner).get(field_name, "")


def is_key(cls: type, key: str) -> bool:
    """Whether config class ``cls`` has this dotted or flat key."""
    name, _, sub = canonical_key(key).partition(".")
    return _known(cls, name, sub)


def is_optional(cls: type, key: str) -> bool:
    """Whether a dotted or flat key of config class ``cls`` may be None (``--set KEY=null``).

    Example:
        >>> from llmgym.rl.algorithms.ppo import PPOConfig
        >>> is_optional(PPOConfig, "target_kl"), is_optional(PPOConfig, "gamma")
        (True, False)
    """
    owner, field_name, _ = _owner(cls, key)
    return type(None) in typing.get_args(typing.get_type_hints(owner)[field_name])


def flat_view(values: dict[str, Any]) -> dict[str, Any]:
    """A saved config (sectioned or flat) keyed by the flat names, for readers of ``run.json``.

    Example:
        >>> flat_view({"eval": {"method": "exact"}, "gamma": 0.9})
        {'eval_method': 'exact', 'gamma': 0.9}
    """
    flat_of = {dotted: flat for flat, dotted in FLAT_ALIASES.items() if flat != "policy_kwargs"}
    return {flat_of.get(d, d): v for key, value in values.items() for d, v in _expand(key, value)}


def _owner(cls: type, key: str) -> tuple[type, str, str]:
    """(the dataclass that holds a dotted or flat key of ``cls``, its field, the dotted key)."""
    if not is_key(cls, key):
        raise unknown_key(cls, key)
    dotted = canonical_key(key)
    name, _, sub = dotted.partition(".")
    return (SECTIONS[name], sub, dotted) if sub else (cls, name, dotted)


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


def unknown_key(cls: type, key: str) -> TrainingError:
    """The error for a key ``cls`` lacks, naming the closest keys it has.

    Example:
        >>> from llmgym.rl.algorithms.ppo import PPOConfig
        >>> print(unknown_key(PPOConfig, "lora_rr"))  # doctest: +ELLIPSIS
        Unknown config key 'lora_rr' for PPOConfig (did you mean lora.r or lora.enabled?); ...
    """
    known = [f.name for f in dataclasses.fields(cls) if f.name not in SECTIONS]
    known += [*FLAT_ALIASES, *FLAT_ALIASES.values()]
    close = list(dict.fromkeys(map(canonical_key, difflib.get_close_matches(key, known, n=4))))[:2]
    hint = f" (did you mean {' or '.join(close)}?)" if close else ""
    return TrainingError(
        f"Unknown config key {key!r} for {cls.__name__}{hint}; keys are its fields and its "
        f"sections' ({', '.join(SECTIONS)}), e.g. policy.temperature=0.7."
    )


def _known(cls: type, name: str, sub: str) -> bool:
    if sub:
        return name in SECTIONS and sub in {f.name for f in dataclasses.fields(SECTIONS[name])}
    return name in {f.name for f in dataclasses.fields(cls)} and name not in SECTIONS


def _default_section(cls: type, name: str) -> dict[str, Any]:
    """The values of section ``name`` in a default ``cls`` (e.g. ``max_new_tokens=24``)."""
    return dataclasses.asdict(getattr(cls(), name))
