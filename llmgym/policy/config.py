"""``PolicyConfig``: how an ``LLMPolicy`` builds prompts and picks actions, checked where it is
built; and the checks every config dataclass shares.

Each field of a config dataclass declares its rule beside its default and its docstring
(``num_envs: int = field(default=8, metadata=rule(min=1))``); :func:`check_fields` checks the
fields against their annotated types and their rules and refuses a value in one sentence that
names its key: a string where a number belongs, NaN or an infinity, a number out of range, a
name that is not one of the choices.

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

import ast
import dataclasses
import functools
import inspect
import math
import numbers
import sys
import types
import typing
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar

from llmgym.errors import ConfigError, ConfigValueError

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


@dataclass(frozen=True)
class Rule:
    """What a field accepts beyond its type: bounds (``min``/``max`` inclusive, ``above``/
    ``below`` exclusive), ``choices``, or a ``test`` whose accepted values ``expect`` names.
    ``hint`` is added to the sentence in parentheses."""

    min: float | None = None
    above: float | None = None
    max: float | None = None
    below: float | None = None
    choices: tuple[str, ...] = ()
    test: Callable[[Any], bool] | None = None
    expect: str = ""
    hint: str = ""

    def check(self, key: str, value: Any) -> None:
        """Raise ``ConfigValueError`` unless ``value`` (of the field's type) is accepted.

        Example:
            >>> Rule(min=0.0, below=1.0).check("decay", 1.0)
            Traceback (most recent call last):
            ...
            llmgym.errors.ConfigValueError: decay must be in [0, 1), not 1.0.
        """
        if self.choices and value not in self.choices:
            self._refuse(key, f"one of {', '.join(self.choices)}", value)
        if self.test is not None and not self.test(value):
            self._refuse(key, self.expect, value)
        if isinstance(value, numbers.Real) and not self._within(value):
            self._refuse(key, self.bounds(), value)

    def bounds(self) -> str:
        """The accepted range in words: ``at least 1``, ``above 0``, ``in (0, 1]``.

        Example:
            >>> Rule(above=0, max=1).bounds(), Rule(min=1).bounds()
            ('in (0, 1]', 'at least 1')
        """
        low = f"[{_number(self.min)}" if self.min is not None else None
        low = f"({_number(self.above)}" if self.above is not None else low
        high = f"{_number(self.max)}]" if self.max is not None else None
        high = f"{_number(self.below)})" if self.below is not None else high
        if low and high:
            return f"in {low}, {high}"
        if low:
            return f"at least {low[1:]}" if low[0] == "[" else f"above {low[1:]}"
        return f"at most {high[:-1]}" if high and high[-1] == "]" else f"below {(high or '')[:-1]}"

    def _within(self, value: float) -> bool:
        return (
            (self.min is None or value >= self.min)
            and (self.above is None or value > self.above)
            and (self.max is None or value <= self.max)
            and (self.below is None or value < self.below)
        )

    def _refuse(self, key: str, accepted: str, value: Any) -> None:
        hint = f" ({self.hint})" if self.hint else ""
        raise ConfigValueError(f"{key} must be {accepted}{hint}, not {value!r}.")


def rule(**kwargs: Any) -> dict[str, Rule]:
    """A field's ``metadata`` holding its :class:`Rule`, as in
    ``num_envs: int = field(default=8, metadata=rule(min=1))``."""
    return {"rule": Rule(**kwargs)}


def check_fields(
    config: Any,
    prefix: str = "",
    *,
    rules: dict[str, Rule] | None = None,
    skip: typing.Collection[str] = (),
) -> None:
    """Check every field of dataclass ``config`` against its annotated type and its rule (the
    field's ``metadata["rule"]``, else ``rules[name]``); a refused value raises
    ``ConfigValueError`` naming ``prefix + name``. An integral float given to a whole-number
    field becomes an int (``8.0`` -> ``8``); fields in ``skip`` are left alone.

    Example:
        >>> check_fields(PolicyConfig(), "policy.")
        >>> config = PolicyConfig()
        >>> config.history = "two"
        >>> check_fields(config, "policy.")
        Traceback (most recent call last):
        ...
        llmgym.errors.ConfigValueError: policy.history must be a whole number, not 'two'.
    """
    hints = _type_hints(type(config))
    for f in dataclasses.fields(config):
        if f.name in skip:
            continue
        key = prefix + f.name
        value = _typed(key, getattr(config, f.name), hints.get(f.name, Any))
        if value is not getattr(config, f.name):
            object.__setattr__(config, f.name, value)
        if isinstance(value, numbers.Real) and not math.isfinite(value):  # NaN, +-inf
            raise ConfigValueError(f"{key} must be a finite number, not {value!r}.")
        checker = f.metadata.get("rule") or (rules or {}).get(f.name)
        if checker is not None and value is not None:
            checker.check(key, value)


class Checked:
    """Base of the config dataclasses: every field is checked against its type and its rule
    when the dataclass is built and again by :meth:`validate`; a refused value is one sentence
    naming ``prefix + field`` (``run.num_envs must be at least 1, not 0.``)."""

    prefix: ClassVar[str] = ""

    def __post_init__(self) -> None:
        self.validate()

    def validate(self) -> None:
        """Refuse a value of the wrong type or out of range, in one sentence."""
        check_fields(self, self.prefix)


@functools.cache
def field_docs(cls: type) -> dict[str, str]:
    """Field name -> the docstring written under the field, on one line, in dataclass ``cls``
    and its bases (nothing where the source is not at hand).

    Example:
        >>> field_docs(PolicyConfig)["history"]
        'Past (observation, answer) turns kept in the prompt; 0 for Markov envs.'
    """
    docs: dict[str, str] = {}
    for klass in reversed(cls.__mro__):
        if dataclasses.is_dataclass(klass):
            docs |= _module_field_docs(klass.__module__).get(klass.__qualname__, {})
    return docs


@functools.cache
def _module_field_docs(module: str) -> dict[str, dict[str, str]]:
    """Class name -> {field name -> docstring} for the top-level classes of ``module``."""
    try:
        tree = ast.parse(inspect.getsource(sys.modules[module]))
    except (KeyError, OSError, TypeError, SyntaxError):
        return {}
    out: dict[str, dict[str, str]] = {}
    for node in tree.body:
        if not isinstance(node, ast.ClassDef):
            continue
        docs = out.setdefault(node.name, {})
        for item, after in zip(node.body, node.body[1:]):
            if not (isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name)):
                continue
            if isinstance(after, ast.Expr) and isinstance(after.value, ast.Constant):
                if isinstance(after.value.value, str):
                    docs[item.target.id] = " ".join(after.value.value.split())
    return out


@functools.cache
def _type_hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


#: Integral floats up to this size are taken as whole numbers (exactly representable).
_WHOLE_FLOAT_LIMIT = 2**53


def _typed(key: str, value: Any, hint: Any) -> Any:
    """``value`` if it is of type ``hint`` (an integral float as an int), else a sentence."""
    args = typing.get_args(hint)
    optional = typing.get_origin(hint) in (typing.Union, types.UnionType) and type(None) in args
    if optional:
        if value is None:
            return None
        rest = [a for a in args if a is not type(None)]
        hint = rest[0] if len(rest) == 1 else Any
    ok, typed = _conforms(value, hint)
    whole = isinstance(value, numbers.Integral) and not isinstance(value, bool)
    if not ok and whole and hint is int:
        raise ConfigValueError(f"{key} must be a whole number within +-2**53, not {value!r}.")
    if not ok:
        either = " or null" if optional else ""
        raise ConfigValueError(f"{key} must be {_kind(hint)}{either}, not {value!r}.")
    return typed


def _conforms(value: Any, hint: Any) -> tuple[bool, Any]:
    origin = typing.get_origin(hint) or hint
    if origin is bool:
        return isinstance(value, bool), value
    if origin is int:
        if isinstance(value, bool):
            return False, value
        if isinstance(value, numbers.Integral):  # one past 2**53 overflows C and float uses
            return abs(value) <= _WHOLE_FLOAT_LIMIT, value
        whole = isinstance(value, float) and value.is_integer()
        if whole and abs(value) <= _WHOLE_FLOAT_LIMIT:
            return True, int(value)
        return False, value
    if origin is float:  # a whole number given for a float becomes one (10**20 -> 1e20)
        if isinstance(value, bool) or not isinstance(value, numbers.Real):
            return False, value
        if isinstance(value, numbers.Integral):
            return abs(value) < 2**1023, float(value) if abs(value) < 2**1023 else value
        return True, value
    if origin is str:
        return isinstance(value, str), value
    if origin is list:
        if not isinstance(value, (list, tuple)):
            return False, value
        item = (typing.get_args(hint) or (Any,))[0]
        checked = [_conforms(v, item) for v in value]
        if not all(ok for ok, _ in checked):
            return False, value
        items = [v for _, v in checked]
        same = all(a is b for a, b in zip(items, value))
        return True, value if same else type(value)(items)
    if origin is dict:
        return isinstance(value, dict), value
    return True, value


def _kind(hint: Any) -> str:
    """What a value of type ``hint`` is, for a sentence."""
    origin = typing.get_origin(hint) or hint
    names = {bool: "true or false", int: "a whole number", float: "a number", str: "a string"}
    if origin in names:
        return names[origin]
    if origin is list:
        item = (typing.get_args(hint) or (Any,))[0]
        plural = {int: "whole numbers", float: "numbers", str: "strings"}.get(item, "values")
        return f"a list of {plural}"
    if origin is dict:
        return "a mapping of names to values (a JSON object)"
    return getattr(origin, "__name__", str(origin))


def _number(bound: float) -> str:
    """A bound as written: ``0`` for 0.0, ``1e-05`` as is."""
    if isinstance(bound, float) and bound.is_integer() and abs(bound) < 1e15:
        return str(int(bound))
    return str(bound)


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
    "Checked",
    "ConfigValueError",
    "PolicyConfig",
    "PolicySection",
    "Rule",
    "check_feature_layers",
    "check_fields",
    "check_vllm_training",
    "field_docs",
    "is_device",
    "rule",
]
