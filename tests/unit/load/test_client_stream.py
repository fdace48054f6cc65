"""The client's hot path (load/client.py): bytes as they arrive from the socket, split anywhere, parse to exactly
what the line-by-line parser it replaced made of the same stream, on recorded real streams and on every stream
the fault tests send; and every line is stamped when its last byte arrived.

`reference_line` / `reference_stream` are the previous implementation (aiohttp's readline, then json.loads per
line), frozen here as the specification.
"""

from __future__ import annotations

import asyncio
import itertools
import json
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from hypothesis import given, settings
from hypothesis import strategies as st

from fakeengine.server import FakeEngine
from fakeengine.threaded import serve_post
from specmeter.common.errors import StreamError
from specmeter.load import sse as sse_mod
from specmeter.load.client import OpenAIClient, RequestSpec
from specmeter.load.sse import ERROR_BODY_CHARS, StreamResult, parse_sse_bytes, parse_sse_end
from specmeter.schemas.records import RequestRecord

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "vllm"
REAL = (FIXTURES / "chat_stream.sse").read_bytes()
# Faults whose stream arrives whole (the others cut the connection or stall: transport errors, which
# test_faults_requests covers through send()).
STREAM_FAULTS = ["none", "slow", "malformed", "malformed_deep", "malformed_bigint", "bad_content_type",
                 "bad_finish_reason", "bad_usage_type", "no_usage", "incomplete", "stream_error"]


# ---- the specification: the previous line parser -----------------------------------------------------------


def _reference_content(choice: dict[str, Any]) -> str:
    delta = choice.get("delta")
    if isinstance(delta, dict):
        for key in ("content", "reasoning", "reasoning_content"):
            value = delta.get(key)
            if isinstance(value, str) and value:
                return value
        return ""
    text = choice.get("text")
    return text if isinstance(text, str) else ""


def reference_line(line: bytes, t_rel: float, out: StreamResult) -> None:
    if not line.startswith(b"data:"):
        return
    data = line[5:].strip()
    if data == b"[DONE]":
        out.saw_done = True
        return
    try:
        obj = json.loads(data)
    except (ValueError, RecursionError) as exc:
        raise StreamError("malformed", f"stream line is not JSON: {data[:80]!r}") from exc
    if not isinstance(obj, dict):
        raise StreamError("malformed", f"stream event is not a JSON object: {data[:80]!r}")
    if "error" in obj:
        err = obj["error"]
        msg = err.get("message") if isinstance(err, dict) else err
        raise StreamError("stream_error", f"server error in stream: {str(msg)[:ERROR_BODY_CHARS]}")
    model = obj.get("model")
    if isinstance(model, str) and model:
        if out.model is not None and model != out.model:
            raise StreamError("malformed", f"the stream names model {out.model[:80]!r}, then {model[:80]!r}")
        out.model = model
    usage = obj.get("usage")
    if isinstance(usage, dict):
        for key in ("prompt_tokens", "completion_tokens"):
            val = usage.get(key)
            if val is not None and (not isinstance(val, int) or isinstance(val, bool) or val < 0):
                raise StreamError("malformed", f"usage.{key} is {str(val)[:40]!r}, not a token count")
        out.usage = usage
    choices = obj.get("choices")
    if not isinstance(choices, list):
        raise StreamError("malformed", f"stream event has no choices list: {data[:80]!r}")
    if not choices:
        out.final_payload = obj
        return
    choice = choices[0]
    if not isinstance(choice, dict):
        raise StreamError("malformed", "stream choice is not a JSON object")
    finish = choice.get("finish_reason")
    if finish is not None and not isinstance(finish, str):
        raise StreamError("malformed", f"finish_reason is {type(finish).__name__}, not a string")
    if finish:
        out.finish_reason = finish
    if isinstance(obj.get("metrics"), dict):
        out.final_payload = obj
    ids = choice.get("token_ids")
    if ids is not None:
        if not isinstance(ids, list) or not all(isinstance(t, int) and not isinstance(t, bool) for t in ids):
            raise StreamError("malformed", f"token_ids is not a list of token ids: {str(ids)[:40]!r}")
        out.token_ids = (out.token_ids or []) + ids
    text = _reference_content(choice)
    cum = usage.get("completion_tokens") if isinstance(usage, dict) else None
    cum = cum if isinstance(cum, int) else None
    grew = cum is not None and cum > out.last_cum_tokens
    if text or grew:
        out.text_parts.append(text)
        out.chunk_offsets.append(t_rel)
        out.chunk_cum_tokens.append(cum)
        if cum is not None:
            out.last_cum_tokens = cum


