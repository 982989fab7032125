"""Any llmgym text env as an OpenEnv environment (extra ``[openenv]``; openenv>=0.10,<0.11).

``TextEnvironment`` wraps ``gym.make(env_id)`` behind OpenEnv's ``Environment`` interface: the
action is ``{"text": "<the model's answer>"}``, stepped exactly as ``env.step(text)`` would
be; the observation carries the text, the system prompt, the valid actions and the parse
result, with ``done`` and ``reward``. ``create_server_app(env_id, max_sessions)`` serves it
through OpenEnv's ``create_app`` (one env per WebSocket session, at most ``max_sessions`` at
once); ``llmgym serve ENV_ID`` runs that app. ``TextEnvClient`` is OpenEnv's ``EnvClient`` typed
for it.

As OpenEnv's own ``create_app``, HTTP is stateless: each ``/reset`` and ``/step`` request gets
a fresh env, so ``/step`` answers 409 with the reason (reset and step in one WebSocket
session on ``/ws``). A bad request gets a 4xx with a one-sentence ``detail``, never a 500; a
body (HTTP) or message (WebSocket) above ``MAX_BODY_BYTES`` (1 MiB) is refused alike (413, or
a WebSocket error and close code 1009); a WebSocket message that is not a JSON object with a
``type`` gets an error naming the problem and the session goes on.

Example:
    >>> env = text_environment_class("Text-Blackjack-v1")()
    >>> obs = env.reset(seed=0)
    >>> obs.text, obs.valid_actions, obs.done
    ('Your hand totals 11 with no usable ace. The dealer shows a 10.', ['stick', 'hit'], False)
    >>> obs = env.step(TextAction(text="hit"))
    >>> obs.reward, obs.parse["ok"], env.state.step_count
    (0.0, True, 1)
"""

from __future__ import annotations

import uuid
from typing import Any

from openenv.core import EnvClient
from openenv.core.client_types import StepResult
from openenv.core.env_server.interfaces import Environment
from openenv.core.env_server.types import Action, EnvironmentMetadata, Observation, State
from pydantic import Field

from llmgym.errors import ConfigError
from llmgym.integrations import make_text_env
from llmgym.integrations.openenv_guard import EpisodeNotStarted, RequestError, guard

#: The largest HTTP body or WebSocket message the server takes (1 MiB).
MAX_BODY_BYTES = 1 << 20
#: Why HTTP ``/step`` cannot follow ``/reset``, as a 409's detail.
STATELESS_HTTP = (
    "HTTP is stateless: every /step request gets a fresh env that was never reset, so it "
    "cannot step; reset and step in one WebSocket session (/ws, e.g. with TextEnvClient)."
)


def check_seed(seed: Any) -> int | None:
    """``seed`` as ``env.reset`` takes it: None or a whole number from 0.

    Example:
        >>> check_seed(3), check_seed(None)
        (3, None)
        >>> check_seed(float("nan"))
        Traceback (most recent call last):
        ...
        llmgym.integrations.openenv_guard.RequestError: seed must be a whole number from 0 or null, not nan.
    """  # noqa: E501
    if seed is None:
        return None
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise RequestError(f"seed must be a whole number from 0 or null, not {seed!r:.40}.")
    return seed


class TextAction(Action):
    """The model's answer, stepped as ``env.step(text)``."""

    text: str = Field(..., strict=True, description="The answer text, as env.step takes it.")


class TextObservation(Observation):
    """What the text env returned (``done``, ``reward`` and ``metadata`` come from OpenEnv)."""

    text: str = Field(default="", description="The observation text (the next user message).")
    system_prompt: str = Field(default="", description="Task and answer-format instructions.")
    valid_actions: list[str] = Field(default_factory=list, description="Valid action names.")
    parse: dict[str, Any] = Field(default_factory=dict, description="How the answer was parsed.")
    terminated: bool = Field(default=False, description="The episode ended in the env.")
    truncated: bool = Field(default=False, description="The episode hit its step limit.")


class TextState(State):
    """Episode id, step count, the env id, the seed and the return so far."""

    env_id: str = ""
    seed: int | None = None
    episode_return: float = 0.0


def _jsonable(value: Any) -> Any:
    """Numpy scalars and arrays in a parse result, as plain JSON values."""
    if hasattr(value, "tolist"):
        return value.tolist()
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    return value


