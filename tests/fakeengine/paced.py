"""Pacing: a paced OpenAI-compatible streaming server that records its own send times, the truth the load
generators of benchmarks/client_overhead.py are checked against.

Every streaming request to /v1/chat/completions or /v1/completions is answered with exactly `--chunks`
content chunks (one token each), whatever max_tokens asks: the first `--ttft-ms` after the request's
first byte arrived, the rest `--gap-ms` apart (paced on absolute times, so the schedule does not drift
under load; 0 sends them back to back, yielding to other streams between chunks: raw client capacity).
Then the usage chunk (when `stream_options.include_usage` asks for it) and `data: [DONE]`. Chunks carry
cumulative usage when `continuous_usage_stats` asks for it and `token_ids` when `return_token_ids` does,
as vLLM's do.

It runs in its own process on a hand-written HTTP/1.1 protocol (keep-alive, chunked transfer encoding)
on uvloop when installed, so it costs far less per chunk than any client it measures. Per request it
logs, on time.perf_counter() (CLOCK_MONOTONIC: the same clock in every process on Linux):
  arrival   first byte of the request received;
  sends     when each content chunk was handed to the socket (the truth for TTFT and inter-chunk gaps);
  rid       the x-request-id header; marker: N from the first `req-N` in the body (matching keys);
  usage     what stream_options asked for; max_tokens; end: when [DONE] was written.
GET /log returns the log since the last POST /reset as JSON; /v1/models and /health answer as vLLM does.

Unlike the fake engine's in-process server (fakeengine.server), it has no speculative steps and no faults:
it exists to cost as little as possible per chunk. It shares the fake engine's chunk shapes (fakeengine.chunks)
and, like them, uses only the standard library (uvloop if installed).

Run (from tests/, where the fakeengine package lives):
    cd tests && python -m fakeengine.paced --port 8123 --chunks 20 --gap-ms 20
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import resource
import signal
import time
from dataclasses import dataclass, field
from typing import Any

from fakeengine.chunks import DONE, choice, chunk, model_card, usage

MARKER = re.compile(rb"req-(\d+)")
CRLF2 = b"\r\n\r\n"


@dataclass
class Settings:
    chunks: int
    gap_s: float
    ttft_s: float
    model: str


@dataclass
class Entry:
    """What the server did for one streamed request (the truth)."""

    seq: int
    path: str
    arrival: float
    rid: str | None
    marker: int | None
    max_tokens: int | None
    include_usage: bool
    continuous_usage: bool
    sends: list[float] = field(default_factory=list)
    end: float | None = None
    disconnected: bool = False

    def as_json(self) -> dict[str, Any]:
        return {"seq": self.seq, "path": self.path, "arrival": self.arrival, "rid": self.rid,
                "marker": self.marker, "max_tokens": self.max_tokens, "include_usage": self.include_usage,
                "continuous_usage": self.continuous_usage, "sends": self.sends, "end": self.end,
                "disconnected": self.disconnected}


class Log:
    def __init__(self) -> None:
        self.entries: list[Entry] = []
        self.reset_at = time.perf_counter()

    def reset(self) -> None:
        self.entries = []
        self.reset_at = time.perf_counter()


_TRAILER = b"%x\r\n%s\r\n0\r\n\r\n" % (len(DONE), DONE)  # [DONE], then the last HTTP chunk
_STREAM_HEAD = (b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream; charset=utf-8\r\nCache-Control: no-cache\r\n"
                b"Transfer-Encoding: chunked\r\n")


STARTED = int(time.time())  # the `created` field of every chunk
PROMPT_TOKENS = 16  # usage.prompt_tokens of every request (nothing here measures prompts)
_NO_ID = b'{"id":"",'  # chunks are built once with an empty id; each request's id goes in front
_rest_cache: dict[tuple[bool, bool, bool, int, int], bytes] = {}


def _after_id(obj: dict[str, Any]) -> bytes:
    """A chunk's JSON after its `"id":"..."` field (compact, as vLLM writes it)."""
    text = json.dumps(obj, separators=(",", ":")).encode()
    assert text.startswith(_NO_ID)
    return text[len(_NO_ID):]


