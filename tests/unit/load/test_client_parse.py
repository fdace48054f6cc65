"""SSE parsing and per-chunk token accounting (load/client.py) on a real vLLM stream.

chat_stream.sse is the raw body of a streaming chat request to vLLM 0.32 CPU (draft_model = target, K=3,
temperature 0, max_tokens 24, stream_options include_usage + continuous_usage_stats). The send() tests
replay bytes from a local aiohttp stub on 127.0.0.1: no engine is needed.
"""

from __future__ import annotations

import asyncio
import json
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from hypothesis import given, settings
from hypothesis import strategies as st

from fakeengine.threaded import serve_post
from specmeter.common.errors import StreamError
from specmeter.engines.vllm import VLLMStats
from specmeter.load.client import OpenAIClient, RequestSpec
from specmeter.load.sse import StreamResult, chunk_tokens, parse_sse_line
from specmeter.metrics.requests import with_sd
from specmeter.schemas.records import RequestRecord

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "vllm"
STREAM = (FIXTURES / "chat_stream.sse").read_bytes()
K = 3  # the capture's num_speculative_tokens


def stream_lines(body: bytes = STREAM) -> list[bytes]:
    return body.splitlines(keepends=True)


def events(body: bytes = STREAM) -> list[dict[str, Any]]:
    out = []
    for line in body.splitlines():
        if line.startswith(b"data:") and line[5:].strip() != b"[DONE]":
            out.append(json.loads(line[5:]))
    return out


def parse_all(lines: list[bytes]) -> StreamResult:
    out = StreamResult()
    for i, line in enumerate(lines):
        parse_sse_line(line, 0.01 * i, out)
    return out


def new_record() -> RequestRecord:
    return RequestRecord(config_id="ngram-k4", point_id="c1", conversation_id="c0")


# ---- the real capture ----------------------------------------------------------------------------


def test_real_stream_content_chunks_and_final_usage() -> None:
    out = parse_all(stream_lines())
    evs = events()
    final = evs[-1]
    assert final["choices"] == []  # vLLM's final usage chunk
    assert out.saw_done
    assert out.final_payload == final
    assert out.final_payload["metrics"]["speculative_decoding"]["num_spec_tokens"] == K
    assert out.finish_reason == "length"
    assert out.usage == final["usage"]
    total = final["usage"]["completion_tokens"]
    assert total == 24  # max_tokens of the request
    # The first event is the role announcement with 0 completion tokens: not an output chunk.
    assert evs[0]["choices"][0]["delta"].get("role") == "assistant"
    assert evs[0]["usage"]["completion_tokens"] == 0
    content_events = [e for e in evs if e["choices"] and e["usage"]["completion_tokens"] > 0]
    assert len(out.chunk_offsets) == len(out.text_parts) == len(out.chunk_cum_tokens) == len(content_events)
    assert out.chunk_cum_tokens == [e["usage"]["completion_tokens"] for e in content_events]
    # Chunks whose tokens decode to no text still count (the tiny model emits such tokens).
    assert "" in out.text_parts
    assert "".join(out.text_parts) == "".join(
        e["choices"][0]["delta"].get("content") or "" for e in evs if e["choices"])
    assert out.chunk_offsets == sorted(out.chunk_offsets)


def test_real_stream_tokens_per_chunk() -> None:
    out = parse_all(stream_lines())
    tokens = chunk_tokens(out.chunk_cum_tokens)
    assert tokens is not None
    total = out.usage["completion_tokens"] if out.usage else None
    assert sum(tokens) == total
    # First chunk = the prefill token; then one chunk per speculative step carrying accepted + 1
    # = K + 1 tokens (draft == target, greedy); the last step is cut by max_tokens.
    assert tokens[0] == 1
    assert all(t == K + 1 for t in tokens[1:-1])
    assert 1 <= tokens[-1] <= K + 1
    sd = out.final_payload["metrics"]["speculative_decoding"] if out.final_payload else {}
    assert len(tokens) - 1 == sd["num_spec_steps"]


def test_real_stream_finish_fills_the_record() -> None:
    out = parse_all(stream_lines())
    record = new_record()
    OpenAIClient("http://127.0.0.1:1")._finish(record, out, t_send=0.0)
    assert record.final_payload is not None and record.sd is None  # the client keeps it; the engine's stats parse it
    record = with_sd(record, VLLMStats())
    assert record.ok and record.error_kind is None
    assert record.output_tokens == 24
    assert record.prompt_tokens == events()[-1]["usage"]["prompt_tokens"]
    assert record.finish_reason == "length"
    assert record.ttft_s == out.chunk_offsets[0]
    assert record.chunk_offsets_s == out.chunk_offsets
    assert record.chunk_tokens == chunk_tokens(out.chunk_cum_tokens)
    assert record.sd is not None
    raw = events()[-1]["metrics"]["speculative_decoding"]
    assert record.sd_raw == raw
    assert record.sd.num_steps == raw["num_spec_steps"]
    assert record.sd.acceptance_length == pytest.approx(raw["mean_acceptance_length"])
    assert len(record.per_token_itl()) == len(record.chunk_offsets_s) - 1