class TextEnvironment(Environment):
    """One llmgym text env behind OpenEnv's ``Environment`` interface (one per session)."""

    SUPPORTS_CONCURRENT_SESSIONS = True  # each session gets its own gym env
    env_id: str = ""
    make_kwargs: dict[str, Any] = {}

    def __init__(self) -> None:
        super().__init__()
        self._env = make_text_env(self.env_id, **self.make_kwargs)
        self._state = TextState(env_id=self.env_id)
        self._done = True

    def reset(
        self, seed: int | None = None, episode_id: str | None = None, **kwargs: Any
    ) -> TextObservation:
        """Start an episode, seeded like ``env.reset(seed=seed)``."""
        seed = check_seed(seed)
        if episode_id is not None and not isinstance(episode_id, str):
            raise RequestError(f"episode_id must be a string or null, not {episode_id!r:.40}.")
        obs, info = self._env.reset(seed=seed)
        self._state = TextState(
            episode_id=episode_id or str(uuid.uuid4()), env_id=self.env_id, seed=seed
        )
        self._done = False
        return self._observation(obs, info, reward=None)

    def step(self, action: TextAction, timeout_s: float | None = None, **kwargs: Any) -> Any:
        """Step the env with the action text, exactly as ``env.step(action.text)``."""
        if self._done:
            raise EpisodeNotStarted("The episode is over (or not started); send a reset first.")
        if not isinstance(getattr(action, "text", None), str):
            raise RequestError('A step needs data {"text": "<the answer>"} with a string text.')
        obs, reward, terminated, truncated, info = self._env.step(action.text)
        self._done = bool(terminated or truncated)
        self._state.step_count += 1
        self._state.episode_return += float(reward)
        return self._observation(obs, info, float(reward), bool(terminated), bool(truncated))

    def _observation(
        self,
        obs: Any,
        info: dict[str, Any],
        reward: float | None,
        terminated: bool = False,
        truncated: bool = False,
    ) -> TextObservation:
        return TextObservation(
            text=str(obs),
            system_prompt=str(info.get("system_prompt", "")),
            valid_actions=[str(a) for a in info.get("valid_actions") or []],
            parse=_jsonable(info.get("parse", {})),
            terminated=terminated,
            truncated=truncated,
            done=terminated or truncated,
            reward=reward,
        )

    @property
    def state(self) -> TextState:
        """The episode id, step count, seed and return so far."""
        return self._state

    def get_metadata(self) -> EnvironmentMetadata:
        """Name and description for ``/metadata``."""
        return EnvironmentMetadata(
            name=self.env_id,
            description=f"llmgym text environment {self.env_id}: send the model's answer text; "
            "get the next observation text, reward and done.",
            version=_version(),
        )

    def close(self) -> None:
        """Close the gym env."""
        self._env.close()


def _version() -> str:
    import llmgym

    return llmgym.__version__


def text_environment_class(env_id: str, **make_kwargs: Any) -> type[TextEnvironment]:
    """A ``TextEnvironment`` subclass bound to ``env_id`` (OpenEnv's factory takes no args)."""
    make_text_env(env_id, **make_kwargs).close()  # fail early on an unknown id
    namespace = {"env_id": env_id, "make_kwargs": dict(make_kwargs)}
    return type("TextEnvironment", (TextEnvironment,), namespace)


def create_server_app(env_id: str, max_sessions: int = 4, **make_kwargs: Any) -> Any:
    """The FastAPI app serving ``env_id`` with at most ``max_sessions`` concurrent sessions."""
    from openenv.core.env_server.http_server import create_app

    if max_sessions < 1:
        raise ConfigError(f"max_sessions must be 1 or more, not {max_sessions}.")
    app = create_app(
        text_environment_class(env_id, **make_kwargs),
        TextAction,
        TextObservation,
        env_name=env_id,
        max_concurrent_envs=max_sessions,
    )
    return guard(app, MAX_BODY_BYTES, STATELESS_HTTP)


class TextEnvClient(EnvClient[TextAction, TextObservation, TextState]):
    """OpenEnv's WebSocket client for an llmgym server (``.sync()`` for blocking use).

    Example (with ``llmgym serve Text-Blackjack-v1`` running)::

        with TextEnvClient(base_url="http://127.0.0.1:8000").sync() as client:
            result = client.reset(seed=0)
            result = client.step(TextAction(text='{"action": "hit"}'))
    """

    def _step_payload(self, action: TextAction) -> dict[str, Any]:
        return {"text": action.text}

    def _parse_result(self, payload: dict[str, Any]) -> StepResult[TextObservation]:
        data = dict(payload.get("observation", {}))
        data.update(done=payload.get("done", False), reward=payload.get("reward"))
        data.setdefault("metadata", payload.get("metadata") or {})
        observation = TextObservation(**data)
        return StepResult(observation=observation, reward=observation.reward, done=observation.done)

    def _parse_state(self, payload: dict[str, Any]) -> TextState:
        return TextState(**payload)


__all__ = [
    "MAX_BODY_BYTES",
    "EpisodeNotStarted",
    "RequestError",
    "TextAction",
    "TextEnvClient",
    "TextEnvironment",
    "TextObservation",
    "TextState",
    "check_seed",
    "create_server_app",
    "text_environment_class",
]
