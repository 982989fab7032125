"""``llmgym.Agent``: the LlamaGym-compatible abstract agent, acting through LLMPolicy.

Subclass it with ``get_system_prompt``, ``format_observation`` and ``extract_action``, build it
from ``(model, tokenizer, device)`` (a plain causal LM; LlamaGym's value-head wrapper is not
needed) and run LlamaGym's loop: ``act(observation)``, ``assign_reward(reward)``,
``terminate_episode()``. The conversation of an episode grows turn by turn, as in LlamaGym.
``terminate_episode`` stores the episode and, once ``batch_size`` episodes are stored (LlamaGym
semantics; ``ppo_config_dict={"batch_size": 8}`` by default), trains on them with the
algorithm named by the ``algo`` option (``ppo`` default, ``grpo``, ``reinforce``; LoRA) and
returns the train stats; otherwise it returns ``{}``. Other options (``learning_rate``,
``mini_batch_size``, ``ppo_epochs``, ``target_kl``, ``kl_coef``, any trainer config field) go to
the trainer's config.

Example:
    >>> from llmgym.policy.testing import tiny_model
    >>> class Echo(Agent):
    ...     def get_system_prompt(self): return "Say 0 or 1."
    ...     def format_observation(self, observation): return f"You see {observation}."
    ...     def extract_action(self, response): return 1 if "1" in response else 0
    >>> model, tokenizer = tiny_model()
    >>> agent = Echo(model, tokenizer, "cpu", {"max_new_tokens": 3})
    >>> agent.act(5) in (0, 1)
    True
    >>> agent.assign_reward(1.0)
    >>> agent.terminate_episode(), len(agent.episodes[0]["samples"])
    ({}, 1)
    >>> agent = Echo(model, tokenizer, "cpu", {"max_new_tokens": 3}, {"batch_size": 2})
    >>> for _ in range(2):
    ...     _ = agent.act(5); agent.assign_reward(1.0)
    ...     stats = agent.terminate_episode()
    >>> "losses/policy" in stats, agent.episodes
    (True, [])
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any

from llmgym.policy import ActionSample, LLMPolicy, PolicyConfig

#: LlamaGym's default generation settings.
LLAMAGYM_GENERATE = {"max_new_tokens": 32, "do_sample": True, "top_p": 0.6, "temperature": 0.9}


def policy_config_from_generate(generate: dict[str, Any] | None) -> PolicyConfig:
    """A generate-mode PolicyConfig from LlamaGym's ``generate_config_dict`` (keys may carry a
    ``generate/`` prefix; ``top_k`` and other keys that LLMPolicy has no use for are ignored).

    Example:
        >>> c = policy_config_from_generate({"generate/do_sample": False, "max_new_tokens": 8})
        >>> c.mode, c.greedy, c.max_new_tokens, c.prefill
        ('generate', True, 8, False)
    """
    options = {k.split("/")[-1]: v for k, v in {**LLAMAGYM_GENERATE, **(generate or {})}.items()}
    return PolicyConfig(
        mode="generate",
        prefill=False,  # the agent's own prompt sets the answer format
        greedy=not options["do_sample"],
        temperature=float(options["temperature"]),
        top_p=float(options["top_p"]),
        max_new_tokens=int(options["max_new_tokens"]),
    )


class Agent(ABC):
    """LlamaGym-compatible agent: subclass it and implement the three abstract methods.

    ``generate_config_dict`` takes LlamaGym's generation keys; ``ppo_config_dict`` and any
    extra keyword options (``sft_warm_start``, ``use_target_kl``...) are kept in
    ``self.train_options`` for the trainers. ``policy_config`` overrides the generation
    settings with a full PolicyConfig.
    """

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        device: Any = None,
        generate_config_dict: dict[str, Any] | None = None,
        ppo_config_dict: dict[str, Any] | None = None,
        *,
        policy_config: PolicyConfig | None = None,
        **train_options: Any,
    ) -> None:
        self.model = getattr(model, "pretrained_model", model)  # a value-head wrapper's LM
        self.tokenizer = tokenizer
        self.device = device
        if device is not None:
            self.model.to(device)
        self.policy = LLMPolicy(
            self.model,
            tokenizer,
            policy_config or policy_config_from_generate(generate_config_dict),
            device=device,
        )
        self.train_options = {**(ppo_config_dict or {}), **train_options}
        self.episodes: list[dict[str, Any]] = []
        self._new_episode()

    @abstractmethod
    def get_system_prompt(self) -> str:
        """The system message of every episode."""

    @abstractmethod
    def format_observation(self, observation: Any) -> str:
        """An env observation as the text of a user message."""

    @abstractmethod
    def extract_action(self, response: str) -> Any:
        """The env action a model response stands for."""

    def _new_episode(self) -> None:
        self.current_episode_messages: list[dict[str, str]] = [
            {"role": "system", "content": self.get_system_prompt()}
        ]
        self.current_episode_rewards: list[float] = []
        self.current_episode_samples: list[ActionSample] = []

    def llm(self, messages: list[dict[str, str]]) -> str:
        """The model's reply to ``messages`` (its sample is kept for training)."""
        [sample] = self.policy.act_messages([messages])
        self.current_episode_samples.append(sample)
        return sample.text

    def act(self, observation: Any) -> Any:
        """Format the observation, ask the model, extract the action. As in LlamaGym, an
        ``extract_action`` that raises gives ``None`` and leaves the reply out of the chat."""
        self.current_episode_messages.append(
            {"role": "user", "content": self.format_observation(observation)}
        )
        response = self.llm(self.current_episode_messages)
        try:
            action = self.extract_action(response)
        except Exception:  # user code: LlamaGym's contract is "None on failure"
            return None
        self.current_episode_messages.append({"role": "assistant", "content": response})
        return action

    def assign_reward(self, reward: float) -> None:
        """Reward of the last action."""
        self.current_episode_rewards.append(float(reward))

    def terminate_episode(self, train: bool = True) -> dict[str, Any]:
        """Close the episode and start a new one; when ``train`` and the batch is full, train
        on the stored episodes (then cleared) and return the stats, else return ``{}``."""
        self.episodes.append(
            {
                "messages": self.current_episode_messages,
                "rewards": self.current_episode_rewards,
                "samples": self.current_episode_samples,
            }
        )
        self._new_episode()
        if not train or len(self.episodes) < int(self.train_options.get("batch_size", 8)):
            return {}
        stats = self.train_batch(self.episodes)
        self.episodes = []
        return stats

    def train_batch(self, episodes: list[dict[str, Any]]) -> dict[str, Any]:
        """One update of the attached trainer (built on first use) on stored episodes."""
        from llmgym.rollout import Episode, Step

        trainer = self._get_trainer()
        batch = []
        for i, ep in enumerate(episodes):
            samples, rewards = ep["samples"], list(ep["rewards"])
            rewards = (rewards + [0.0] * len(samples))[: len(samples)]
            steps = [
                Step(s, r, terminated=(t == len(samples) - 1), truncated=False, parse_ok=True)
                for t, (s, r) in enumerate(zip(samples, rewards))
            ]
            if steps:
                batch.append(Episode(trainer.state.episodes_done + i, 0, steps))
        return trainer.train_on_episodes(batch) if batch else {}

    _OPTION_ALIASES = {
        "mini_batch_size": "minibatch_size",
        "ppo_epochs": "update_epochs",
        "init_kl_coef": "kl_coef",
        "lr": "learning_rate",
    }

    def _get_trainer(self) -> Any:
        trainer = getattr(self, "_trainer", None)
        if trainer is not None:
            return trainer
        from llmgym.rl import config_class
        from llmgym.rl.config import is_key
        from llmgym.rl.trainer import Trainer

        options = {self._OPTION_ALIASES.get(k, k): v for k, v in self.train_options.items()}
        algo = options.pop("algo", "ppo")
        cls = config_class(algo)
        values = {k: v for k, v in options.items() if is_key(cls, k)}
        values.update(env_id="", mode=self.policy.config.mode, progress=False)
        values.setdefault("output_dir", "runs/agent")
        values.setdefault("minibatch_size", int(self.train_options.get("batch_size", 8)))
        values.setdefault("micro_batch_size", values["minibatch_size"])
        self._trainer = Trainer(
            cls.build(values),
            model=self.model,
            tokenizer=self.tokenizer,
            policy_config=self.policy.config,
        )
        self.model, self.policy = self._trainer.model, self._trainer.policy
        return self._trainer


__all__ = ["Agent", "policy_config_from_generate"]
