"""``llmgym serve ENV_ID``: any text env as an OpenEnv server (extra ``[openenv]``).

Clients (OpenEnv's ``EnvClient``, TRL/Unsloth/verifiers through OpenEnv) connect over
WebSocket (``/ws``); each connection gets its own env, at most ``--max-sessions`` at once.
Requests are bounded (1 MiB HTTP bodies and WebSocket messages alike, 64 KiB HTTP headers:
431 above, JSON nested 32 levels deep, a cap on open connections); HTTP is stateless (each
request gets a fresh env: ``/step`` answers 409, step in a WebSocket session);
``--stop-after`` makes the server stop itself.

Example:
    >>> import typer
    >>> from typer.testing import CliRunner
    >>> app = typer.Typer()
    >>> register(app)
    >>> result = CliRunner().invoke(app, ["Text-Nope-v0"])
    >>> result.exit_code, "Unknown environment" in result.output
    (2, True)
"""

from __future__ import annotations

import socket
import threading

import typer

from llmgym.cli.checks import fail

MAX_HTTP_BYTES = 1 << 16  # headers; bodies and WebSocket messages: openenv.MAX_BODY_BYTES
MAX_STOP_AFTER = 365 * 24 * 3600.0  # --stop-after: a year (a timer's limit is far beyond)


def _bind(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except (OSError, UnicodeError, TypeError, ValueError) as error:  # TypeError: bad host bytes
        sock.close()
        why = getattr(error, "strerror", None) or str(error) or type(error).__name__
        raise fail(
            f"Cannot listen on {host}:{port} ({why}); pick another --host or --port."
        ) from None
    sock.listen(2048)  # connections queue until uvicorn accepts them
    return sock


def serve_command(
    env_id: str = typer.Argument(..., help="A text env id, e.g. Text-Blackjack-v1."),
    host: str = typer.Option("127.0.0.1", help="Address to listen on (0.0.0.0: every interface)."),
    port: int = typer.Option(8000, min=0, max=65535, help="Port (0: any free port)."),
    max_sessions: int = typer.Option(4, min=1, help="Concurrent sessions (one env each)."),
    stop_after: float = typer.Option(
        0.0,
        min=0.0,
        max=MAX_STOP_AFTER,
        help="Stop by itself after this many seconds (0: run until Ctrl-C; at most a year).",
    ),
) -> None:
    """Serve a text env over OpenEnv's HTTP/WebSocket protocol."""
    if not host.strip():
        raise fail("--host is empty; pass an address, e.g. 127.0.0.1 (0.0.0.0: every interface).")
    try:
        import uvicorn

        from llmgym.integrations.openenv import MAX_BODY_BYTES, create_server_app
        from llmgym.integrations.openenv_http import header_limited
    except ImportError as error:
        raise fail(
            f"llmgym serve needs the openenv extra ({error.name} is missing): "
            "pip install 'llmgym[openenv]'."
        ) from None
    try:
        app = create_server_app(env_id, max_sessions=max_sessions)
    except ValueError as error:
        raise fail(str(error)) from None
    sock = _bind(host, port)
    bound_port = sock.getsockname()[1]
    config = uvicorn.Config(
        app,
        host=host,
        port=bound_port,
        log_level="warning",
        http=header_limited(MAX_HTTP_BYTES),  # a larger head: 431
        ws_max_size=MAX_BODY_BYTES,
        limit_concurrency=4 * max_sessions + 16,
        timeout_keep_alive=5,
    )
    server = uvicorn.Server(config)
    if stop_after:
        timer = threading.Timer(stop_after, lambda: setattr(server, "should_exit", True))
        timer.daemon = True
        timer.start()
    shown = f"[{host}]" if ":" in host else host
    print(
        f"Serving {env_id} on http://{shown}:{bound_port} (OpenEnv; at most {max_sessions} "
        "sessions). Ctrl-C stops.",
        flush=True,
    )
    server.run(sockets=[sock])


def register(app: typer.Typer) -> None:
    """Add ``serve`` to ``app``."""
    app.command("serve")(serve_command)


__all__ = ["register", "serve_command"]