def _chunk_rest(chat: bool, token_ids: bool, continuous: bool, i: int, chunks: int, settings: Settings) -> bytes:
    """A content chunk after its id: the same for every request, so built once."""
    key = (chat, token_ids, continuous, i, chunks)
    found = _rest_cache.get(key)
    if found is not None:
        return found
    finish = "length" if i == chunks - 1 else None
    picked = choice(chat, " tok", finish, [100 + i % 1000] if token_ids else None, role=chat and i == 0)
    rest = _after_id(chunk("", chat, STARTED, settings.model, [picked],
                           usage(PROMPT_TOKENS, i + 1) if continuous else None))
    _rest_cache[key] = rest
    return rest


def _http_chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)  # one HTTP chunk per SSE event


class Stream:
    """Writes one request's chunks on schedule; the time of every write is logged just before it."""

    def __init__(self, proto: HttpProtocol, entry: Entry, body: dict[str, Any], settings: Settings,
                 close_after: bool) -> None:
        self.proto, self.entry, self.s, self.close_after = proto, entry, settings, close_after
        self.chat = entry.path.endswith("/chat/completions")
        self.token_ids = bool(body.get("return_token_ids"))
        self.chunks = settings.chunks
        self.head = b'data: {"id":"%s-%d",' % (b"chatcmpl" if self.chat else b"cmpl", entry.seq)
        self.loop = asyncio.get_running_loop()
        self.i = 0
        # Paced on the loop clock from the arrival; the truth is what perf_counter says at each write.
        self.t_first = self.loop.time() + settings.ttft_s - (time.perf_counter() - entry.arrival)
        self.back_to_back = settings.gap_s <= 0 and settings.ttft_s <= 0

    def start(self) -> None:
        self.proto.transport.write(_STREAM_HEAD + (b"Connection: close\r\n\r\n" if self.close_after else b"\r\n"))
        self._schedule()

    def _schedule(self) -> None:
        if self.back_to_back:
            self.loop.call_soon(self._send)
        else:
            self.loop.call_at(self.t_first + self.i * self.s.gap_s, self._send)

    def _send(self) -> None:
        if self.proto.closed:
            self.entry.disconnected = True
            return
        rest = _chunk_rest(self.chat, self.token_ids, self.entry.continuous_usage, self.i, self.chunks, self.s)
        data = _http_chunk(self.head + rest + b"\n\n")
        self.entry.sends.append(time.perf_counter())
        self.proto.transport.write(data)
        self.i += 1
        if self.i < self.chunks:
            self._schedule()
            return
        tail = b""
        if self.entry.include_usage:
            final = chunk("", self.chat, STARTED, self.s.model, [], usage(PROMPT_TOKENS, self.chunks))
            tail = _http_chunk(self.head + _after_id(final) + b"\n\n")
        self.proto.transport.write(tail + _TRAILER)
        self.entry.end = time.perf_counter()
        self.proto.response_done(self.close_after)


