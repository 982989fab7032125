"""Train on any llmgym text env with TRL's ``GRPOTrainer`` (extra ``[trl]``; trl>=1.16).

Two ways in, both experimental in TRL:

- ``environment_factory(env_id)``: a class that TRL instantiates once per rollout. The env's
  actions become tools (``act(action)``, or one tool per action with ``per_action_tools=True``),
  the observation text is the tool result and ``get_reward()`` is the episode return. It needs a
  chat template with tool calling that TRL recognises (Qwen, Llama 3, Gemma, ...).
- ``rollout_func(env_id)``: plays whole multi-turn episodes with ``LLMPolicy`` in generate mode on
  the trainer's plain language model (no action head), for any chat model (SmolLM2 included),
  and returns one sequence per episode: the first prompt, then model and env tokens with
  ``env_mask`` set to 1 on model tokens only, so only those are trained. Pair it with the
  ``episode_return`` reward function.

``episode_dataset(env_id, seeds)`` gives the seeded prompts for either; GRPO repeats each row
``num_generations`` times, so a group plays the same seed and differs only by its actions.

Example:
    >>> Blackjack = environment_factory("Text-Blackjack-v1", per_action_tools=True)
    >>> env = Blackjack()
    >>> "Your hand totals 11" in env.reset(seed=0)
    True
    >>> "Your hand totals 12" in env.hit(), "episode is over" in env.stick(), env.get_reward()
    (True, True, -1.0)
    >>> env.episode
    Episode(seed=0, actions=['hit', 'stick'], rewards=[0.0, -1.0], done=True)
"""

from __future__ import annotations

import itertools
import keyword
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from llmgym.errors import ConfigError
from llmgym.integrations import make_text_env
from llmgym.integrations.trl_rollout import SEED_KEY, EpisodeRollout, rollout_func

TOOL_NOTE = (
    "Instead of replying in text, take each action by calling the `{tool}` tool with your "
    "answer as its `action` argument; the tool replies with what happens next. Keep acting "
    "until the episode is over."
)
PER_ACTION_NOTE = (
    "Instead of replying in text, take each action by calling the tool of the same name "
    "({tools}); the tool replies with what happens next. Keep acting until the episode is over."
)
MAX_PLAYOUT_STEPS = 10_000


def _tool_name(action: str) -> str:
    """A Python identifier naming the tool of ``action`` (``"pick up"`` -> ``pick_up``)."""
    name = re.sub(r"\W+", "_", action.strip().lower()).strip("_")
    if not name or name[0].isdigit() or keyword.iskeyword(name):
        name = f"action_{name}"
    return name


@dataclass
class Episode:
    """What one env instance played: its seed, the action texts stepped and the rewards."""

    seed: int | None = None
    actions: list[str] = field(default_factory=list)
    rewards: list[float] = field(default_factory=list)
    done: bool = False

    @property
    def total(self) -> float:
        """The episode return so far."""
        return float(sum(self.rewards))


class _TextEnvTools:
    """Base of the classes ``environment_factory`` builds. TRL exposes every public method
    except ``reset`` and ``get_reward`` as a tool, so the helpers here stay private."""

    env_id: str = ""
    make_kwargs: dict[str, Any] = {}
    note: str = ""
    _seeds: Iterable[int] = itertools.count()

    def __init__(self) -> None:
        self._env = make_text_env(self.env_id, **self.make_kwargs)
        self.episode = Episode()
        self.info: dict[str, Any] = {}

    def reset(self, seed: int | None = None, **kwargs: Any) -> str:
        """Start an episode (``seed`` from the dataset row, else the next of the class's
        seeds) and return the task, the tool instructions and the first observation."""
        seed = int(seed) if seed is not None else next(self._seeds)
        obs, self.info = self._env.reset(seed=seed)
        self.episode = Episode(seed=seed)
        return f"{self.info['system_prompt']}\n\n{self.note}\n\n{obs}"

    def get_reward(self) -> float:
        """The episode return. An episode the model left unfinished is played out with the
        env's fallback answer (an empty reply), as an invalid answer would be."""
        steps = 0
        while not self.episode.done and steps < MAX_PLAYOUT_STEPS:
            self._step("")
            steps += 1
        return self.episode.total

    def _step(self, text: str) -> str:
        if self.episode.seed is None:
            raise ValueError("The episode has not started; reset the environment first.")
        if self.episode.done:
            raise ValueError("The episode is over; no more actions can be taken.")
        obs, reward, terminated, truncated, self.info = self._env.step(text)
        self.episode.actions.append(text)
        self.episode.rewards.append(float(reward))
        self.episode.done = bool(terminated or truncated)
        result = f"{obs}\nReward {float(reward):g}."
        if self.episode.done:
            result += f" The episode is over; return {self.episode.total:g}."
        return result