Outcome = tuple[StreamResult, tuple[str, str] | None]


def _pieces(body: bytes, cuts: list[int]) -> list[bytes]:
    bounds = [0, *sorted({c for c in cuts if 0 < c < len(body)}), len(body)]
    return [body[a:b] for a, b in itertools.pairwise(bounds)]


def reference_stream(pieces: list[bytes]) -> Outcome:
    """aiohttp's readline over the pieces (a line: up to and including b"\\n"; at the end, what is left),
    each line stamped with the index of the piece its last byte came in (the end: len(pieces))."""
    out = StreamResult()
    lines: list[tuple[bytes, float]] = []
    buf = b""
    for i, piece in enumerate(pieces):
        buf += piece
        while b"\n" in buf:
            line, buf = buf.split(b"\n", 1)
            lines.append((line + b"\n", float(i)))
    if buf:
        lines.append((buf, float(len(pieces))))
    try:
        for line, t in lines:
            reference_line(line, t, out)
            if out.saw_done:
                break
    except StreamError as exc:
        return out, (exc.kind, str(exc))
    return out, None


def new_stream(pieces: list[bytes]) -> Outcome:
    """The client's way: each piece as one socket read stamped with its index, then the end of the stream."""
    out = StreamResult()
    try:
        for i, piece in enumerate(pieces):
            parse_sse_bytes(piece, float(i), out)
            if out.saw_done:
                break
        else:
            parse_sse_end(float(len(pieces)), out)
    except StreamError as exc:
        return out, (exc.kind, str(exc))
    return out, None


def assert_same(pieces: list[bytes]) -> Outcome:
    ref, ref_err = reference_stream(pieces)
    new, new_err = new_stream(pieces)
    assert new_err == ref_err
    new.pending = []  # bookkeeping of the reader, not a result
    assert new == ref
    return new, new_err


# ---- recorded real streams -------------------------------------------------------------------------------


def test_real_stream_in_one_read_and_line_by_line() -> None:
    whole, err = assert_same([REAL])
    assert err is None and whole.saw_done and whole.last_cum_tokens == 24
    assert whole.chunk_offsets == [0.0] * len(whole.chunk_offsets)  # one read: one arrival time for all
    lines = REAL.splitlines(keepends=True)
    by_line, _ = assert_same(lines)
    assert by_line.text_parts == whole.text_parts and by_line.chunk_cum_tokens == whole.chunk_cum_tokens
    assert by_line.chunk_offsets == sorted(by_line.chunk_offsets) and len(set(by_line.chunk_offsets)) > 1


def test_real_stream_split_at_every_byte() -> None:
    for cut in range(len(REAL) + 1):
        assert_same(_pieces(REAL, [cut]))


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(0, len(REAL)), max_size=40))
def test_real_stream_split_anywhere(cuts: list[int]) -> None:
    out, err = assert_same(_pieces(REAL, cuts))
    assert err is None and out.saw_done