class HttpProtocol(asyncio.Protocol):
    """HTTP/1.1 with keep-alive: one request at a time per connection (pipelined ones wait their turn)."""

    def __init__(self, log: Log, settings: Settings) -> None:
        self.log, self.s = log, settings
        self.buf = b""
        self.arrival: float | None = None
        self.busy = False
        self.closed = False
        self.transport: asyncio.Transport

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]  # uvloop's TCPTransport is not a subclass

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True

    def data_received(self, data: bytes) -> None:
        if not self.buf and self.arrival is None:
            self.arrival = time.perf_counter()
        self.buf += data
        if not self.busy:
            self._next()

    def _next(self) -> None:
        head_end = self.buf.find(CRLF2)
        if head_end < 0:
            return
        head = self.buf[:head_end].decode("latin-1")
        lines = head.split("\r\n")
        try:
            method, target, version = lines[0].split(" ", 2)
        except ValueError:
            self._simple(400, b'{"error":"bad request line"}', close=True)
            return
        headers: dict[str, str] = {}
        for line in lines[1:]:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        length = int(headers.get("content-length", "0") or 0)
        if headers.get("expect", "").lower() == "100-continue" and len(self.buf) < head_end + 4 + length:
            self.transport.write(b"HTTP/1.1 100 Continue\r\n\r\n")
            headers.pop("expect")
        if len(self.buf) < head_end + 4 + length:
            return  # wait for the whole body
        body = self.buf[head_end + 4: head_end + 4 + length]
        self.buf = self.buf[head_end + 4 + length:]
        arrival = self.arrival if self.arrival is not None else time.perf_counter()
        self.arrival = time.perf_counter() if self.buf else None
        close = headers.get("connection", "").lower() == "close" or version == "HTTP/1.0"
        self.busy = True
        self._dispatch(method, target.split("?", 1)[0], headers, body, arrival, close)

    def response_done(self, close: bool) -> None:
        self.busy = False
        if close:
            self.transport.close()
        elif self.buf:
            self._next()

    def _simple(self, status: int, payload: bytes, close: bool = False,
                ctype: bytes = b"application/json") -> None:
        reason = {200: b"OK", 400: b"Bad Request", 404: b"Not Found", 405: b"Method Not Allowed"}[status]
        self.transport.write(b"HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %d\r\n%s\r\n%s" % (
            status, reason, ctype, len(payload), b"Connection: close\r\n" if close else b"", payload))
        self.response_done(close)

    def _dispatch(self, method: str, path: str, headers: dict[str, str], raw: bytes, arrival: float,
                  close: bool) -> None:
        if method == "GET" and path == "/v1/models":
            models = {"object": "list", "data": [model_card(self.s.model, "paced", 0, 1 << 20)]}
            self._simple(200, json.dumps(models).encode(), close)
        elif method == "GET" and path in ("/health", "/ping", "/v1/health"):
            self._simple(200, b"", close)
        elif method == "GET" and path == "/log":
            dump = {"reset_at": self.log.reset_at, "now": time.perf_counter(),
                    "settings": {"chunks": self.s.chunks, "gap_s": self.s.gap_s, "ttft_s": self.s.ttft_s},
                    "requests": [e.as_json() for e in self.log.entries]}
            self._simple(200, json.dumps(dump).encode(), close)
        elif method == "POST" and path == "/reset":
            # Optional body {"gap_s": .., "ttft_s": ..} re-paces the server for the next tool.
            if raw.strip():
                req = json.loads(raw)
                self.s.gap_s = float(req.get("gap_s", self.s.gap_s))
                self.s.ttft_s = float(req.get("ttft_s", self.s.ttft_s))
                self.s.chunks = int(req.get("chunks", self.s.chunks))
            self.log.reset()
            self._simple(200, b"{}", close)
        elif method == "POST" and path in ("/v1/chat/completions", "/v1/completions"):
            self._completion(path, headers, raw, arrival, close)
        else:
            self._simple(404 if method in ("GET", "POST") else 405, b'{"error":"not found"}', close)

    def _completion(self, path: str, headers: dict[str, str], raw: bytes, arrival: float, close: bool) -> None:
        try:
            body = json.loads(raw)
        except ValueError:
            self._simple(400, b'{"error":{"message":"body is not JSON"}}', close)
            return
        if not body.get("stream"):
            self._simple(400, b'{"error":{"message":"this server only streams"}}', close)
            return
        found = MARKER.search(raw)
        opts = body.get("stream_options") or {}
        max_tokens = body.get("max_completion_tokens", body.get("max_tokens"))
        entry = Entry(seq=len(self.log.entries), path=path, arrival=arrival, rid=headers.get("x-request-id"),
                      marker=int(found.group(1)) if found else None,
                      max_tokens=max_tokens if isinstance(max_tokens, int) else None,
                      include_usage=bool(opts.get("include_usage")),
                      continuous_usage=bool(opts.get("continuous_usage_stats")))
        self.log.entries.append(entry)
        Stream(self, entry, body, self.s, close).start()


async def serve(host: str, port: int, settings: Settings) -> None:
    log = Log()
    loop = asyncio.get_running_loop()
    server = await loop.create_server(lambda: HttpProtocol(log, settings), host, port, backlog=8192,
                                      reuse_address=True)
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    print(f"paced server on http://{host}:{port} ready", flush=True)
    await stop.wait()
    server.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--chunks", type=int, default=20, help="content chunks per request")
    ap.add_argument("--gap-ms", type=float, default=20.0, help="inter-chunk gap (0: back to back)")
    ap.add_argument("--ttft-ms", type=float, default=None, help="time to the first chunk (default: the gap)")
    ap.add_argument("--model", default="paced", help="the model name /v1/models lists")
    ap.add_argument("--no-uvloop", action="store_true")
    args = ap.parse_args()
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    ttft = args.gap_ms if args.ttft_ms is None else args.ttft_ms
    settings = Settings(chunks=args.chunks, gap_s=args.gap_ms / 1000, ttft_s=ttft / 1000, model=args.model)
    if not args.no_uvloop:
        try:
            import uvloop

            uvloop.install()
        except ImportError:
            pass
    asyncio.run(serve(args.host, args.port, settings))


if __name__ == "__main__":
    main()
