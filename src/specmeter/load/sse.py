"""The server-sent events of one OpenAI-compatible stream, parsed as they arrive: each read's bytes split into
lines, each `data:` line's JSON checked and kept (text, chunk arrival offsets, cumulative token counts, usage, the
closing metadata). A malformed event is a StreamError naming what was wrong."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from specmeter.common.errors import StreamError

ERROR_BODY_CHARS = 200


@dataclass
class StreamResult:
    """What the parser collected from one stream (filled in place so partial results survive)."""

    text_parts: list[str] = field(default_factory=list)
    chunk_offsets: list[float] = field(default_factory=list)
    chunk_cum_tokens: list[int | None] = field(default_factory=list)
    usage: dict[str, Any] | None = None
    final_payload: dict[str, Any] | None = None
    finish_reason: str | None = None
    saw_done: bool = False
    last_cum_tokens: int = 0
    token_ids: list[int] | None = None
    model: str | None = None  # the model the stream's chunks name (the first; a change mid-stream is malformed)
    pending: list[bytes] = field(default_factory=list)  # a line whose end has not arrived yet


_decode_json = json.JSONDecoder().raw_decode
# One SSE line longer than this is not an event stream (a runaway or hostile server): malformed.
MAX_LINE_BYTES = 16 << 20


def _loads(data: bytes) -> Any:
    """json.loads(data), minus its per-call encoding sniffing when the data is plainly a UTF-8 JSON object
    (any bytes else take json.loads itself, so both accept and reject exactly the same inputs)."""
    if data[:1] == b"{" and data[1:2] != b"\x00":  # json.detect_encoding would say utf-8
        text = data.decode("utf-8", "surrogatepass")
        obj, end = _decode_json(text)
        if end != len(text):  # `data` is stripped: anything left is what json.loads calls extra data
            raise ValueError(f"extra data at column {end + 1}")
        return obj
    return json.loads(data)


def _content_of(choice: dict[str, Any]) -> str:
    delta = choice.get("delta")
    if isinstance(delta, dict):
        # vLLM 0.32 streams reasoning as `reasoning`; `reasoning_content` is the older name.
        for key in ("content", "reasoning", "reasoning_content"):
            value = delta.get(key)
            if isinstance(value, str) and value:
                return value
        return ""
    text = choice.get("text")
    return text if isinstance(text, str) else ""


def parse_sse_line(line: bytes, t_rel: float, out: StreamResult) -> None:
    """Consume one SSE line into `out`. Raises StreamError('malformed'|'stream_error') on bad data."""
    if not line.startswith(b"data:"):
        return  # comments, event names, blank keep-alives
    data = line[5:].strip()
    if data == b"[DONE]":
        out.saw_done = True
        return
    try:
        obj = _loads(data)
    except (ValueError, RecursionError) as exc:  # JSONDecodeError, bad UTF-8, huge ints, deep nesting
        raise StreamError("malformed", f"stream line is not JSON: {data[:80]!r}") from exc
    if type(obj) is not dict:  # json gives plain dicts: no isinstance walk
        raise StreamError("malformed", f"stream event is not a JSON object: {data[:80]!r}")
    if "error" in obj:
        err = obj["error"]
        msg = err.get("message") if isinstance(err, dict) else err
        raise StreamError("stream_error", f"server error in stream: {str(msg)[:ERROR_BODY_CHARS]}")
    model = obj.get("model")
    if type(model) is str and model and model != out.model:  # ("" names nothing)
        if out.model is not None:  # one answer from two models: chunks of two servers spliced together
            raise StreamError("malformed", f"the stream names model {out.model[:80]!r}, then {model[:80]!r}")
        out.model = model
    usage = obj.get("usage")
    cum: int | None = None
    if type(usage) is dict:
        for key in ("prompt_tokens", "completion_tokens"):
            val = usage.get(key)
            if val is not None and (type(val) is not int or val < 0):  # bool is not int here
                raise StreamError("malformed", f"usage.{key} is {str(val)[:40]!r}, not a token count")
        out.usage = usage
        cum = usage.get("completion_tokens")
    choices = obj.get("choices")
    if type(choices) is not list:
        raise StreamError("malformed", f"stream event has no choices list: {data[:80]!r}")
    if not choices:
        # Chunks without choices carry the request's metadata: the usage (and vLLM's per-request metrics), and
        # on SGLang its speculative details in a chunk of their own before the usage. Keep every field.
        out.final_payload = obj if out.final_payload is None else {**out.final_payload, **obj}
        return
    choice = choices[0]
    if type(choice) is not dict:
        raise StreamError("malformed", "stream choice is not a JSON object")
    finish = choice.get("finish_reason")
    if finish is not None:
        if type(finish) is not str:
            raise StreamError("malformed", f"finish_reason is {type(finish).__name__}, not a string")
        if finish:
            out.finish_reason = finish
    if "metrics" in obj and type(obj["metrics"]) is dict:
        out.final_payload = obj
    ids = choice.get("token_ids")
    if ids is not None:
        if type(ids) is not list or not all(type(t) is int for t in ids):
            raise StreamError("malformed", f"token_ids is not a list of token ids: {str(ids)[:40]!r}")
        out.token_ids = (out.token_ids or []) + ids
    text = _content_of(choice)
    # A chunk carries output when it has text, or when the token count grew (tokens that decode to
    # no text, e.g. a partial UTF-8 sequence, still took a decode step).
    grew = cum is not None and cum > out.last_cum_tokens
    if text or grew:
        out.text_parts.append(text)
        out.chunk_offsets.append(t_rel)
        out.chunk_cum_tokens.append(cum)
        if cum is not None:
            out.last_cum_tokens = cum


def parse_sse_bytes(data: bytes, t_rel: float, out: StreamResult) -> None:
    """Consume bytes of the stream as they arrived (any split: several events, or part of one): every line
    they complete is parsed as `parse_sse_line` would, stamped `t_rel` (when its last byte arrived); an
    unfinished line waits in `out.pending`. Stops at [DONE]. `parse_sse_end` takes a last unterminated line."""
    if b"\n" not in data:  # the middle of a line: keep the piece (joined once, when the line ends)
        out.pending.append(data)
        if sum(map(len, out.pending)) > MAX_LINE_BYTES:
            raise StreamError("malformed", f"stream line longer than {MAX_LINE_BYTES} bytes")
        return
    if out.pending:
        out.pending.append(data)
        data = b"".join(out.pending)
        out.pending.clear()
    lines = data.split(b"\n")
    rest = lines.pop()
    if rest:
        out.pending.append(rest)
    for line in lines:
        if line.startswith(b"data:"):  # blank separators and comments cost nothing more
            parse_sse_line(line, t_rel, out)
            if out.saw_done:
                return


def parse_sse_end(t_rel: float, out: StreamResult) -> None:
    """The stream ended: its last line, if it had no newline, still counts (as aiohttp's readline gives it)."""
    if out.pending and not out.saw_done:
        line = b"".join(out.pending)
        out.pending.clear()
        parse_sse_line(line, t_rel, out)


def chunk_tokens(cum: list[int | None]) -> list[int] | None:
    """Tokens per content chunk from cumulative completion_tokens; None if any chunk lacks it."""
    if not cum or any(c is None for c in cum):
        return None
    out: list[int] = []
    prev = 0
    for c in cum:
        assert c is not None
        out.append(c - prev)
        prev = c
    return out
