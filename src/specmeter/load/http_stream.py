"""A minimal HTTP/1.1 client for the streaming POSTs of a run, on plain `http://` (no TLS), without aiohttp.

At hundreds of concurrent streams the client's own CPU decides how late it sees each chunk. This transport does
the least per socket read: `data_received` takes one `perf_counter()` stamp, strips the chunked framing in place
and hands the body bytes, with their arrival time, straight to a sink (the SSE parser), with no task wake-up, no
buffering layer and no per-chunk await. The request coroutine only wakes when the stream is over.

What it speaks: one request at a time per connection (no pipelining); responses with `Transfer-Encoding: chunked`,
with a `Content-Length`, or delimited by the server closing the connection; interim 1xx responses are skipped.
Connections are pooled per (host, port) without a cap; a pooled connection the server closed in the meantime
(it sent no byte of the response before the connection ended) is retried once on a fresh connection.

Failures: transport and protocol failures raise ConnectionError subclasses; whatever the sink raises (a bad stream)
propagates as is; the caller bounds the time (`asyncio.timeout`) and a cancelled or timed-out request closes its
socket.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import cast

from specmeter.load.http_response import (
    MAX_ERROR_BODY_BYTES,
    BadHTTPResponse,
    BodySink,
    Response,
    ServerDisconnected,
)

CONNECT_TIMEOUT_S = 30.0  # as aiohttp's sock_connect in the other transport
MAX_HEAD_BYTES = 64 << 10  # status line and headers of one response
MAX_CHUNK_LINE_BYTES = 4096  # a chunk-size line (with extensions), or a trailer line
_HEX = b"0123456789abcdefABCDEF"

# connection states
_IDLE, _HEAD, _BODY, _CLOSED = 0, 1, 2, 3
# body framing
_CHUNKED, _LENGTH, _UNTIL_CLOSE = 0, 1, 2
# chunked sub-states
_SIZE, _DATA, _DATA_END, _TRAILER = 0, 1, 2, 3


class _StaleConnection(ConnectionError):
    """A reused connection ended before any byte of the response: the server had closed it (retried once)."""


@dataclass
class _Exchange:
    sink: BodySink
    waiter: asyncio.Future[Response]
    reused: bool
    got_bytes: bool = False
    response: Response | None = None
    error_parts: list[bytes] = field(default_factory=list)
    error_size: int = 0
    delivering: bool = True  # the body still goes to the sink (False: an error body, or the sink is done)


class _Connection(asyncio.Protocol):
    """One HTTP/1.1 connection; an exchange at a time."""

    def __init__(self, pool: ConnectionPool, key: tuple[str, int]) -> None:
        self.pool = pool
        self.key = key
        self.transport: asyncio.Transport | None = None
        self.state = _IDLE
        self.uses = 0
        self.keep_alive = pool.keep_alive
        self.ex: _Exchange | None = None
        self._buf = b""
        self._mode = _UNTIL_CLOSE
        self._chunk_state = _SIZE
        self._need = 0

    # ---- asyncio.Protocol --------------------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's TCPTransport is not an asyncio.Transport

    def data_received(self, data: bytes) -> None:
        t = time.perf_counter()  # the arrival time of everything in this read, before any parsing
        ex = self.ex
        if ex is None or self.state == _CLOSED:
            if self.state == _IDLE:  # bytes nobody asked for: the connection cannot be trusted any more
                self.close()
            return
        ex.got_bytes = True
        try:
            self._received(ex, data, t)
        except BaseException as exc:  # the sink's StreamError, or a protocol error: the exchange fails
            self._fail(ex, exc)
            if not isinstance(exc, Exception):
                raise

    def eof_received(self) -> bool | None:
        return None  # close the transport: connection_lost follows

    def connection_lost(self, exc: Exception | None) -> None:
        t = time.perf_counter()
        state, ex = self.state, self.ex
        self.state = _CLOSED
        self.pool._forget(self)
        if ex is None or (ex.waiter.done() and not ex.delivering):
            return
        if state == _BODY and self._mode == _UNTIL_CLOSE and exc is None:
            try:
                self._body_end(ex, t)
            except Exception as verdict:  # the sink's verdict on the last line
                self._fail(ex, verdict)
            return
        if state == _HEAD and not ex.got_bytes and ex.reused:
            err: Exception = _StaleConnection("the server had closed the pooled connection")
        elif exc is not None:
            err = exc
        elif state == _HEAD:
            err = ServerDisconnected("the server closed the connection before responding")
        else:
            err = ServerDisconnected("the server closed the connection mid-response")
        self._fail(ex, err)

    # ---- the exchange ------------------------------------------------------------------------------
    def begin(self, request: bytes, sink: BodySink, waiter: asyncio.Future[Response]) -> None:
        assert self.transport is not None and self.state == _IDLE
        self.ex = _Exchange(sink, waiter, reused=self.uses > 0)
        self.uses += 1
        self.state = _HEAD
        self._buf = b""
        self.transport.write(request)

    def close(self) -> None:
        self.state = _CLOSED
        if self.transport is not None:
            self.transport.close()

    def abandon(self) -> None:
        """The caller stopped waiting (cancelled, timed out, failed): the rest of the response is never read."""
        if self.ex is not None and self.state != _IDLE:
            self.ex.delivering = False
            self.close()

    def _fail(self, ex: _Exchange, exc: BaseException) -> None:
        ex.delivering = False
        if not ex.waiter.done():
            ex.waiter.set_exception(exc)
        self.close()

    def _received(self, ex: _Exchange, data: bytes, t: float) -> None:
        buf = self._buf + data if self._buf else data
        self._buf = b""
        while self.state == _HEAD:
            end = buf.find(b"\r\n\r\n")
            if end < 0:
                if len(buf) > MAX_HEAD_BYTES:
                    raise BadHTTPResponse(f"response headers longer than {MAX_HEAD_BYTES} bytes")
                self._buf = buf
                return
            head, buf = buf[:end], buf[end + 4:]
            self._head(ex, head, t)
        if self.state != _BODY or not buf:
            if buf and self.state == _IDLE:  # bytes after a response that had no body: not to be trusted
                self.close()
            return
        mode = self._mode
        if mode == _CHUNKED:
            pieces, buf, ended = self._dechunk(buf)
            payload = pieces[0] if len(pieces) == 1 else b"".join(pieces)
        elif mode == _LENGTH:
            payload = buf[:self._need]
            self._need -= len(payload)
            buf = buf[len(payload):]
            ended = self._need == 0
        else:
            payload, buf, ended = buf, b"", False
        if payload:
            self._payload(ex, payload, t)
        if ended:
            if buf:  # bytes after the end of the response: nothing was asked for them
                self.keep_alive = False
            self._body_end(ex, t)
        else:
            self._buf = buf

    def _head(self, ex: _Exchange, head: bytes, t: float) -> None:
        lines = head.split(b"\r\n")
        status_line = lines[0]
        version, _, rest = status_line.partition(b" ")
        code = rest[:3]
        if not version.startswith(b"HTTP/1.") or len(code) != 3 or not code.isdigit() or rest[3:4] not in (b"", b" "):
            raise BadHTTPResponse(f"not an HTTP/1.x status line: {status_line[:80]!r}")
        status = int(code)
        if 100 <= status < 200:  # an interim response (100 Continue, 103 Early Hints): the real one follows
            return
        headers: dict[str, str] = {}
        for line in lines[1:]:
            name, sep, value = line.partition(b":")
            if not sep:
                raise BadHTTPResponse(f"not a header line: {line[:80]!r}")
            key = name.strip().decode("latin-1").lower()
            val = value.strip().decode("latin-1")
            headers[key] = f"{headers[key]}, {val}" if key in headers else val
        ex.response = Response(status, headers)
        ex.sink.status = status
        ex.delivering = status == 200
        conn = headers.get("connection", "").lower()
        if "close" in conn or (version == b"HTTP/1.0" and "keep-alive" not in conn):
            self.keep_alive = False
        self.state = _BODY
        te = headers.get("transfer-encoding", "").lower()
        if te:
            if te.rsplit(",", 1)[-1].strip() == "chunked":
                self._mode, self._chunk_state = _CHUNKED, _SIZE
            else:
                self._mode = _UNTIL_CLOSE
                self.keep_alive = False
        elif status == 204 or status == 304:
            self._mode, self._need = _LENGTH, 0
        elif "content-length" in headers:
            raw = headers["content-length"].split(",")[0].strip()
            if not raw.isdigit():
                raise BadHTTPResponse(f"bad Content-Length: {raw[:40]!r}")
            self._mode, self._need = _LENGTH, int(raw)
        else:
            self._mode = _UNTIL_CLOSE
            self.keep_alive = False
        if self._mode == _LENGTH and self._need == 0:
            self._body_end(ex, t)

    def _dechunk(self, buf: bytes) -> tuple[list[bytes], bytes, bool]:
        """Strips the chunked framing off `buf`: (the data, what is left unread, whether the body ended)."""
        pieces: list[bytes] = []
        pos, n = 0, len(buf)
        st, need = self._chunk_state, self._need
        ended = False
        while pos < n:
            if st == _SIZE:
                eol = buf.find(b"\r\n", pos)
                if eol < 0:
                    if n - pos > MAX_CHUNK_LINE_BYTES:
                        raise BadHTTPResponse("chunk-size line too long")
                    break
                size = buf[pos:eol].split(b";", 1)[0].strip(b" \t")
                if not size or len(size) > 15 or size.lstrip(_HEX):
                    raise BadHTTPResponse(f"bad chunk size: {buf[pos:eol][:40]!r}")
                need = int(size, 16)
                pos = eol + 2
                st = _DATA if need else _TRAILER
            elif st == _DATA:
                end = pos + need
                if end <= n:
                    pieces.append(buf[pos:end])
                    pos, need, st = end, 0, _DATA_END
                else:
                    pieces.append(buf[pos:])
                    need -= n - pos
                    pos = n
            elif st == _DATA_END:
                if n - pos < 2:
                    if buf[pos:] != b"\r":
                        raise BadHTTPResponse("chunk data not followed by CRLF")
                    break
                if buf[pos:pos + 2] != b"\r\n":
                    raise BadHTTPResponse("chunk data not followed by CRLF")
                pos += 2
                st = _SIZE
            else:  # _TRAILER: header lines after the last chunk, up to an empty line
                eol = buf.find(b"\r\n", pos)
                if eol < 0:
                    if n - pos > MAX_CHUNK_LINE_BYTES:
                        raise BadHTTPResponse("trailer line too long")
                    break
                if eol == pos:
                    pos += 2
                    ended = True
                    break
                pos = eol + 2
        self._chunk_state, self._need = st, need
        return pieces, buf[pos:] if pos < n else b"", ended

    def _payload(self, ex: _Exchange, payload: bytes, t: float) -> None:
        if ex.delivering:
            sink = ex.sink
            if sink.feed(payload, t - sink.t_send):
                ex.delivering = False
                self._resolve(ex)
                if not self.keep_alive:  # nothing to keep the connection for: the rest is not worth reading
                    self.ex = None
                    self.close()
        elif ex.response is not None and ex.response.status != 200 and ex.error_size < MAX_ERROR_BODY_BYTES:
            ex.error_parts.append(payload)
            ex.error_size += len(payload)

    def _body_end(self, ex: _Exchange, t: float) -> None:
        if ex.delivering:
            ex.delivering = False
            ex.sink.end(t - ex.sink.t_send)
        self._resolve(ex)
        self.ex = None
        if self.keep_alive and self.state == _BODY:
            self.state = _IDLE
            self.pool._release(self)
        else:
            self.close()

    def _resolve(self, ex: _Exchange) -> None:
        if ex.waiter.done():
            return
        assert ex.response is not None
        if ex.error_parts:
            ex.response.body = b"".join(ex.error_parts)[:MAX_ERROR_BODY_BYTES]
        ex.waiter.set_result(ex.response)


class ConnectionPool:
    """Idle HTTP/1.1 connections per (host, port), no cap; every connection it opened, to close them all."""

    def __init__(self, keep_alive: bool = True, connect_timeout_s: float = CONNECT_TIMEOUT_S) -> None:
        self.keep_alive = keep_alive
        self.connect_timeout_s = connect_timeout_s
        self._idle: dict[tuple[str, int], list[_Connection]] = {}
        self._open: set[_Connection] = set()
        self._resolved: dict[tuple[str, int], str] = {}
        self._closed = False

    async def request(self, host: str, port: int, request: bytes, sink: BodySink) -> Response:
        """Sends `request` (the whole HTTP request, head and body) and waits for the response: its head, and for
        a 200 its body fed to `sink` until the sink is done or the body ends; a non-200 body is read whole."""
        key = (host, port)
        loop = asyncio.get_running_loop()
        for fresh in (False, True):
            conn = None if fresh else self._take(key)
            if conn is None:
                conn = await self._connect(loop, key)
            waiter: asyncio.Future[Response] = loop.create_future()
            conn.begin(request, sink, waiter)
            try:
                return await waiter
            except _StaleConnection:
                sink.t_send = time.perf_counter()  # the request is sent again: its time starts again
                sink.status = None
                continue
            finally:
                if not waiter.done() or waiter.cancelled() or waiter.exception() is not None:
                    conn.abandon()
        raise AssertionError("unreachable: a fresh connection is never stale")

    def _take(self, key: tuple[str, int]) -> _Connection | None:
        idle = self._idle.get(key)
        while idle:
            conn = idle.pop()  # the most recently used: the least likely to have been closed by the server
            if conn.state == _IDLE and conn.transport is not None and not conn.transport.is_closing():
                return conn
            conn.close()
        return None

    async def _connect(self, loop: asyncio.AbstractEventLoop, key: tuple[str, int]) -> _Connection:
        if self._closed:
            raise ServerDisconnected("the client is closed")
        conn = _Connection(self, key)
        # a host name is resolved once (as aiohttp caches it): later connections go to the address that worked
        addr = self._resolved.get(key)
        try:
            async with asyncio.timeout(self.connect_timeout_s):
                await loop.create_connection(lambda: conn, addr or key[0], key[1])
        except OSError:
            self._resolved.pop(key, None)
            raise
        if addr is None and conn.transport is not None:
            peer = conn.transport.get_extra_info("peername")
            if isinstance(peer, tuple) and isinstance(peer[0], str) and "%" not in peer[0]:
                self._resolved[key] = peer[0]
        self._open.add(conn)
        return conn

    def _release(self, conn: _Connection) -> None:
        if self._closed:
            conn.close()
            return
        self._idle.setdefault(conn.key, []).append(conn)

    def _forget(self, conn: _Connection) -> None:
        self._open.discard(conn)
        idle = self._idle.get(conn.key)
        if idle and conn in idle:
            idle.remove(conn)

    def close(self) -> None:
        """Closes every connection, idle or busy (their exchanges fail)."""
        self._closed = True
        for conn in list(self._open):
            conn.close()
        self._idle.clear()
