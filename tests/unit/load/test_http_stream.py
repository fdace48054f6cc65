"""The raw HTTP/1.1 streaming transport (load/http_stream.py) and OpenAIClient over it: response framing however
the bytes are split, connection reuse and its one retry, failures as the aiohttp transport reports them, and
the same records as the aiohttp transport on every stream of the fake engine."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import uvloop

from fakeengine.server import FakeEngine
from specmeter.engines.llamacpp import LlamaCppStats
from specmeter.engines.vllm import VLLMStats
from specmeter.load.client import OpenAIClient, RequestSpec
from specmeter.load.http_response import Response
from specmeter.load.http_stream import ConnectionPool, _Connection
from specmeter.metrics.requests import with_sd
from specmeter.schemas.records import RequestRecord

pytestmark = pytest.mark.timeout(60)


@pytest.fixture(autouse=True, params=["asyncio", "uvloop"])
def event_loop_kind(request: pytest.FixtureRequest) -> Iterator[str]:
    """Every test on asyncio's own loop and on uvloop (load.event_loop: auto picks it when installed); the
    transports differ: uvloop's is not an asyncio.Transport, and it reports failures its own way."""
    if request.param == "uvloop":
        asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())
    try:
        yield request.param
    finally:
        asyncio.set_event_loop_policy(None)

REAL = (Path(__file__).resolve().parents[2] / "fixtures" / "vllm" / "chat_stream.sse").read_bytes()


# ---- the protocol alone, fed bytes as a socket would ----------------------------------------------------


class FakeTransport(asyncio.Transport):
    def __init__(self) -> None:
        super().__init__()
        self.written: list[bytes] = []
        self.closed = False

    def write(self, data: bytes | bytearray | memoryview) -> None:
        self.written.append(bytes(data))

    def close(self) -> None:
        self.closed = True

    def is_closing(self) -> bool:
        return self.closed


@dataclass
class Sink:
    t_send: float = 0.0
    status: int | None = None
    data: list[bytes] = field(default_factory=list)
    ended: bool = False
    stop_at: bytes | None = None  # say "done" once this has arrived

    def feed(self, data: bytes, t_rel: float) -> bool:
        self.data.append(data)
        return self.stop_at is not None and self.stop_at in b"".join(self.data)

    def end(self, t_rel: float) -> None:
        self.ended = True


def feed(pieces: list[bytes], eof: bool = False, sink: Sink | None = None) -> tuple[Response, Sink, _Connection]:
    """One exchange on a protocol instance fed `pieces` (then the end of the connection if `eof`)."""

    async def go() -> tuple[Response, Sink, _Connection]:
        pool = ConnectionPool()
        conn = _Connection(pool, ("h", 1))
        conn.connection_made(FakeTransport())
        s = sink or Sink()
        waiter: asyncio.Future[Response] = asyncio.get_running_loop().create_future()
        conn.begin(b"POST / HTTP/1.1\r\n\r\n", s, waiter)
        for piece in pieces:
            conn.data_received(piece)
        if eof:
            conn.connection_lost(None)
        assert waiter.done(), "the response did not complete"
        return waiter.result(), s, conn

    return asyncio.run(go())


def chunked(body: bytes, sizes: list[int], ext: bool = False, trailer: bool = False) -> bytes:
    out, pos, i = [], 0, 0
    while pos < len(body):
        n = sizes[i % len(sizes)]
        i += 1
        piece = body[pos:pos + n]
        pos += len(piece)
        out.append(b"%x%s\r\n%s\r\n" % (len(piece), b";name=value" if ext else b"", piece))
    out.append(b"0\r\n" + (b"X-Trailer: 1\r\n" if trailer else b"") + b"\r\n")
    return b"".join(out)


HEAD_CHUNKED = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"


