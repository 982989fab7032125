"""The HTTP protocol ``llmgym serve`` runs: uvicorn's h11 protocol, with a request whose head
(request line and headers) is above a limit answered 431 with one sentence.

uvicorn's own limit (``h11_max_incomplete_event_size``) holds only while a head is incomplete,
so a larger head that arrives in one read passed, and a huge one got a bare 400. Here every
head is measured once parsed, and h11's own refusal of an incomplete one becomes a 431 too.
After a 431 the server half-closes and reads the rest of the request away for a short while
before closing, so a client still sending receives the answer instead of a connection reset.

Example:
    >>> protocol = header_limited(1 << 16)
    >>> protocol.__name__, protocol.limit
    ('HeaderLimitedH11Protocol', 65536)
"""

from __future__ import annotations

import json
from typing import Any

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

#: How long a refused request's rest is read away before the connection closes (seconds).
DRAIN_S = 5.0


def head_bytes(request: h11.Request) -> int:
    """The size of a request's head as sent: its request line and headers."""
    line = len(request.method) + len(request.target) + 11  # "M T HTTP/1.1\r\n"
    return line + sum(len(k) + len(v) + 4 for k, v in request.headers.raw_items())


class _Connection(h11.Connection):
    """h11's server connection that refuses (``error_status_hint`` 431) a head above ``limit``
    and remembers whether its last refusal was one."""

    def __init__(self, limit: int) -> None:
        super().__init__(h11.SERVER, max_incomplete_event_size=limit)
        self.limit, self.too_large = limit, False

    def next_event(self) -> Any:
        try:
            event = super().next_event()
        except h11.RemoteProtocolError as error:
            self.too_large = error.error_status_hint == 431
            raise
        if isinstance(event, h11.Request) and head_bytes(event) > self.limit:
            self.too_large = True
            raise h11.RemoteProtocolError("request head too large", error_status_hint=431)
        return event


class HeaderLimitedH11Protocol(H11Protocol):
    """uvicorn's ``H11Protocol`` answering 431 to a request head above ``limit`` bytes."""

    limit = 1 << 16

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.conn = _Connection(self.limit)
        self.draining = False

    def data_received(self, data: bytes) -> None:
        if not self.draining:  # else: the rest of a refused request, dropped
            super().data_received(data)

    def eof_received(self) -> None:
        if self.draining:
            self.transport.close()
        else:
            super().eof_received()

    def send_400_response(self, msg: str) -> None:
        if not self.conn.too_large:
            super().send_400_response(msg)
            return
        detail = f"The request's headers are above the limit of {self.limit:,} bytes; send less."
        body = json.dumps({"detail": detail}).encode()
        headers = [
            (b"content-type", b"application/json"),
            (b"content-length", str(len(body)).encode()),
            (b"connection", b"close"),
        ]
        response = h11.Response(
            status_code=431, headers=headers, reason=b"Request Header Fields Too Large"
        )
        for event in (response, h11.Data(data=body), h11.EndOfMessage()):
            self.transport.write(self.conn.send(event))
        self.draining = True
        if self.transport.can_write_eof():
            self.transport.write_eof()
        self.loop.call_later(DRAIN_S, self.transport.close)


def header_limited(limit: int) -> type[HeaderLimitedH11Protocol]:
    """``HeaderLimitedH11Protocol`` with request heads of at most ``limit`` bytes (uvicorn's
    ``Config(http=...)`` takes a class)."""
    return type(HeaderLimitedH11Protocol.__name__, (HeaderLimitedH11Protocol,), {"limit": limit})


__all__ = ["DRAIN_S", "HeaderLimitedH11Protocol", "head_bytes", "header_limited"]