def test_chunk_tokens_helper() -> None:
    assert chunk_tokens([1, 5, 9]) == [1, 4, 4]
    assert chunk_tokens([]) is None
    assert chunk_tokens([1, None, 3]) is None


# ---- crafted lines -------------------------------------------------------------------------------


@pytest.mark.parametrize("line", [b"\n", b"\r\n", b"", b": keep-alive\n", b"event: message\n", b"id: 7\n"])
def test_non_data_lines_are_ignored(line: bytes) -> None:
    out = StreamResult()
    parse_sse_line(line, 0.0, out)
    assert out == StreamResult()


def test_done_marker() -> None:
    out = StreamResult()
    parse_sse_line(b"data: [DONE]\n", 0.0, out)
    assert out.saw_done
    out2 = StreamResult()
    parse_sse_line(b"data:[DONE]", 0.0, out2)
    assert out2.saw_done


@pytest.mark.parametrize(
    "line",
    [
        b"data: {not json\n",
        b"data: \xff\xfe\xfd\n",
        b"data: [1, 2]\n",
        b'data: "text"\n',
        b'data: {"id": "x"}\n',
        b'data: {"choices": "nope"}\n',
        b'data: {"choices": [1]}\n',
    ],
)
def test_malformed_lines_raise_malformed(line: bytes) -> None:
    with pytest.raises(StreamError) as info:
        parse_sse_line(line, 0.0, StreamResult())
    assert info.value.kind == "malformed"


@pytest.mark.parametrize(
    ("line", "needle"),
    [
        (b'data: {"error": {"message": "out of KV cache", "code": 500}}\n', "out of KV cache"),
        (b'data: {"error": "engine died"}\n', "engine died"),
        (b'data: {"object": "error", "error": {"message": "x"}, "choices": []}\n', "x"),
    ],
)
def test_error_event_gives_stream_error(line: bytes, needle: str) -> None:
    with pytest.raises(StreamError) as info:
        parse_sse_line(line, 0.0, StreamResult())
    assert info.value.kind == "stream_error"
    assert needle in str(info.value)


def test_completions_chunks_use_text() -> None:
    out = StreamResult()
    parse_sse_line(b'data: {"choices": [{"index": 0, "text": " is"}], "usage": {"completion_tokens": 1}}', 0.1, out)
    parse_sse_line(b'data: {"choices": [{"index": 0, "text": " is is", "finish_reason": "length"}], '
                   b'"usage": {"completion_tokens": 3}}', 0.2, out)
    assert out.text_parts == [" is", " is is"]
    assert out.chunk_cum_tokens == [1, 3]
    assert out.finish_reason == "length"
    assert chunk_tokens(out.chunk_cum_tokens) == [1, 2]


def test_chunks_without_usage_still_time_text() -> None:
    out = StreamResult()
    parse_sse_line(b'data: {"choices": [{"delta": {"content": "hi"}}]}', 0.5, out)
    parse_sse_line(b'data: {"choices": [{"delta": {"content": ""}}]}', 0.6, out)  # nothing new: not a chunk
    assert out.text_parts == ["hi"] and out.chunk_offsets == [0.5] and out.chunk_cum_tokens == [None]
    assert chunk_tokens(out.chunk_cum_tokens) is None


def test_reasoning_delta_is_output() -> None:
    # vLLM 0.32 streams reasoning text in delta.reasoning (reasoning_content is its deprecated name).
    out = StreamResult()
    parse_sse_line(b'data: {"choices": [{"delta": {"reasoning": "think"}}]}', 0.1, out)
    parse_sse_line(b'data: {"choices": [{"delta": {"reasoning_content": "old"}}]}', 0.2, out)
    parse_sse_line(b'data: {"choices": [{"delta": {"content": "answer"}}]}', 0.3, out)
    assert out.text_parts == ["think", "old", "answer"]
    assert out.chunk_offsets == [0.1, 0.2, 0.3]


@pytest.mark.parametrize("content", [b"5", b"[\"a\"]", b"{\"x\": 1}", b"true"])
def test_non_string_content_never_becomes_text(content: bytes) -> None:
    out = StreamResult()
    line = b'data: {"choices": [{"delta": {"content": ' + content + b'}}], "usage": {"completion_tokens": 1}}'
    try:
        parse_sse_line(line, 0.0, out)
    except StreamError as exc:
        assert exc.kind == "malformed"
    assert all(isinstance(t, str) for t in out.text_parts)


# ---- property tests ------------------------------------------------------------------------------