@pytest.mark.parametrize(("ext", "trailer", "interim"), [(False, False, False), (True, True, True)])
def test_chunked_body_split_at_every_byte(ext: bool, trailer: bool, interim: bool) -> None:
    body = REAL[:700]
    head = (b"HTTP/1.1 100 Continue\r\n\r\n" if interim else b"") + HEAD_CHUNKED
    wire = head + chunked(body, [1, 17, 250, 3], ext, trailer)
    for cut in range(len(wire) + 1):
        pieces = [p for p in (wire[:cut], wire[cut:]) if p]
        resp, sink, conn = feed(pieces)
        assert resp.status == 200 and sink.status == 200
        assert b"".join(sink.data) == body and sink.ended, cut
        assert conn.state == 0 and not conn.transport.is_closing()  # type: ignore[union-attr] - back in the pool
    resp, sink, _ = feed([bytes([b]) for b in wire])  # every byte a read of its own
    assert b"".join(sink.data) == body and sink.ended


def test_content_length_and_close_delimited_bodies() -> None:
    body = REAL[:500]
    wire = b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body)
    for cut in range(0, len(wire) + 1, 7):
        resp, sink, conn = feed([wire[:cut], wire[cut:]])
        assert resp.status == 200 and b"".join(sink.data) == body and sink.ended and conn.state == 0
    wire = b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n" + body
    _resp, sink, conn = feed([wire[:60], wire[60:]], eof=True)
    assert b"".join(sink.data) == body and sink.ended and conn.transport.is_closing()  # type: ignore[union-attr]
    wire = b"HTTP/1.0 200 OK\r\n\r\n" + body  # HTTP/1.0 without a length: until the server closes
    _, sink, conn = feed([wire], eof=True)
    assert b"".join(sink.data) == body and sink.ended


def test_sink_done_before_the_body_ends_drains_then_reuses() -> None:
    wire = HEAD_CHUNKED + chunked(b"data: a\n\ndata: [DONE]\n\n", [9])
    sink = Sink(stop_at=b"[DONE]")
    _, sink, conn = feed([wire[:-5]], sink=sink)  # the terminating chunk has not arrived yet
    assert not sink.ended and conn.state == 2
    conn.data_received(wire[-5:])
    assert conn.state == 0  # the rest of the body read: idle again


@pytest.mark.parametrize("wire", [
    b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
    b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabcXY",
    b"HTTP/1.1 200 OK\r\nContent-Length: nope\r\n\r\n",
    b"SSH-2.0-OpenSSH_9.6\r\n\r\n",
])
def test_bad_framing_is_a_connection_error(wire: bytes) -> None:
    async def go() -> BaseException | None:
        conn = _Connection(ConnectionPool(), ("h", 1))
        conn.connection_made(FakeTransport())
        waiter: asyncio.Future[Response] = asyncio.get_running_loop().create_future()
        conn.begin(b"x", Sink(), waiter)
        conn.data_received(wire)
        assert conn.transport is not None and conn.transport.is_closing()
        return waiter.exception()

    exc = asyncio.run(go())
    assert isinstance(exc, ConnectionError), exc


# ---- against raw local servers ---------------------------------------------------------------------------


Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter, "RawServer"], Awaitable[None]]


@dataclass
class RawServer:
    url: str = ""
    connections: int = 0
    requests: list[tuple[int, bytes, bytes]] = field(default_factory=list)  # (connection, head, body)
    closed_by_client: list[int] = field(default_factory=list)


async def read_request(reader: asyncio.StreamReader, server: RawServer, conn: int) -> bool:
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except (asyncio.IncompleteReadError, ConnectionError):
        server.closed_by_client.append(conn)
        return False
    length = 0
    for line in head.split(b"\r\n"):
        if line.lower().startswith(b"content-length:"):
            length = int(line.split(b":", 1)[1])
    body = await reader.readexactly(length)
    server.requests.append((conn, head, body))
    return True


@asynccontextmanager
async def raw_server(handler: Handler) -> AsyncIterator[RawServer]:
    state = RawServer()

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        state.connections += 1
        try:
            await handler(reader, writer, state)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()

    srv = await asyncio.start_server(serve, "127.0.0.1", 0)
    state.url = f"http://127.0.0.1:{srv.sockets[0].getsockname()[1]}"
    try:
        yield state
    finally:
        srv.close()


