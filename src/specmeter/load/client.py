"""Async streaming client for OpenAI-compatible /v1/chat/completions and /v1/completions.

Built for hundreds of concurrent streams: per socket read it takes one monotonic timestamp (before any
parsing: every event the read completes arrived then), splits the bytes into lines itself (one wake-up per
read, not per line) and parses each `data:` line's JSON; everything else is derived after the request ends.
Every failure becomes an error kind on the record, never an exception out of `send`.

The streams of a plain http:// endpoint go over a minimal HTTP/1.1 transport of our own (http_stream.py: the
timestamp and the SSE parsing happen in the socket's `data_received`, with no task wake-up per chunk); https://,
the GETs and `raw_http=False` (to compare) use aiohttp. Both give the same records.
"""

from __future__ import annotations

import asyncio
import codecs
import json
import time
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import aiohttp

from specmeter.common.errors import StreamError
from specmeter.common.redact import scrub
from specmeter.load.http_stream import ConnectionPool
from specmeter.load.sse import ERROR_BODY_CHARS, StreamResult, chunk_tokens, parse_sse_bytes, parse_sse_end
from specmeter.schemas.records import RequestRecord


@dataclass
class RequestSpec:
    """One HTTP request to send: the endpoint path and its JSON body."""

    path: str
    body: dict[str, Any]


@dataclass(frozen=True)
class ClientSettings:
    """What an OpenAIClient is made from: a client process builds its own from these (picklable)."""

    base_url: str
    keep_connections: bool  # False: the server closes after each stream, so one connection per request
    api_key: str | None = field(repr=False)  # a secret: never in a repr, a log or a traceback
    timeout_s: float
    extra_body: dict[str, Any]
    raw_http: bool = True
    answers_as: tuple[str, ...] = ()  # the model names a stream of this server may name (empty: not checked)


class _SSESink:
    """The raw transport's body sink: the SSE parser of one stream."""

    __slots__ = ("out", "status", "t_send")

    def __init__(self, out: StreamResult, t_send: float) -> None:
        self.out = out
        self.t_send = t_send
        self.status: int | None = None

    def feed(self, data: bytes, t_rel: float) -> bool:
        parse_sse_bytes(data, t_rel, self.out)
        return self.out.saw_done

    def end(self, t_rel: float) -> None:
        parse_sse_end(t_rel, self.out)


# Headers the raw transport writes itself, whatever the session's defaults say.
_FRAMING_HEADERS = frozenset({"host", "content-length", "connection", "transfer-encoding"})


def _error_text(body: bytes, content_type: str) -> str:
    """A response body as text, in the charset its Content-Type names (else UTF-8), never failing."""
    charset = "utf-8"
    for param in content_type.split(";")[1:]:
        name, _, value = param.partition("=")
        if name.strip().lower() == "charset" and value.strip():
            charset = value.strip().strip('"')
    try:
        codecs.lookup(charset)
    except LookupError:
        charset = "utf-8"
    return body.decode(charset, "replace")


def _status_error(status: int, body: str) -> StreamError:
    body = body[:ERROR_BODY_CHARS].replace("\n", " ")
    kind = "http_429" if status == 429 else "http_5xx" if status >= 500 else "http_4xx"
    return StreamError(kind, f"HTTP {status}: {body}", status)