@pytest.mark.parametrize("eol", [b"\r\n", b"\n"])
def test_line_endings_and_a_last_line_without_newline(eol: bytes) -> None:
    body = REAL.replace(b"\n", eol).rstrip()  # ends in `data: [DONE]` with no newline
    out, err = assert_same([body[:-3], body[-3:]])
    assert err is None and out.saw_done
    no_done = b"".join(line for line in REAL.splitlines(keepends=True) if b"[DONE]" not in line).rstrip()
    out, err = assert_same([no_done])  # the final usage chunk without newline still counts
    assert err is None and not out.saw_done and out.final_payload is not None


def test_nothing_after_done_is_read() -> None:
    out, err = assert_same([REAL + b"data: {not json\n\n"])
    assert err is None and out.saw_done


# ---- every stream of the fault tests --------------------------------------------------------------------


def _fault_body(url: str, fault: str, api: str) -> bytes:
    body: dict[str, Any] = {"model": "fake/target-model", "max_tokens": 32, "temperature": 0.0, "stream": True,
                            "stream_options": {"include_usage": True, "continuous_usage_stats": True},
                            "return_token_ids": True}
    text = f"Tell me a story. FAULT:{fault}"
    if api == "chat":
        body["messages"] = [{"role": "user", "content": text}]
    else:
        body["prompt"] = text

    async def go() -> bytes:
        async with aiohttp.ClientSession() as session:
            path = "/v1/chat/completions" if api == "chat" else "/v1/completions"
            async with session.post(url + path, json=body) as resp:
                return await resp.read()

    return asyncio.run(go())


