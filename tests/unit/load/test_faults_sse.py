"""Property tests of the SSE line parser: whatever bytes a server sends, parse_sse_line either consumes
the line or raises StreamError (which the client turns into an error kind). Anything else would escape
OpenAIClient.send and take the whole run down with it.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from specmeter.common.errors import StreamError
from specmeter.load.sse import StreamResult, parse_sse_line

KEYS = ["choices", "usage", "error", "delta", "content", "reasoning_content", "text", "finish_reason",
        "completion_tokens", "prompt_tokens", "metrics", "speculative_decoding", "message", "index", "id"]

json_scalars = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text(max_size=20)
json_values = st.recursive(
    json_scalars,
    lambda inner: (st.lists(inner, max_size=3)
                   | st.dictionaries(st.sampled_from(KEYS) | st.text(max_size=8), inner, max_size=4)),
    max_leaves=10,
)


@st.composite
def chunk_like(draw: st.DrawFn) -> dict[str, Any]:
    """Objects shaped like OpenAI stream chunks, each field usually right and sometimes of the wrong type."""
    def field(right: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
        return st.one_of(right, right, json_scalars, json_values)

    delta = st.fixed_dictionaries({}, optional={"content": field(st.text(max_size=5)),
                                                "reasoning_content": field(st.text(max_size=5)),
                                                "role": field(st.just("assistant"))})
    choice = st.fixed_dictionaries({}, optional={
        "delta": field(delta),
        "text": field(st.text(max_size=5)),
        "finish_reason": field(st.sampled_from(["stop", "length"]) | st.none()),
        "index": field(st.just(0)),
    })
    usage = st.fixed_dictionaries({}, optional={"completion_tokens": field(st.integers(0, 10**6)),
                                                "prompt_tokens": field(st.integers(0, 10**6))})
    return draw(st.fixed_dictionaries({"choices": field(st.lists(field(choice), max_size=2))}, optional={
        "usage": field(usage),
        "error": json_values,
        "metrics": json_values,
    }))


def _encode(obj: Any) -> bytes:
    return json.dumps(obj).encode()


sse_lines = st.one_of(
    st.binary(max_size=200),  # anything at all
    st.binary(max_size=200).map(lambda b: b"data:" + b),
    st.binary(max_size=200).map(lambda b: b"data: " + b + b"\n"),
    json_values.map(lambda v: b"data: " + _encode(v) + b"\n"),
    chunk_like().map(lambda v: b"data: " + _encode(v) + b"\n"),
    st.sampled_from([b"data: [DONE]\n", b"\n", b": keep-alive\n", b"event: error\n", b"data:\n", b"data: \xff\n"]),
)

HOSTILE = [
    b"data: " + b"[" * 100_000 + b"]" * 100_000 + b"\n",  # RecursionError inside json
    b'data: {"choices": [], "usage": {"completion_tokens": ' + b"9" * 5000 + b"}}\n",  # ValueError: int digits limit
    b"data: " + b"1" * 5000 + b"\n",
    b'data: {"choices": [{"delta": {"content": 5}}]}\n',
    b'data: {"choices": [{"text": "a", "finish_reason": {"x": 1}}]}\n',
    b'data: {"error": {"message": {"nested": [1, 2]}}}\n',
    b'data: {"choices": [{"delta": {"content": "a"}}], "usage": {"completion_tokens": 1e400}}\n',
    b"data: \xef\xbb\xbf{}\n",
    b"data: NaN\n",
]


def _feed(lines: list[bytes]) -> StreamResult:
    out = StreamResult()
    for i, line in enumerate(lines):
        try:
            parse_sse_line(line, float(i), out)
        except StreamError as exc:
            assert exc.kind in {"malformed", "stream_error"}
            assert str(exc)
    return out


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(sse_lines, max_size=8))
@example([HOSTILE[0]])
@example([HOSTILE[1]])
@example([HOSTILE[2]])
def test_parse_sse_line_raises_only_stream_error(lines: list[bytes]) -> None:
    _feed(lines)  # any exception other than StreamError fails the test


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(chunk_like().map(lambda v: b"data: " + _encode(v) + b"\n") | sse_lines, max_size=6))
@example([HOSTILE[3]])
@example([HOSTILE[4]])
@example([b'data: {"choices": [{"finish_reason": 1}]}\n'])
@example([b'data: {"choices": [], "usage": {"completion_tokens": "24"}}\n'])
def test_parsed_stream_state_keeps_its_types(lines: list[bytes]) -> None:
    """What the parser keeps must be what the client later uses it as: text is str (it is joined),
    token counts are ints, and the three per-chunk lists stay aligned."""
    out = StreamResult()
    for i, line in enumerate(lines):
        try:
            parse_sse_line(line, float(i), out)
        except StreamError:
            pass
    assert all(isinstance(t, str) for t in out.text_parts), out.text_parts
    assert len(out.text_parts) == len(out.chunk_offsets) == len(out.chunk_cum_tokens)
    assert all(c is None or isinstance(c, int) for c in out.chunk_cum_tokens)
    assert out.finish_reason is None or isinstance(out.finish_reason, str), out.finish_reason
    assert out.usage is None or isinstance(out.usage, dict)
    for key in ("prompt_tokens", "completion_tokens"):  # copied onto the record and summed per level
        val = (out.usage or {}).get(key)
        assert val is None or (isinstance(val, int) and not isinstance(val, bool)), (key, val)
    assert out.final_payload is None or isinstance(out.final_payload, dict)
    "".join(out.text_parts)


@pytest.mark.parametrize("line", HOSTILE, ids=lambda b: repr(b[:40]))
def test_hostile_lines_raise_stream_error_or_nothing(line: bytes) -> None:
    try:
        parse_sse_line(line, 0.0, StreamResult())
    except StreamError:
        pass


def test_done_and_non_data_lines() -> None:
    out = StreamResult()
    for line in [b": ping\n", b"event: message\n", b"\n", b"data: [DONE]\n"]:
        parse_sse_line(line, 0.0, out)
    assert out.saw_done and out.text_parts == []


def test_error_event_is_a_stream_error() -> None:
    try:
        parse_sse_line(b'data: {"error": {"message": "boom", "code": 500}}\n', 0.0, StreamResult())
    except StreamError as exc:
        assert exc.kind == "stream_error" and "boom" in str(exc)
    else:
        raise AssertionError("an error event must raise StreamError")
