"""Agent names for ``llmgym eval`` (and benchmarks): ``make_agent("llm:smollm2-135m", env_id)``.

A name is ``kind`` or ``kind:argument``. Built in: ``random`` (seeded), ``optimal`` (exact or
heuristic, see ``llmgym.baselines.agents``), ``sb3-ppo``/``sb3-dqn``/``sb3-a2c`` (trained on the
base env and cached) and ``llm[:MODEL[@CHECKPOINT]]`` (MODEL is anything ``load_model`` takes,
default ``smollm2-135m``; CHECKPOINT a ``llmgym train`` run directory or checkpoint). Add a
kind with ``register_agent``: a factory ``(argument, env_id, **options) ->
TextAgent``, where a TextAgent answers a batch of text observations with a batch of answers:

Example:
    >>> class AlwaysFirst:
    ...     name = "first"
    ...     def act_batch(self, observations, infos):
    ...         return ['{"action": "%s"}' % info["valid_actions"][0] for info in infos]
    ...     def reset(self, indices=None):
    ...         pass
    >>> register_agent("first", lambda argument, env_id, **options: AlwaysFirst())
    >>> make_agent("first", "Text-CartPole-v1").act_batch(["obs"], [{"valid_actions": ["LEFT"]}])
    ['{"action": "LEFT"}']
    >>> del AGENTS["first"]
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from llmgym.baselines.base import TextAgent
from llmgym.errors import AgentError, TrainingError

AgentFactory = Callable[..., TextAgent]
AGENTS: dict[str, AgentFactory] = {}


def register_agent(kind: str, factory: AgentFactory) -> None:
    """Make ``kind`` (and ``kind:argument``) a valid agent name."""
    AGENTS[kind] = factory


def check_agent_name(name: str) -> None:
    """Raise ``AgentError`` unless ``name``'s kind is registered and, for ``llm:``, its options,
    their values and its run path are well formed (loads nothing).

    Example:
        >>> check_agent_name("llm:smollm2-135m,temperature=0.5")
        >>> check_agent_name("llm:smollm2-135m@")  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        llmgym.errors.AgentError: Agent 'llm:smollm2-135m@' names no run after '@'; pass ...
    """
    kind, _, argument = name.partition(":")
    if kind not in AGENTS:
        raise AgentError(
            f"Unknown agent {name!r}; use one of {', '.join(f'{k}[:ARG]' for k in AGENTS)}."
        )
    if kind == "llm":
        parse_llm_name(argument, name)


def parse_llm_name(argument: str, name: str = "", **config: Any) -> tuple[str, str, Any]:
    """``MODEL[@RUN][,key=value...]`` (the part after ``llm:``) as (model, run, PolicyConfig);
    a ``llmgym train`` run or policy directory alone stands for ``BASE_MODEL@DIR``;
    the options after commas override ``config``. Raises ``AgentError`` in one sentence for an
    option that is not ``key=value``, not a ``PolicyConfig`` field or not a value it takes, an
    empty model or run, or a run path that does not exist (loads nothing).

    Example:
        >>> model, run, config = parse_llm_name("smollm2-135m,mode=generate,temperature=0.7")
        >>> model, run, config.mode, config.temperature
        ('smollm2-135m', '', 'generate', 0.7)
        >>> parse_llm_name("benchmarks/weights/rl/blackjack-lm-gen-s0")[:2]  # a trained policy
        ('smollm2-135m', 'benchmarks/weights/rl/blackjack-lm-gen-s0')
    """
    from llmgym.policy import PolicyConfig
    from llmgym.policy.models import DEFAULT_MODEL

    name = name or f"llm:{argument}"
    model_ref, *pairs = (argument or DEFAULT_MODEL).split(",")
    given: set[str] = set()
    for pair in pairs:
        key, sep, value = pair.partition("=")
        key = key.strip()
        if not sep or not key:
            raise AgentError(f"Agent option {pair!r} must look like key=value.")
        if key in given:
            raise AgentError(f"Agent {name!r} sets {key!r} twice; set each option once.")
        given.add(key)
        config[key] = _option_value(value)
    known = PolicyConfig.__dataclass_fields__
    unknown = [k for k in config if k not in known and k != "mode" and config[k] is not None]
    if pairs and unknown:
        raise AgentError(f"Unknown LLM option {unknown[0]!r}; use PolicyConfig's fields.")
    model, at, run = model_ref.strip().partition("@")
    if not at and (base := trained_base_model(model)):  # llm:RUN_DIR means llm:BASE@RUN_DIR
        model, run = base, model
    if at and not run.strip():
        raise AgentError(
            f"Agent {name!r} names no run after '@'; pass llm:MODEL@RUN_DIR, or drop the '@' "
            "for the model itself."
        )
    if not model and not at:
        raise AgentError(f"Agent {name!r} names no model; pass llm:MODEL (llm:{DEFAULT_MODEL}).")
    if run and not Path(run).expanduser().exists():
        raise AgentError(
            f"No run or policy directory at {run!r} (agent {name!r}); pass the --output of "
            "`llmgym train` or a policy directory."
        )
    values = {k: v for k, v in config.items() if k in known and k != "mode" and v is not None}
    try:
        mode = "score" if config.get("mode") is None else config["mode"]
        policy_config = PolicyConfig(mode=mode, **values)
    except ValueError as error:  # ConfigValueError: a value the field does not take
        raise AgentError(str(error)) from None
    return model, run, policy_config


def trained_base_model(path: str) -> str | None:
    """The base model a ``llmgym train`` run or policy directory was trained from (its
    ``config.json`` or ``run.json``), or None when ``path`` is no such directory.

    Example:
        >>> trained_base_model("benchmarks/weights/rl/blackjack-lm-gen-s0")
        'smollm2-135m'
        >>> trained_base_model("smollm2-135m") is None
        True
    """
    folder = Path(path).expanduser()
    for name, keys in (("config.json", ()), ("run.json", ("config",))):
        try:
            config = json.loads((folder / name).read_text())
            for key in keys:
                config = config[key]
            model = config["policy"]["model"]
        except (OSError, ValueError, KeyError, TypeError):
            continue
        if isinstance(model, str) and model:
            return model
    return None


def split_agent_names(text: str) -> list[str]:
    """Agent names from a comma-separated list, where ``key=value`` items belong to the LLM
    name before them.

    Example:
        >>> split_agent_names("random, llm:smollm2-135m,mode=generate,temperature=0.5,optimal")
        ['random', 'llm:smollm2-135m,mode=generate,temperature=0.5', 'optimal']
    """
    names: list[str] = []
    for part in (p.strip() for p in text.split(",")):
        if part and "=" in part and names:
            names[-1] += f",{part}"
        elif part:
            names.append(part)
    return names


def make_agent(name: str, env_id: str, **options: Any) -> TextAgent:
    """The agent a name stands for; ``options`` (mode, seed, device, temperature, greedy...)
    go to its factory, which ignores those it has no use for."""
    check_agent_name(name)
    kind, _, argument = name.partition(":")
    return AGENTS[kind](argument, env_id, **options)


class LLMAgent:
    """An LLMPolicy as a TextAgent (``self.policy`` exposes it, with its token counts)."""

    def __init__(self, policy: Any, name: str = "llm") -> None:
        self.policy, self.name = policy, name
        self._seeds: set[int] = set()

    def seed_episodes(self, seeds: Sequence[int]) -> None:
        """Restart the policy's sampler from the first seed of each new batch of episodes (a
        call naming a seed the last one did not), so sampled episodes repeat whenever their
        batch does: one generator serves a whole batch, so this is per batch, not per episode.
        ``reset(None)`` (a new batch, e.g. another env for an agent cached across envs) forgets
        the last seeds, so the next call always reseeds."""
        if not self._seeds or not set(seeds) <= self._seeds:
            self.policy.generator.manual_seed(int(seeds[0]))
        self._seeds = set(seeds)

    def act_batch(self, observations: Sequence[str], infos: Sequence[dict[str, Any]]) -> list[str]:
        return [sample.text for sample in self.policy.act(observations, infos)]

    def reset(self, indices: Sequence[int] | None = None) -> None:
        if indices is None:
            self._seeds = set()
        self.policy.reset(indices)


def _baseline(kind: str) -> AgentFactory:
    def factory(
        argument: str, env_id: str, *, seed: int = 0, env_kwargs: Any = None, **_: Any
    ) -> TextAgent:
        """``env_kwargs`` (``gym.make`` options of the text env) minus the text wrappers' own
        go to the base env the baseline plans or trains on."""
        from llmgym.baselines.agents import make_baseline
        from llmgym.envs.registration import WRAPPER_KWARGS

        base_kwargs = {k: v for k, v in (env_kwargs or {}).items() if k not in WRAPPER_KWARGS}
        return make_baseline(kind, env_id, seed=seed, **base_kwargs)

    return factory


def _llm(
    argument: str,
    env_id: str,
    *,
    mode: str | None = None,
    seed: int = 0,
    device: str = "auto",
    env_kwargs: Any = None,
    **config: Any,
) -> LLMAgent:
    """``llm:MODEL[@CHECKPOINT][,key=value...]``: the options after commas override ``config``
    (``llm:smollm2-135m,mode=generate,temperature=0.7``). A trained policy acts in the mode it
    was trained in unless ``mode`` (or ``,mode=``) chooses one; a model, in score mode."""
    from llmgym.policy import LLMPolicy
    from llmgym.policy.models import DEFAULT_MODEL, load_model_for, load_tokenizer

    model_name, checkpoint, policy_config = parse_llm_name(argument, mode=mode, seed=seed, **config)
    if policy_config.uses_vllm:  # vLLM holds the weights: load the tokenizer
        if checkpoint:
            raise AgentError(
                f"A run acts through vLLM once exported: `llmgym export {checkpoint} DIR "
                "--merge`, serve DIR with vLLM, and pass llm:DIR."
            )
        tokenizer = load_tokenizer(model_name or DEFAULT_MODEL)
        return LLMAgent(LLMPolicy(None, tokenizer, policy_config), name=f"llm:{argument}")
    if checkpoint:  # the run's own config names the base model
        from llmgym.rl import load_trained_policy

        try:
            chosen = mode is not None or ",mode=" in argument.replace(" ", "")
            policy = load_trained_policy(
                checkpoint,
                device=device,
                policy_config=policy_config,
                keep_mode=not chosen,
                model=model_name,
            )
        except TrainingError as error:  # not a run, or a damaged one: one sentence
            raise AgentError(str(error)) from None
        return LLMAgent(policy, name=f"llm:{argument}")
    model, tokenizer = load_model_for(model_name or DEFAULT_MODEL, device=device)
    # The weights never change while an agent plays: each distinct prompt's candidate scores
    # are computed once (a state seen again, as on the toy-text grids, costs no forward pass).
    policy = LLMPolicy(model, tokenizer, policy_config, memoize=True)
    return LLMAgent(policy, name=f"llm:{argument}")


def _option_value(text: str) -> Any:
    """``"0.7"`` -> 0.7, ``"true"`` -> True, ``"nan"``/``"inf"`` -> the floats (which the
    config then refuses by name), other text stays text (JSON, never eval)."""
    if text.strip().lower().lstrip("+-") in ("nan", "inf", "infinity"):
        return float(text)
    try:
        return json.loads(text)
    except ValueError:
        return text


for _kind in ("random", "optimal", "sb3-ppo", "sb3-dqn", "sb3-a2c"):
    register_agent(_kind, _baseline(_kind))
register_agent("llm", _llm)

__all__ = [
    "AGENTS",
    "AgentError",
    "LLMAgent",
    "TextAgent",
    "check_agent_name",
    "make_agent",
    "parse_llm_name",
    "split_agent_names",
    "register_agent",
]