def sse_response(stream: bytes = REAL, keep_alive: bool = True) -> bytes:
    head = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n"
    head += b"\r\n" if keep_alive else b"Connection: close\r\n\r\n"
    events = [e + b"\n\n" for e in stream.split(b"\n\n") if e.strip()]
    return head + b"".join(b"%x\r\n%s\r\n" % (len(e), e) for e in events) + b"0\r\n\r\n"


def new_record(i: int = 0) -> RequestRecord:
    return RequestRecord(config_id="x", point_id="c1", conversation_id=f"c{i}")


async def send_n(url: str, n: int, adapter: Any = None, timeout_s: float = 10, raw: bool = True,
                 key: str | None = None) -> list[RequestRecord]:
    out = []
    keep = adapter is None or adapter.keeps_connections
    async with OpenAIClient(url, keep_connections=keep, api_key=key, timeout_s=timeout_s, raw_http=raw) as client:
        for i in range(n):
            rec = new_record(i)
            await client.send(RequestSpec("/v1/chat/completions", {"stream": True, "i": i}), rec, 0.0)
            out.append(rec)
    return out


def test_stream_over_keep_alive_reuses_one_connection() -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, s: RawServer) -> None:
        conn = s.connections
        while await read_request(reader, s, conn):
            writer.write(sse_response())
            await writer.drain()

    async def go() -> tuple[list[RequestRecord], RawServer]:
        async with raw_server(handler) as s:
            return await send_n(s.url, 3, key="sk-secret"), s

    recs, s = asyncio.run(go())
    assert all(r.ok for r in recs), [r.error for r in recs]
    assert recs[0].output_tokens == 24 and recs[0].http_status == 200 and recs[0].final_payload is not None
    assert s.connections == 1 and [c for c, _, _ in s.requests] == [1, 1, 1]
    head = s.requests[0][1]
    assert head.startswith(b"POST /v1/chat/completions HTTP/1.1\r\n")
    for line in (b"Host: 127.0.0.1:", b"Content-Type: application/json", b"Authorization: Bearer sk-secret",
                 b"Connection: keep-alive"):
        assert line in head
    assert json.loads(s.requests[2][2]) == {"stream": True, "i": 2}


def test_connection_close_engine_opens_one_connection_per_request() -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, s: RawServer) -> None:
        if await read_request(reader, s, s.connections):
            writer.write(sse_response())  # says keep-alive (as llama-server does), the client still closes
            await writer.drain()
            await asyncio.sleep(0.05)

    async def go() -> tuple[list[RequestRecord], RawServer]:
        async with raw_server(handler) as s:
            return await send_n(s.url, 3, adapter=LlamaCppStats()), s

    recs, s = asyncio.run(go())
    assert all(r.ok for r in recs), [r.error for r in recs]
    assert s.connections == 3 and all(b"Connection: close" in head for _, head, _ in s.requests)


def test_a_host_name_is_resolved_once() -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, s: RawServer) -> None:
        if await read_request(reader, s, s.connections):
            writer.write(sse_response(keep_alive=False))
            await writer.drain()

    async def go() -> tuple[list[RequestRecord], RawServer, dict[Any, str]]:
        async with raw_server(handler) as s:
            url = s.url.replace("127.0.0.1", "localhost")
            async with OpenAIClient(url, keep_connections=False, timeout_s=10) as client:
                recs = []
                for i in range(2):
                    rec = new_record(i)
                    await client.send(RequestSpec("/v1/completions", {}), rec, 0.0)
                    recs.append(rec)
                assert client._pool is not None
                return recs, s, dict(client._pool._resolved)

    recs, s, resolved = asyncio.run(go())
    assert all(r.ok for r in recs), [r.error for r in recs]
    assert s.connections == 2 and list(resolved.values()) == ["127.0.0.1"]
    assert all(b"Host: localhost:" in head for _, head, _ in s.requests)


