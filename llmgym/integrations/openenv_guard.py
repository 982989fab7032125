"""What ``llmgym.integrations.openenv.create_server_app`` adds to OpenEnv's app so that any
request gets a result or a 4xx with one sentence, never a 500 or an internal error text.

- HTTP: a body above the limit is refused with 413 before the app reads it; a request the
  env refuses (``RequestError``) gets its status and sentence, and ``/step`` with no episode
  (every HTTP request gets a fresh env) gets 409 with why HTTP is stateless; validation
  errors come back as 422 with one sentence (and JSON-safe details: a NaN in the request no
  longer breaks the error response into a 500).
- WebSocket: a message above the limit gets an error and close code 1009 (as uvicorn's
  ``ws_max_size`` does at the protocol level); a binary frame, a message that is not a JSON
  object with a string ``type``, or a ``data`` that is not an object gets an error naming the
  problem, and the session goes on.
- Both: JSON nested deeper than ``MAX_NESTING`` is refused with a sentence (400, or a
  WebSocket error), before a parser could run out of stack.

Example:
    >>> envelope_problem('[1]')
    'A message must be a JSON object like {"type": "step", "data": {"text": "hit"}}, not a list.'
    >>> envelope_problem('{"type": "step", "data": {"text": "hit"}}') is None
    True
"""

from __future__ import annotations

import json
import math
from typing import Any

Scope = dict[str, Any]


class RequestError(ValueError):
    """A request the env cannot serve, in one sentence (HTTP: ``status``; WebSocket: an
    error message)."""

    status = 400


class EpisodeNotStarted(RequestError):
    """A step with no episode running (never reset, or over)."""

    status = 409


EXAMPLE = '{"type": "step", "data": {"text": "hit"}}'
NOT_JSON = "The message is not JSON"
#: WebSocket close code for a message too big (RFC 6455).
TOO_BIG = 1009
#: The deepest nesting of lists and objects a request may have (a valid one has 3 at most).
MAX_NESTING = 32
TOO_DEEP = f"The request nests lists or objects deeper than {MAX_NESTING} levels; send less."


def json_safe(value: Any) -> Any:
    """``value`` with every non-finite float and non-JSON object as text.

    Example:
        >>> json_safe({"input": float("nan"), "ctx": {"e": ValueError("x")}})
        {'input': 'nan', 'ctx': {'e': 'x'}}
    """
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, dict):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [json_safe(v) for v in value]
    if value is None or isinstance(value, str | int | float | bool):
        return value
    return str(value)


def errors_sentence(errors: Any) -> str:
    """One sentence from pydantic's error list (its first error, where it lies).

    Example:
        >>> errors_sentence([{"loc": ("body", "seed"), "msg": "Input should be a finite number"}])
        'Bad request: seed: Input should be a finite number.'
    """
    first = errors[0] if isinstance(errors, list) and errors else errors
    if not isinstance(first, dict):
        return f"Bad request: {str(first)[:200]}."
    if first.get("type") == "json_invalid":
        return "Bad request: the body is not valid JSON."
    where = ".".join(str(p) for p in first.get("loc", ()) if p != "body")
    message = str(first.get("msg", "invalid value")).rstrip(".")
    return f"Bad request: {where + ': ' if where else ''}{message}."


def brief(errors: Any) -> Any:
    """pydantic's errors without the input they echo (which may be large or not JSON)."""
    if not isinstance(errors, list):
        return errors
    keep = ("loc", "msg", "type")
    return [{k: e[k] for k in keep if k in e} if isinstance(e, dict) else e for e in errors]


def nesting(value: Any) -> int:
    """How deeply lists and objects nest in a parsed JSON value (without recursion).

    Example:
        >>> nesting({"a": [[1], 2]}), nesting("x")
        (3, 0)
    """
    deepest, todo = 0, [(value, 1)]
    while todo:
        item, depth = todo.pop()
        if isinstance(item, dict | list):
            deepest = max(deepest, depth)
            children = item.values() if isinstance(item, dict) else item
            todo.extend((child, depth + 1) for child in children)
    return deepest


def too_deep(text: str | bytes) -> bool:
    """Whether ``text`` is JSON nested deeper than ``MAX_NESTING`` (too deep to parse, or
    parsed; text that is not JSON is not too deep).

    Example:
        >>> too_deep("[" * 5000 + "]" * 5000), too_deep('{"data": {"text": "hit"}}')
        (True, False)
    """
    try:
        return nesting(json.loads(text)) > MAX_NESTING
    except RecursionError:
        return True
    except ValueError:
        return False


def envelope_problem(text: str) -> str | None:
    """What is wrong with a WebSocket message's envelope, in one sentence, or None."""
    try:
        message = json.loads(text)
    except RecursionError:
        return TOO_DEEP
    except ValueError as error:
        return f"{NOT_JSON} ({error}); send an object like {EXAMPLE}."
    if nesting(message) > MAX_NESTING:
        return TOO_DEEP
    if not isinstance(message, dict):
        kind = "null" if message is None else type(message).__name__
        return f"A message must be a JSON object like {EXAMPLE}, not a {kind}."
    kind = message.get("type")
    if not isinstance(kind, str):
        return 'A message needs a string "type": reset, step, state or close.'
    data = message.get("data", {})
    if not isinstance(data, dict):
        return f'"data" must be a JSON object, not a {type(data).__name__}.'
    if kind == "step" and not isinstance(data.get("text"), str):
        return f'Invalid step: "data" needs a string "text" (the answer), as in {EXAMPLE}.'
    return None


