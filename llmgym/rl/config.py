"""The trainers' composed config: six sections (``llmgym.rl.sections``) and the algorithm's
own fields.

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
from typing import Any, ClassVar

from llmgym.config import Rule, check_fields, field_docs, rule
from llmgym.envs.registration import check_env_kwargs
from llmgym.errors import TrainingError
from llmgym.policy.config import PolicySection, check_feature_layers, check_vllm_training
from llmgym.resources import MAX_GROUP_SIZE, check_display
from llmgym.rl.sections import (
    LEARNING_RATE,
    EvalSection,
    LoraSection,
    OptimSection,
    RunSection,
    SFTSection,
)

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
    "action_ent_coef": Rule(min=0),
    "kl_coef": Rule(min=0),
    "beta": Rule(min=0),
    "target_kl": Rule(above=0, hint="null never stops the epochs early"),
    "value_hidden": Rule(min=1),
    "value_lr": LEARNING_RATE,
    "value_norm_decay": Rule(min=0, below=1),
    "group_size": Rule(
        min=2,
        test=lambda size: size <= MAX_GROUP_SIZE,
        expect=f"at most {MAX_GROUP_SIZE:,}",
        hint="GRPO's advantages are relative to a group",
    ),
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
            check_display(self.run.env_kwargs)
            check_env_kwargs(self.run.env_id, self.run.env_kwargs)
        if self.eval.env_kwargs:  # the evaluation env, made once the same way
            check_display(self.eval.env_kwargs)
            check_env_kwargs(self.run.env_id, {**self.run.env_kwargs, **self.eval.env_kwargs})
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