def test_server_closing_a_kept_alive_connection_is_retried_once() -> None:
    """Every connection serves one stream, then closes when the next request arrives, without a byte."""

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, s: RawServer) -> None:
        conn = s.connections
        if await read_request(reader, s, conn):
            writer.write(sse_response())
            await writer.drain()
        await reader.readuntil(b"\r\n\r\n")  # the next request on this connection: dropped

    async def go() -> tuple[list[RequestRecord], RawServer]:
        async with raw_server(handler) as s:
            return await send_n(s.url, 3), s

    recs, s = asyncio.run(go())
    assert all(r.ok for r in recs), [r.error for r in recs]
    assert s.connections == 3 and [c for c, _, _ in s.requests] == [1, 2, 3]
    assert all(r.start_s is not None and r.start_s > recs[0].start_s for r in recs[1:])  # type: ignore[operator]


def test_server_closing_mid_stream_is_an_error_not_a_retry() -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, s: RawServer) -> None:
        conn = s.connections
        while await read_request(reader, s, conn):
            wire = sse_response()
            if len(s.requests) == 1:
                writer.write(wire)  # the first: whole, the connection kept
            else:
                writer.write(wire[:len(wire) // 2])  # the second, on the reused connection: cut off
                await writer.drain()
                return
            await writer.drain()

    async def go() -> tuple[list[RequestRecord], RawServer]:
        async with raw_server(handler) as s:
            return await send_n(s.url, 2), s

    recs, s = asyncio.run(go())
    assert recs[0].ok
    assert recs[1].error_kind == "connection" and not recs[1].ok, recs[1].error
    assert recs[1].chunk_offsets_s and recs[1].http_status == 200  # what came before the cut is kept
    assert len(s.requests) == 2 and s.connections == 1  # not sent again


@pytest.mark.parametrize("framing", ["length", "chunked", "close"])
def test_http_error_with_a_json_body(framing: str) -> None:
    error = json.dumps({"error": {"message": "maximum context length is 2048 tokens\nreduce it",
                                  "type": "BadRequestError", "code": 400}, "object": "error"}).encode()

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, s: RawServer) -> None:
        conn = s.connections
        while await read_request(reader, s, conn):
            if len(s.requests) == 1:
                head = b"HTTP/1.1 400 Bad Request\r\nContent-Type: application/json\r\n"
                if framing == "length":
                    writer.write(head + b"Content-Length: %d\r\n\r\n%s" % (len(error), error))
                elif framing == "chunked":
                    writer.write(head + b"Transfer-Encoding: chunked\r\n\r\n" + chunked(error, [10]))
                else:
                    writer.write(head + b"Connection: close\r\n\r\n" + error)
                    await writer.drain()
                    return
            else:
                writer.write(sse_response())
            await writer.drain()

    async def go() -> tuple[list[RequestRecord], RawServer]:
        async with raw_server(handler) as s:
            return await send_n(s.url, 2), s

    recs, s = asyncio.run(go())
    bad, good = recs
    assert bad.error_kind == "http_4xx" and bad.http_status == 400 and not bad.ok
    assert bad.error == f"HTTP 400: {error.decode()[:200]}"
    assert "maximum context length" in bad.error
    assert good.ok, good.error
    assert s.connections == (2 if framing == "close" else 1)


def test_timeout_and_cancel_close_the_socket() -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, s: RawServer) -> None:
        if await read_request(reader, s, s.connections):
            wire = sse_response()
            writer.write(wire[:300])  # then stalls
            await writer.drain()
            await read_request(reader, s, s.connections)  # until the client closes

    async def go() -> tuple[RequestRecord, RequestRecord, RawServer]:
        async with raw_server(handler) as s:
            (timed_out,) = await send_n(s.url, 1, timeout_s=0.3)
            async with OpenAIClient(s.url, timeout_s=10) as client:
                rec = new_record()
                task = asyncio.create_task(client.send(RequestSpec("/v1/chat/completions", {}), rec, 0.0))
                await asyncio.sleep(0.2)
                task.cancel()
                with pytest.raises(asyncio.CancelledError):
                    await task
                await asyncio.sleep(0.1)
            return timed_out, rec, s

    timed_out, cancelled, s = asyncio.run(go())
    assert timed_out.error_kind == "timeout" and 0.25 <= (timed_out.e2e_s or 0) < 2
    assert cancelled.error_kind == "cancelled"
    assert sorted(s.closed_by_client) == [1, 2]  # both sockets closed by the client, not left open