@settings(max_examples=500, deadline=None)
@given(st.binary(max_size=200))
def test_arbitrary_bytes_only_raise_stream_error(line: bytes) -> None:
    for candidate in (line, b"data:" + line, b"data: " + line):
        out = StreamResult()
        try:
            parse_sse_line(candidate, 0.0, out)
        except StreamError as exc:
            assert exc.kind in {"malformed", "stream_error"}
        assert all(isinstance(t, str) for t in out.text_parts)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 50) | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda children: st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=6), children, max_size=3),
    max_leaves=8,
)


@st.composite
def openai_like_events(draw: st.DrawFn) -> dict[str, Any]:
    choice = draw(st.fixed_dictionaries({}, optional={
        "delta": st.fixed_dictionaries({}, optional={
            "content": json_values, "reasoning": json_values, "reasoning_content": json_values, "role": json_values,
        }) | json_values,
        "text": json_values,
        "finish_reason": json_values,
    }))
    return draw(st.fixed_dictionaries({}, optional={
        "choices": st.lists(st.just(choice) | json_values, max_size=2) | json_values,
        "usage": st.fixed_dictionaries({}, optional={"completion_tokens": json_values, "prompt_tokens": json_values})
        | json_values,
        "metrics": json_values,
        "error": json_values,
    }))


@settings(max_examples=500, deadline=None)
@given(st.lists(openai_like_events(), min_size=1, max_size=5))
def test_openai_like_events_only_raise_stream_error_and_keep_types(evs: list[dict[str, Any]]) -> None:
    out = StreamResult()
    for i, ev in enumerate(evs):
        try:
            parse_sse_line(b"data: " + json.dumps(ev).encode(), float(i), out)
        except StreamError:
            pass
    assert all(isinstance(t, str) for t in out.text_parts)
    assert all(c is None or isinstance(c, int) for c in out.chunk_cum_tokens)
    assert len(out.text_parts) == len(out.chunk_offsets) == len(out.chunk_cum_tokens)


# ---- send() against a local stub replaying bytes -------------------------------------------------


@asynccontextmanager
async def stub_server(body: bytes, status: int = 200) -> Any:
    async def handler(request: web.Request) -> web.StreamResponse:
        await request.read()
        if status != 200:
            return web.Response(status=status, text="engine overloaded\nretry later")
        resp = web.StreamResponse(status=200, headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        for line in stream_lines(body):
            await resp.write(line)
        await resp.write_eof()
        return resp

    async with serve_post("/v1/chat/completions", handler) as base:
        yield base


def run_send(body: bytes, status: int = 200) -> tuple[RequestRecord, str]:
    async def go() -> tuple[RequestRecord, str]:
        async with stub_server(body, status) as base:
            async with OpenAIClient(base, timeout_s=10) as client:
                record = new_record()
                text = await client.send(RequestSpec("/v1/chat/completions", {"stream": True}), record, 0.0)
                return record, text

    return asyncio.run(go())


def test_send_replays_real_stream() -> None:
    record, text = run_send(STREAM)
    assert record.ok, record.error
    assert record.http_status == 200
    assert record.output_tokens == 24
    assert record.chunk_tokens is not None and sum(record.chunk_tokens) == 24
    sd = with_sd(record, VLLMStats()).sd
    assert sd is not None and sd.num_steps == len(record.chunk_tokens) - 1
    assert record.ttft_s is not None and record.e2e_s is not None and 0 <= record.ttft_s <= record.e2e_s
    assert text == record.output_text


def _without_done(body: bytes) -> bytes:
    return b"".join(line for line in stream_lines(body) if b"[DONE]" not in line)


def _error_midway(body: bytes) -> bytes:
    lines = stream_lines(body)
    return b"".join(lines[:4]) + b'data: {"error": {"message": "engine died"}}\n\n'


@pytest.mark.parametrize(
    ("body", "status", "kind"),
    [
        (_without_done(STREAM), 200, "incomplete_stream"),
        (_error_midway(STREAM), 200, "stream_error"),
        (b"data: {oops\n\n", 200, "malformed"),
        (b"", 500, "http_5xx"),
        (b"", 429, "http_429"),
        (b"", 404, "http_4xx"),
        (b'data: {"choices": [{"delta": {"content": 5}}]}\n\ndata: [DONE]\n\n', 200, "malformed"),
    ],
    ids=["no_done", "error_event", "bad_json", "500", "429", "404", "non_string_content"],
)
def test_send_turns_failures_into_error_kinds(body: bytes, status: int, kind: str) -> None:
    record, text = run_send(body, status)  # never raises
    assert not record.ok
    assert record.error_kind == kind
    assert record.error and "\n" not in record.error
    assert text == ""
    if status != 200:
        assert record.http_status == status


def test_a_stream_whose_chunks_name_two_models_is_malformed() -> None:
    first, second = [line for line in stream_lines() if line.startswith(b"data: {")][:2]
    out = parse_all([first])
    assert out.model == "/tmp/tiny"  # the capture's
    spliced = second.replace(b'"model":"/tmp/tiny"', b'"model":"other/model"')
    assert spliced != second
    with pytest.raises(StreamError, match="other/model"):
        parse_sse_line(spliced, 1.0, out)
