"""The OpenAI-compatible streaming shapes every engine shares: chat and completions chunks, usage, error
bodies and SSE framing. Standard library only: the paced server (its own process) builds on it too."""

from __future__ import annotations

import json
from typing import Any

DONE = b"data: [DONE]\n\n"


def completion_id(chat: bool, n: int | str) -> str:
    return f"{'chatcmpl' if chat else 'cmpl'}-{n}"


def chunk(rid: str, chat: bool, created: int, model: str, choices: list[dict[str, Any]],
          usage: dict[str, Any] | None = None, **extra: Any) -> dict[str, Any]:
    """One streamed chunk (`usage` left out when None; `extra`: engine-specific top-level fields)."""
    out: dict[str, Any] = {"id": rid, "object": "chat.completion.chunk" if chat else "text_completion",
                           "created": created, "model": model, "choices": choices}
    if usage is not None:
        out["usage"] = usage
    out.update(extra)
    return out


def choice(chat: bool, text: Any, finish: Any = None, token_ids: list[int] | None = None,
           role: bool = False, **extra: Any) -> dict[str, Any]:
    """A streamed choice: `delta.content` (chat; with the assistant role on the first one) or `text`."""
    out: dict[str, Any]
    if chat:
        delta: dict[str, Any] = {"role": "assistant", "content": text} if role else (
            {"content": text} if text is not None else {})
        out = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
    else:
        out = {"index": 0, "text": text if text is not None else "", "logprobs": None, "finish_reason": finish,
               "stop_reason": None}
    if token_ids is not None:
        out["token_ids"] = token_ids
    out.update(extra)
    return out


def usage(prompt_tokens: int, completion_tokens: int) -> dict[str, int]:
    return {"prompt_tokens": prompt_tokens, "total_tokens": prompt_tokens + completion_tokens,
            "completion_tokens": completion_tokens}


def sse(obj: Any, compact: bool = False) -> bytes:
    """One server-sent event carrying `obj` as JSON."""
    text = json.dumps(obj, separators=(",", ":")) if compact else json.dumps(obj)
    return b"data: " + text.encode() + b"\n\n"


def error_body(status: int, message: str, type_: str) -> dict[str, Any]:
    """The OpenAI-style error object vLLM (and the others' OpenAI layers) answer with."""
    return {"error": {"message": message, "type": type_, "param": None, "code": status}, "object": "error"}


def model_card(model: str, owned_by: str, created: int, max_model_len: int) -> dict[str, Any]:
    """One entry of /v1/models."""
    return {"id": model, "object": "model", "created": created, "owned_by": owned_by, "root": model,
            "parent": None, "max_model_len": max_model_len, "permission": []}