@pytest.mark.parametrize("api", ["chat", "completions"])
def test_fault_streams_parse_as_before_however_split(fake_engine: FakeEngine, api: str) -> None:
    seen: dict[str, str | None] = {}
    for fault in STREAM_FAULTS:
        body = _fault_body(fake_engine.url, fault, api)
        _, err = assert_same([body])
        seen[fault] = err[0] if err else None
        assert_same(body.splitlines(keepends=True))
        step = 7 if len(body) < 20_000 else 4096  # every line torn, several times over
        assert_same([body[i:i + step] for i in range(0, len(body), step)])
        for cut in range(0, len(body), max(1, len(body) // 20)):
            assert_same(_pieces(body, [cut]))
    # The streams are what their names say (so the comparison above covered each kind of failure).
    assert seen["none"] is None and seen["slow"] is None and seen["incomplete"] is None
    for fault in ("malformed", "malformed_deep", "malformed_bigint"):
        assert seen[fault] == "malformed", fault
    assert seen["stream_error"] == "stream_error"


# ---- crafted and arbitrary streams ----------------------------------------------------------------------


CRAFTED = [
    b"data: {not json\n\n",
    b"data: \xff\xfe\xfd\n\n",
    b"data: [1, 2]\n",
    b'data: "text"\n',
    b'data: {"id": "x"}\n',
    b'data: {"choices": "nope"}\n',
    b'data: {"choices": [1]}\n',
    b'data: {"choices": []} trailing\n',
    b'data: {"choices": []}{"choices": []}\n',
    b'data: \xef\xbb\xbf{"choices": []}\n',  # a UTF-8 byte-order mark: json.loads(bytes) accepts it
    b'data: {\x00"\x00}\x00\n',  # NULs in the second byte: json.loads sniffs UTF-16
    b'data: "\xed\xa0\x80"\n',  # an encoded surrogate (json.loads decodes with surrogatepass)
    b'data: {"choices": [{"delta": {"content": "\xed\xa0\x80"}}]}\n',
    b'data: {"error": {"message": "out of KV cache"}}\n',
    b'data: {"choices": [{"delta": {"content": "a"}, "finish_reason": 3}]}\n',
    b'data: {"choices": [{"delta": {"content": "a"}, "token_ids": [1, true]}]}\n',
    b'data: {"choices": [{"text": "a"}], "usage": {"completion_tokens": "4"}}\n',
    b'data: {"choices": [{"text": "a"}], "usage": {"completion_tokens": -1}}\n',
    b'data: {"choices": [{"text": "a"}], "usage": {"prompt_tokens": false}}\n',
    b'data:{"choices":[{"text":"a"}],"usage":{"completion_tokens":1}}\r\n\r\ndata:[DONE]',
    b": keep-alive\n\nevent: message\nid: 7\ndata: [DONE]\n\n",
    b"data: " + b"[" * 100_000 + b"\n",
]


@pytest.mark.parametrize("body", CRAFTED, ids=range(len(CRAFTED)))
def test_crafted_streams(body: bytes) -> None:
    assert_same([body])
    assert_same([body[:9], body[9:]])
    assert_same([bytes([b]) for b in body[:300]] + [body[300:]])


event_values = st.recursive(
    st.none() | st.booleans() | st.integers(-3, 40) | st.text(max_size=6),
    lambda children: st.lists(children, max_size=3) | st.dictionaries(
        st.sampled_from(["choices", "usage", "delta", "content", "text", "finish_reason", "completion_tokens",
                         "prompt_tokens", "token_ids", "metrics", "error", "reasoning"]), children, max_size=3),
    max_leaves=10,
)
sse_line = st.one_of(
    event_values.map(lambda v: b"data: " + json.dumps(v).encode()),
    st.builds(lambda n, t: b'data: {"choices": [{"delta": {"content": %s}}], "usage": {"completion_tokens": %d}}'
              % (json.dumps(t).encode(), n), st.integers(0, 30), st.text(max_size=4)),
    st.sampled_from([b"", b": ping", b"data: [DONE]", b"data:", b"event: x"]),
    st.binary(max_size=30),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(sse_line, max_size=8), st.sampled_from([b"\n", b"\r\n", b"\n\n"]),
       st.lists(st.integers(0, 2000), max_size=10))
def test_arbitrary_streams_however_split(lines: list[bytes], eol: bytes, cuts: list[int]) -> None:
    body = eol.join(lines)
    assert_same(_pieces(body, cuts))


def test_a_line_that_never_ends_is_malformed_not_memory(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sse_mod, "MAX_LINE_BYTES", 1000)
    out = StreamResult()
    parse_sse_bytes(b"data: {" + b"1" * 500, 0.0, out)
    with pytest.raises(StreamError) as info:
        for _ in range(5):
            parse_sse_bytes(b"2" * 200, 0.1, out)
    assert info.value.kind == "malformed"


# ---- send(): a stream torn into tiny writes arrives as it was sent ---------------------------------------


def test_send_over_torn_writes_matches_one_write() -> None:
    async def serve_and_send(piece: int) -> RequestRecord:
        async def handler(request: web.Request) -> web.StreamResponse:
            await request.read()
            resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
            await resp.prepare(request)
            for i in range(0, len(REAL), piece):
                await resp.write(REAL[i:i + piece])
                if piece < len(REAL):
                    await asyncio.sleep(0)
            await resp.write_eof()
            return resp

        async with (serve_post("/v1/chat/completions", handler) as base,
                    OpenAIClient(base, timeout_s=10) as client):
            record = RequestRecord(config_id="x", point_id="c1", conversation_id="c0")
            await client.send(RequestSpec("/v1/chat/completions", {"stream": True}), record, 0.0)
            return record

    whole = asyncio.run(serve_and_send(len(REAL)))
    torn = asyncio.run(serve_and_send(13))
    assert whole.ok and torn.ok, (whole.error, torn.error)
    for name in ("output_text", "output_tokens", "prompt_tokens", "chunk_tokens", "finish_reason",
                 "output_token_ids", "sd", "sd_raw"):
        assert getattr(torn, name) == getattr(whole, name), name
    assert len(torn.chunk_offsets_s) == len(whole.chunk_offsets_s)
    assert torn.chunk_offsets_s == sorted(torn.chunk_offsets_s)
    assert torn.ttft_s is not None and torn.e2e_s is not None and 0 <= torn.ttft_s <= torn.e2e_s