def _json(status: int, body: dict[str, Any]) -> Any:
    from fastapi.responses import JSONResponse

    return JSONResponse(status_code=status, content=json_safe(body))


class BodyLimit:
    """ASGI middleware: HTTP bodies and WebSocket messages of at most ``limit`` bytes, and
    well-formed WebSocket envelopes (see the module)."""

    def __init__(self, app: Any, limit: int) -> None:
        self.app, self.limit = app, limit

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            await self._http(scope, receive, send)
        elif scope["type"] == "websocket":
            await self.app(scope, self._websocket(receive, send), send)
        else:
            await self.app(scope, receive, send)

    def _too_big(self) -> str:
        return f"The request is above the limit of {self.limit:,} bytes; send less."

    async def _http(self, scope: Scope, receive: Any, send: Any) -> None:
        length = dict(scope.get("headers") or []).get(b"content-length", b"0")
        if not length.isdigit() or int(length) > self.limit:
            await _json(413, {"detail": self._too_big()})(scope, receive, send)
            return
        body = bytearray()
        while True:
            message = await receive()
            if message["type"] != "http.request":
                return  # the client left
            body += message.get("body", b"")
            if len(body) > self.limit:
                await _json(413, {"detail": self._too_big()})(scope, receive, send)
                return
            if not message.get("more_body", False):
                break
        if too_deep(bytes(body)):
            await _json(400, {"detail": TOO_DEEP})(scope, receive, send)
            return
        replayed = False

        async def replay() -> dict[str, Any]:
            nonlocal replayed
            if replayed:
                return await receive()
            replayed = True
            return {"type": "http.request", "body": bytes(body), "more_body": False}

        await self.app(scope, replay, send)

    def _websocket(self, receive: Any, send: Any) -> Any:
        async def checked() -> dict[str, Any]:
            while True:
                message = await receive()
                if message["type"] != "websocket.receive":
                    return message
                text = message.get("text")
                if text is None:
                    problem = f"Send JSON text frames like {EXAMPLE}, not binary ones."
                    size = len(message.get("bytes") or b"")
                else:
                    size = len(text.encode("utf-8", "surrogatepass"))
                    problem = None if size > self.limit else envelope_problem(text)
                if size > self.limit:
                    await _ws_error(send, self._too_big())
                    await send({"type": "websocket.close", "code": TOO_BIG})
                    return {"type": "websocket.disconnect", "code": TOO_BIG}
                if problem is None:
                    return message
                await _ws_error(send, problem)

        return checked


async def _ws_error(send: Any, text: str) -> None:
    """An error reply with OpenEnv's codes (``INVALID_JSON``, else ``VALIDATION_ERROR``)."""
    code = "INVALID_JSON" if text.startswith(NOT_JSON) else "VALIDATION_ERROR"
    error = {"type": "error", "data": {"message": text, "code": code}}
    await send({"type": "websocket.send", "text": json.dumps(error)})


def guard(app: Any, limit: int, stateless: str) -> Any:
    """``app`` (OpenEnv's FastAPI app) with the limits and error handlers of this module;
    ``stateless`` is the 409's detail for ``/step`` with no episode."""
    from fastapi.exceptions import RequestValidationError
    from starlette.exceptions import HTTPException

    async def refused(_request: Any, error: Exception) -> Any:
        if isinstance(error, EpisodeNotStarted):
            return _json(error.status, {"detail": stateless})
        status = getattr(error, "status", 400)
        return _json(status, {"detail": str(error)})

    async def invalid(_request: Any, error: Exception) -> Any:
        errors = getattr(error, "errors", lambda: [])()
        return _json(422, {"detail": errors_sentence(errors), "errors": brief(errors)})

    async def http_error(_request: Any, error: Exception) -> Any:
        detail = getattr(error, "detail", "")
        status = getattr(error, "status_code", 400)
        headers = getattr(error, "headers", None)
        sentence = detail if isinstance(detail, str) else errors_sentence(detail)
        body = {
            "detail": sentence,
            **({} if isinstance(detail, str) else {"errors": brief(detail)}),
        }
        response = _json(status, body)
        if headers:
            response.headers.update(headers)
        return response

    app.add_exception_handler(RequestError, refused)
    app.add_exception_handler(RequestValidationError, invalid)
    app.add_exception_handler(HTTPException, http_error)
    app.add_middleware(BodyLimit, limit=limit)
    return app


__all__ = [
    "BodyLimit",
    "EpisodeNotStarted",
    "RequestError",
    "brief",
    "envelope_problem",
    "errors_sentence",
    "guard",
    "json_safe",
    "nesting",
    "too_deep",
]
