"""The sections of the trainers' config, one dataclass each: ``run`` (env, budget, seeds,
where it goes), ``lora``, ``optim``, ``sft`` and ``eval`` (``policy`` is
``llmgym.policy.config.PolicySection``). ``llmgym.rl.config`` composes them into ``TrainConfig``
and says how their keys are written.

Example:
    >>> LoraSection(r=8).alpha, OptimSection().head_rate(), EvalSection().method
    (32, 0.3, 'auto')
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from llmgym.config import Checked, Rule, rule
from llmgym.policy.config import is_device
from llmgym.resources import MAX_EPISODES_PER_UPDATE
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


def _count_or_auto(limit: int | None = None) -> dict[str, Rule]:
    """A count that may also be ``auto`` (sized by the memory estimator): at least 1, at most
    ``limit`` (None: no cap)."""

    def accepted(value: Any) -> bool:
        if value == "auto":
            return True
        whole = isinstance(value, int) and not isinstance(value, bool)
        return whole and 1 <= value <= (limit or value)

    span = f"from 1 to {limit:,}" if limit else "of at least 1"
    return rule(test=accepted, expect=f"a whole number {span}, or auto")


def count_or_auto(value: Any) -> Any:
    """A count given as text (``--num-envs 64``, ``"64"``) as a number; ``auto`` and numbers as
    they are (an integral float as an int).

    Example:
        >>> count_or_auto("64"), count_or_auto(" auto "), count_or_auto(8.0), count_or_auto("x")
        (64, 'auto', 8, 'x')
    """
    if isinstance(value, str):
        text = value.strip().lower()
        if text == "auto":
            return text
        try:
            return int(text)
        except ValueError:
            return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


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
    num_envs: int | str = field(default=8, metadata=_count_or_auto(MAX_ENVS))
    """K envs stepped in lockstep; every policy call is one batch of up to K observations.
    ``auto``: as many as the memory estimator (``llmgym.resources``) fits in half the memory
    available (the GPU's on CUDA), at most the episodes per update; with it a
    ``micro_batch_size`` not set is sized too. The first line printed says what was chosen."""
    total_env_steps: int = field(default=3000, metadata=capped(MAX_TIMESTEPS, min=1))
    """Stop after this many env steps (whichever of this and ``total_episodes`` comes first)."""
    total_episodes: int = field(default=0, metadata=capped(MAX_EPISODES, min=0))
    """Stop after this many training episodes (0 = no episode limit)."""
    episodes_per_update: int = field(default=32, metadata=capped(MAX_EPISODES_PER_UPDATE, min=1))
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

    def validate(self) -> None:
        self.num_envs = count_or_auto(self.num_envs)
        super().validate()


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
    target_modules: list[str] | None = field(
        default=None,
        metadata=rule(test=bool, expect="a non-empty list of module names (null: the model's)"),
    )
    """Modules LoRA adapts; None = the model registry's default for this model."""
    layers: int = field(default=8, metadata=rule(min=0))
    """LoRA only in the last N transformer layers (0 = all layers; the default takes every
    layer of a shallower model, a value set above the model's depth is refused). Backward then
    stops below them: ~3x cheaper updates on CPU, enough capacity for small action spaces."""
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
    micro_batch_size: int | str = field(default=16, metadata=_count_or_auto())
    """Samples per forward/backward pass (accumulated into one step; lower it to save memory).
    ``auto``: the largest power of two up to ``minibatch_size`` that the memory estimator fits
    (chosen with ``run.num_envs=auto`` when this is not set)."""
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
    prefix_cache_generate: str = field(default="auto", metadata=rule(choices=("auto", "on", "off")))
    """Generate mode, with ``prefix_cache_grad``: the update reuses the shared system prompt's
    KV cache as score mode does (where the frozen-trunk fast path does not run). ``auto``: on
    a GPU only, since it changes the gradient (the CPU keeps the runs made before it)."""

    def head_rate(self) -> float:
        """The action head's learning rate: ``head_lr``, else its optimizer's default.

        Example:
            >>> OptimSection().head_rate(), OptimSection(head_optimizer="adamw").head_rate()
            (0.3, 0.003)
        """
        if self.head_lr is None:
            return HEAD_OPTIMIZERS[self.head_optimizer]
        return float(self.head_lr)

    def validate(self) -> None:
        self.micro_batch_size = count_or_auto(self.micro_batch_size)
        super().validate()


@dataclass
class SFTSection(Checked):
    """The supervised warm start before RL (``llmgym.rl.algorithms.sft``)."""

    prefix: ClassVar[str] = "sft."

    source: str = field(
        default="none", metadata=rule(test=_demo_source, expect="none, auto or a file")
    )
    """Warm start: ``none``, ``auto`` (demos from an expert on this env) or a JSONL file."""
    episodes: int = field(default=200, metadata=capped(MAX_EPISODES, min=1))
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
    env_kwargs: dict[str, Any] = field(default_factory=dict)
    """Keyword arguments the evaluation envs take over ``run.env_kwargs``: measure transfer
    while training, e.g. ``map_set=heldout`` (train on a FrozenLake map set's ``train`` maps,
    evaluate on its held-out ones) or ``wording=alt`` (``llmgym train --eval-env-kwarg``)."""
