"""Per-request faults: which exist, which error kind specmeter must record for each, how a request picks
one, and what each does on the wire (before the engine, or in the middle of the stream).

A request's fault, in this order:
  1. the `X-Fault` request header;
  2. a marker `FAULT:<name>` in the request's current (last) user message, or in a completions prompt
     (after its last "User:");
  3. `server.schedule[i]` for the i-th completion request the server received (0-based, warmup too);
  4. `server.default_fault`.
Server-wide faults (restarts, hidden or garbage /metrics, phantom traffic, lying per-request stats) are
settings of the server: see FakeEngine."""

from __future__ import annotations

import asyncio
import json
import socket
import struct
from typing import TYPE_CHECKING, Any

from aiohttp import web

from fakeengine.chunks import DONE, error_body

if TYPE_CHECKING:
    from fakeengine.server import Stream

FAULT_HEADER = "X-Fault"
MARKER = "FAULT:"

# fault name -> the error kind specmeter must record for it
REQUEST_FAULTS: dict[str, str | None] = {
    "none": None,
    "slow": None,  # chunks arrive slowly but well within the timeout: must succeed
    "timeout": "timeout",  # stalls before the response headers
    "stall": "timeout",  # stalls in the middle of the stream
    "http_400": "http_4xx",
    "http_401_echo_key": "http_4xx",  # 401 whose body repeats the caller's API key
    "http_429": "http_429",
    "http_500": "http_5xx",
    "reset": "connection",  # TCP RST after some chunks
    "disconnect": "connection",  # connection closed before any response
    "malformed": "malformed",  # a truncated JSON line mid-stream
    "malformed_deep": "malformed",  # valid-looking but absurdly nested JSON (RecursionError in json)
    "malformed_bigint": "malformed",  # an integer with 5000 digits (ValueError in json)
    "bad_content_type": "malformed",  # delta.content / text is a number, not a string
    "bad_finish_reason": "malformed",  # finish_reason is a number, not a string
    "bad_usage_type": "malformed",  # the final usage chunk gives token counts as strings
    "no_usage": "malformed",  # ignores stream_options: no usage anywhere
    "zero_usage": "malformed",  # text streams, but the final usage claims 0 completion tokens
    "incomplete": "incomplete_stream",  # everything but `data: [DONE]`
    "stream_error": "stream_error",  # vLLM's error event mid-stream
}
MIDSTREAM = {"stall", "reset", "malformed", "malformed_deep", "malformed_bigint", "bad_content_type", "stream_error"}
# Faults that never reach the engine (nothing is counted in /metrics for them).
PRE_ENGINE = {"timeout", "http_400", "http_401_echo_key", "http_429", "http_500", "disconnect"}


def marked_fault(request: web.Request, body: dict[str, Any], chat: bool) -> str | None:
    """The fault the request names itself (header or marker), if any."""
    if FAULT_HEADER in request.headers:
        return request.headers[FAULT_HEADER]
    if chat:
        users = [m for m in body.get("messages") or [] if isinstance(m, dict) and m.get("role") == "user"]
        content = users[-1].get("content") if users else ""
        text = content if isinstance(content, str) else json.dumps(content)
    else:
        prompt = body.get("prompt")
        text = prompt.rsplit("User:", 1)[-1] if isinstance(prompt, str) else ""
    if MARKER in text:
        return text.split(MARKER, 1)[1].split()[0].strip(".,;:!?\"'")
    return None


def error(status: int, message: str, type_: str) -> web.Response:
    return web.json_response(error_body(status, message, type_), status=status)


async def pre_engine(request: web.Request, fault: str, stall_s: float) -> web.StreamResponse:
    """The answer to a request whose fault strikes before the engine sees it."""
    if fault == "timeout":
        await asyncio.sleep(stall_s)  # the client gives up first; the handler is then cancelled
        return error(504, "fault server: stalled", "Timeout")
    if fault == "http_400":
        return error(400, "This model's maximum context length is 2048 tokens. However, you requested "
                          "4096 tokens. Please reduce the length of the messages or completion.", "BadRequestError")
    if fault == "http_401_echo_key":
        presented = request.headers.get("Authorization", "").removeprefix("Bearer ")
        return error(401, f"Incorrect API key provided: {presented}. You can find your API key in your "
                          "account settings.", "AuthenticationError")
    if fault == "http_429":
        resp = error(429, "Too many requests: rate limit exceeded, retry later", "RateLimitError")
        resp.headers["Retry-After"] = "1"
        return resp
    if fault == "http_500":
        return error(500, "EngineCore encountered an issue. See stack trace (above) for the root cause.",
                     "InternalServerError")
    assert fault == "disconnect", fault
    reset(request)
    raise asyncio.CancelledError  # nothing more to send on a dead connection


async def midstream(stream: Stream, fault: str, stall_s: float) -> web.StreamResponse:
    """The rest of a stream whose fault strikes half-way through it."""
    resp = stream.resp
    if fault == "stall":
        await asyncio.sleep(stall_s)
        await resp.write_eof()
        return resp
    if fault == "reset":
        await asyncio.sleep(0.05)  # let the chunks written so far reach the client first
        reset(stream.request)
        raise asyncio.CancelledError
    if fault == "malformed":
        await resp.write(b'data: {"id": "chatcmpl-x", "object": "chat.completion.chunk", "choices": '
                         b'[{"index": 0, "delta": {"content": "tru\n\n')
    elif fault == "malformed_deep":
        await resp.write(b"data: " + b"[" * 100_000 + b"]" * 100_000 + b"\n\n")
    elif fault == "malformed_bigint":
        await resp.write(b'data: {"choices": [], "usage": {"completion_tokens": ' + b"7" * 5000 + b"}}\n\n")
    elif fault == "bad_content_type":
        await stream.write([stream.choice(12345)], usage=stream.usage_so_far())
        await stream.write([], usage=stream.usage_so_far())  # a server this broken still finishes its stream
    elif fault == "stream_error":
        err = {"error": {"object": "error", "message": "EngineCore encountered an issue: CUDA error: "
                         "an illegal memory access was encountered", "type": "InternalServerError",
                         "param": None, "code": 500}}
        await resp.write(b"data: " + json.dumps(err).encode() + b"\n\n")
    await resp.write(DONE)
    await resp.write_eof()
    return resp


def reset(request: web.Request) -> None:
    """Close the connection with a TCP RST (SO_LINGER 0), as a crashed proxy or server would."""
    transport = request.transport
    if transport is None:
        return
    sock = transport.get_extra_info("socket")
    if sock is not None:
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        except OSError:
            pass
    transport.abort()