def _act(self, action: str) -> str:
    """Take one action in the environment.

    Args:
        action: The action to take, one of the valid actions named in the task.

    Returns:
        What happens next: the new observation and the reward.
    """
    return self._step(action)


_act.__name__ = _act.__qualname__ = "act"


def _action_tool(action: str) -> Callable[..., str]:
    def tool(self) -> str:
        return self._step(action)

    tool.__name__ = tool.__qualname__ = _tool_name(action)
    tool.__doc__ = (
        f"Take the action {action!r} in the environment.\n\n"
        "Returns:\n    What happens next: the new observation and the reward.\n"
    )
    return tool


def environment_factory(
    env_id: str, *, per_action_tools: bool = False, seed: int = 0, **make_kwargs: Any
) -> type:
    """A class for ``GRPOTrainer(environment_factory=...)`` playing ``env_id``.

    Its tools are ``act(action: str)`` or, with ``per_action_tools``, one argument-free tool per
    valid action (envs whose action set is fixed). ``reset(seed=...)`` takes the seed from the
    dataset row (see ``episode_dataset``), else counts up from ``seed``; ``get_reward()`` is the
    episode return; ``instance.episode`` records the seed, actions and rewards.
    """
    probe = make_text_env(env_id, **make_kwargs)
    _, info = probe.reset(seed=seed)
    probe.close()
    names = list(info.get("valid_actions") or [])
    namespace: dict[str, Any] = {
        "env_id": env_id,
        "make_kwargs": dict(make_kwargs),
        "_seeds": itertools.count(seed),
        "__doc__": f"{env_id} as a TRL environment: the episode's actions are tool calls.",
    }
    if per_action_tools:
        tools = [_tool_name(a) for a in names]
        if not names or len(set(tools)) != len(tools):
            raise ConfigError(
                f"{env_id} has no fixed set of distinctly named actions; "
                "use per_action_tools=False (one `act` tool)."
            )
        namespace.update({tool: _action_tool(a) for tool, a in zip(tools, names)})
        namespace["note"] = PER_ACTION_NOTE.format(tools=", ".join(f"`{t}`" for t in tools))
    else:
        namespace.update(act=_act, note=TOOL_NOTE.format(tool="act"))
    class_name = re.sub(r"\W", "", env_id.title()) + "Env"
    return type(class_name, (_TextEnvTools,), namespace)


def episode_dataset(
    env_id: str, seeds: int | Sequence[int] = 64, *, tools: bool = False, **make_kwargs: Any
) -> Any:
    """A ``datasets.Dataset`` with one row per seed: ``prompt`` and ``seed``.

    ``tools=False`` (for ``rollout_func``): the prompt is the first turn's chat (system prompt,
    first observation); its user message carries the seed under ``llmgym_seed``, since TRL hands
    ``rollout_func`` the prompts only. ``tools=True`` (for ``environment_factory``): an empty user
    message that the env's ``reset`` fills in.
    """
    from datasets import Dataset

    from llmgym.policy.prompts import build_messages

    seed_list = list(range(seeds)) if isinstance(seeds, int) else [int(s) for s in seeds]
    if not seed_list:
        raise ConfigError("seeds must name at least one episode.")
    rows = []
    env = make_text_env(env_id, **make_kwargs)
    for s in seed_list:
        if tools:
            prompt = [{"role": "user", "content": ""}]
        else:
            obs, info = env.reset(seed=s)
            prompt = build_messages(str(info.get("system_prompt", "")), str(obs))
            prompt[-1][SEED_KEY] = s
        rows.append({"prompt": prompt, "seed": s})
    env.close()
    return Dataset.from_list(rows)


def episode_return(
    completions: list[Any], episode_return: list[float], **kwargs: Any
) -> list[float]:
    """TRL reward function: the env return of each episode ``rollout_func`` played."""
    return [float(r) for r in episode_return]


__all__ = [
    "Episode",
    "EpisodeRollout",
    "environment_factory",
    "episode_dataset",
    "episode_return",
    "rollout_func",
]