class OpenAIClient:
    """The streams of a run: over the raw HTTP/1.1 transport (http_stream) for plain http:// endpoints, else
    (https://, or `raw_http=False` to compare) over one aiohttp session; GETs always over aiohttp."""

    def __init__(
        self,
        base_url: str,
        *,
        keep_connections: bool = True,
        api_key: str | None = None,
        timeout_s: float = 300.0,
        extra_body: dict[str, Any] | None = None,
        raw_http: bool = True,
        answers_as: tuple[str, ...] = (),
    ) -> None:
        self.settings = ClientSettings(base_url, keep_connections, api_key, timeout_s, dict(extra_body or {}), raw_http,
                                       answers_as)
        self._answers_as = frozenset(answers_as)
        self.base_url = base_url.rstrip("/")
        self.keep_connections = keep_connections
        self._extra_body = extra_body or {}
        self._headers = {"Content-Type": "application/json"}
        self._secret = api_key or None
        if api_key:
            self._headers["Authorization"] = f"Bearer {api_key}"
        self._timeout = aiohttp.ClientTimeout(total=timeout_s, sock_connect=30)
        self._timeout_s = timeout_s
        self._session: aiohttp.ClientSession | None = None
        self._pool: ConnectionPool | None = None
        self._raw_target = self._raw_target_of(self.base_url, api_key) if raw_http else None

    @staticmethod
    def _raw_target_of(base_url: str, api_key: str | None) -> tuple[str, int, bytes, bytes] | None:
        """(host, port, request-line path prefix, the Host and fixed header lines) when the raw transport can
        serve `base_url` (plain http, no credentials or query in the URL), else None."""
        try:
            url = urlsplit(base_url)
            port = url.port or 80
        except ValueError:
            return None
        if url.scheme != "http" or not url.hostname or "@" in url.netloc or url.query or url.fragment:
            return None
        if api_key and any(c in api_key for c in "\r\n\0"):
            return None  # not a valid header value: leave it to aiohttp to refuse
        try:
            prefix, netloc = url.path.rstrip("/").encode("ascii"), url.netloc.encode("ascii")
        except UnicodeEncodeError:
            return None
        return url.hostname, port, prefix, b"Host: " + netloc + b"\r\n"

    @classmethod
    def from_settings(cls, s: ClientSettings) -> OpenAIClient:
        return cls(s.base_url, keep_connections=s.keep_connections, api_key=s.api_key, timeout_s=s.timeout_s,
                   extra_body=s.extra_body, raw_http=s.raw_http, answers_as=s.answers_as)

    async def __aenter__(self) -> OpenAIClient:
        # No pool cap, in total or per host: the load strategy alone decides how many streams are open.
        # A server that closes the connection after each stream (llama-server does, while its headers say
        # keep-alive) would fail every other request on a reused connection: open one per request there.
        connector = aiohttp.TCPConnector(limit=0, limit_per_host=0, force_close=not self.keep_connections)
        self._session = aiohttp.ClientSession(connector=connector, headers=self._headers, timeout=self._timeout)
        if self._raw_target is not None:  # the same: no cap, and no reuse where the server closes after a stream
            self._pool = ConnectionPool(keep_alive=self.keep_connections)
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._pool is not None:
            self._pool.close()
            await asyncio.sleep(0)  # the transports close their sockets in the next loop iteration
        if self._session is not None:
            await self._session.close()

    async def get_text(self, path: str, timeout_s: float = 30.0) -> str:
        assert self._session is not None
        async with self._session.get(
            f"{self.base_url}{path}", timeout=aiohttp.ClientTimeout(total=timeout_s)
        ) as resp:
            resp.raise_for_status()
            return str(scrub(await resp.text(), self._secret))  # scrapes land in captures/

    async def get_json(self, path: str, timeout_s: float = 30.0) -> Any:
        return json.loads(await self.get_text(path, timeout_s))

    async def send(self, req: RequestSpec, record: RequestRecord, phase_t0: float) -> str:
        """Stream one request, filling `record` in place. Returns the generated text ('' on error)."""
        assert self._session is not None
        out = StreamResult()
        sink = _SSESink(out, time.perf_counter())
        record.start_s = sink.t_send - phase_t0
        try:
            payload = {**req.body, **self._extra_body} if self._extra_body else req.body
            if self._pool is not None:
                try:
                    await self._send_raw(req.path, payload, sink)
                finally:  # a retry on a fresh connection sent the request again: its times start there
                    record.start_s = sink.t_send - phase_t0
                    record.http_status = sink.status
            else:
                await self._send_aiohttp(req.path, payload, record, sink)
            if not out.saw_done:
                raise StreamError("incomplete_stream", "stream ended without [DONE]")
        except StreamError as exc:
            record.error_kind, record.error = exc.kind, str(exc)  # type: ignore[assignment]
        except TimeoutError:
            record.error_kind, record.error = "timeout", "request timed out (raise --request-timeout)"
        except (aiohttp.ClientPayloadError, aiohttp.ClientConnectionError, ConnectionError, OSError) as exc:
            record.error_kind, record.error = "connection", f"{type(exc).__name__}: {str(exc)[:ERROR_BODY_CHARS]}"
        except asyncio.CancelledError:
            record.error_kind, record.error = "cancelled", "cancelled before it finished"
            self._finish(record, out, sink.t_send)
            raise
        self._finish(record, out, sink.t_send)
        return "".join(out.text_parts) if record.ok else ""

    async def _send_raw(self, path: str, payload: dict[str, Any], sink: _SSESink) -> None:
        assert self._pool is not None and self._raw_target is not None
        host, port, prefix, fixed = self._raw_target
        assert self._session is not None
        # the session's headers (Content-Type, Authorization, any a caller added), read per request as aiohttp does
        headers = [fixed]
        for name, value in self._session.headers.items():
            if name.lower() in _FRAMING_HEADERS:
                continue
            if any(c in value for c in "\r\n\0") or any(c in name for c in "\r\n\0:"):
                raise ValueError(f"header {name!r} has a character HTTP forbids")  # the value stays out
            headers.append(f"{name}: {value}\r\n".encode())
        if "User-Agent" not in self._session.headers:
            headers.append(b"User-Agent: specmeter\r\n")
        body = json.dumps(payload).encode()
        conn = b"keep-alive" if self._pool.keep_alive else b"close"
        request = b"".join((b"POST ", prefix, path.encode("ascii"), b" HTTP/1.1\r\n", *headers,
                            b"Content-Length: %d\r\nConnection: %s\r\n\r\n" % (len(body), conn), body))
        async with asyncio.timeout(self._timeout_s):  # the whole request, as aiohttp's total timeout
            resp = await self._pool.request(host, port, request, sink)
        if resp.status != 200:
            raise _status_error(resp.status, _error_text(resp.body, resp.headers.get("content-type", "")))

    async def _send_aiohttp(self, path: str, payload: dict[str, Any], record: RequestRecord, sink: _SSESink) -> None:
        assert self._session is not None
        out, t_send = sink.out, sink.t_send
        async with self._session.post(f"{self.base_url}{path}", json=payload) as resp:
            record.http_status = resp.status
            if resp.status != 200:
                raise _status_error(resp.status, await resp.text())
            content = resp.content
            while not out.saw_done:
                data = await content.readany()  # everything buffered: one wake-up per socket read
                t_rel = time.perf_counter() - t_send  # the arrival time, taken before any parsing
                if not data:
                    parse_sse_end(t_rel, out)
                    break
                parse_sse_bytes(data, t_rel, out)

    def _finish(self, record: RequestRecord, out: StreamResult, t_send: float) -> None:
        record.e2e_s = time.perf_counter() - t_send
        record.chunk_offsets_s = out.chunk_offsets
        record.chunk_tokens = chunk_tokens(out.chunk_cum_tokens)
        record.ttft_s = out.chunk_offsets[0] if out.chunk_offsets else None
        record.output_text = "".join(out.text_parts)
        record.output_token_ids = out.token_ids
        record.finish_reason = out.finish_reason
        if out.usage:
            record.prompt_tokens = out.usage.get("prompt_tokens")
            record.output_tokens = out.usage.get("completion_tokens")
        record.final_payload = out.final_payload  # the engine's per-request fields: parsed where records are summarized
        if record.error_kind is None and record.output_tokens is None:
            record.error_kind = "malformed"
            record.error = "no usage in the stream (the server ignored stream_options.include_usage)"
        elif record.error_kind is None and record.output_tokens == 0 and record.output_text:
            record.error_kind = "malformed"  # a server whose usage lies: its throughput would read 0.00x
            record.error = (f"usage says 0 completion tokens while {len(record.output_text)} characters of text "
                            "streamed")
        elif record.error_kind is None and self._answers_as and out.model is not None \
                and out.model not in self._answers_as:  # a proxy that routed it to another server
            record.error_kind = "wrong_model"
            record.error = (f"the stream names model {out.model[:80]!r}, not one this server serves "
                            f"({', '.join(sorted(self._answers_as))}): another server answered")
        if self._secret:  # what the server sent back lands in requests.jsonl: never the key it may echo
            record.error = scrub(record.error, self._secret)
            record.output_text = scrub(record.output_text, self._secret)
            record.final_payload = scrub(record.final_payload, self._secret)
        record.ok = record.error_kind is None