def test_connection_refused_is_a_connection_error() -> None:
    async def go() -> RequestRecord:
        srv = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
        port = srv.sockets[0].getsockname()[1]
        srv.close()
        await srv.wait_closed()
        (rec,) = await send_n(f"http://127.0.0.1:{port}", 1)
        return rec

    rec = asyncio.run(go())
    assert rec.error_kind == "connection" and rec.error and rec.error.startswith("ConnectionRefusedError")


def test_transport_choice() -> None:
    assert OpenAIClient("http://127.0.0.1:8000")._raw_target is not None
    assert OpenAIClient("http://[::1]:8000/")._raw_target == ("::1", 8000, b"", b"Host: [::1]:8000\r\n")
    assert OpenAIClient("http://h/prefix/")._raw_target == ("h", 80, b"/prefix", b"Host: h\r\n")
    assert OpenAIClient("https://127.0.0.1:8000")._raw_target is None
    assert OpenAIClient("http://127.0.0.1:8000", raw_http=False)._raw_target is None
    assert OpenAIClient.from_settings(
        OpenAIClient("http://127.0.0.1:8000", raw_http=False).settings)._raw_target is None


# ---- the same records as aiohttp on the fake engine ------------------------------------------------------

EQUIVALENT_FAULTS = ["none", "slow", "malformed", "malformed_deep", "malformed_bigint", "bad_content_type",
                     "bad_finish_reason", "bad_usage_type", "no_usage", "incomplete", "stream_error",
                     "http_400", "http_429", "http_500", "reset", "disconnect"]
FIELDS = ("ok", "error_kind", "http_status", "output_text", "output_tokens", "prompt_tokens", "chunk_tokens",
          "finish_reason", "output_token_ids", "sd", "sd_raw")


@pytest.mark.parametrize("api", ["chat", "completions"])
def test_raw_and_aiohttp_transports_give_the_same_records(fake_engine: FakeEngine, api: str) -> None:
    def request(fault: str) -> RequestSpec:
        body: dict[str, Any] = {"model": "fake/target-model", "max_tokens": 32, "temperature": 0.0,
                                "stream": True, "return_token_ids": True,
                                "stream_options": {"include_usage": True, "continuous_usage_stats": True}}
        text = f"Tell me a story. FAULT:{fault}"
        if api == "chat":
            body["messages"] = [{"role": "user", "content": text}]
            return RequestSpec("/v1/chat/completions", body)
        body["prompt"] = text
        return RequestSpec("/v1/completions", body)

    async def run(raw: bool) -> list[RequestRecord]:
        out = []
        async with OpenAIClient(fake_engine.url, timeout_s=5, raw_http=raw) as client:
            assert (client._pool is not None) is raw
            for fault in EQUIVALENT_FAULTS:
                rec = new_record()
                await client.send(request(fault), rec, 0.0)
                out.append(rec)
        return out

    raw, ref = asyncio.run(run(True)), asyncio.run(run(False))
    for fault, a, b in zip(EQUIVALENT_FAULTS, raw, ref):
        for name in FIELDS:
            assert getattr(a, name) == getattr(b, name), (fault, name, getattr(a, name), getattr(b, name))
        if a.error_kind != "connection":  # the exception's class name differs between the transports
            assert a.error == b.error, fault
        assert len(a.chunk_offsets_s) == len(b.chunk_offsets_s), fault
    assert raw[0].ok and with_sd(raw[0], VLLMStats()).sd is not None and raw[0].output_token_ids


def test_stream_errors_from_the_sink_close_the_connection() -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, s: RawServer) -> None:
        conn = s.connections
        while await read_request(reader, s, conn):
            writer.write(sse_response(b"data: {oops\n\n" + REAL) if len(s.requests) == 1 else sse_response())
            await writer.drain()

    async def go() -> tuple[list[RequestRecord], RawServer]:
        async with raw_server(handler) as s:
            return await send_n(s.url, 2), s

    (bad, good), s = asyncio.run(go())
    assert bad.error_kind == "malformed" and good.ok
    assert s.connections == 2  # the rest of the broken stream was never read: its connection was not reused
