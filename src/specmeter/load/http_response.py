"""What the client's own HTTP/1.1 transport (http_stream.py) hands back: the response, where a 200 body goes as it
arrives, and the errors a broken response raises."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

MAX_ERROR_BODY_BYTES = 64 << 10  # what is kept of a non-200 response's body (the rest is read and dropped)


class ServerDisconnected(ConnectionError):
    """The server closed the connection before the response was complete."""


class BadHTTPResponse(ConnectionError):
    """The bytes the server sent are not an HTTP/1.x response this client can read."""


class BodySink(Protocol):
    """Where a 200 response's body goes, as it arrives."""

    t_send: float  # arrival times are given relative to this (the transport resets it on a retry)
    status: int | None  # set by the transport as soon as the status line is read

    def feed(self, data: bytes, t_rel: float) -> bool:
        """Body bytes of one socket read (framing removed), stamped on arrival. True: the sink wants no more."""
        ...

    def end(self, t_rel: float) -> None:
        """The body ended (the sink had not said it was done)."""
        ...


@dataclass
class Response:
    status: int
    headers: dict[str, str]
    body: bytes = b""  # only for a non-200 response (at most MAX_ERROR_BODY_BYTES); a 200 body went to the sink
