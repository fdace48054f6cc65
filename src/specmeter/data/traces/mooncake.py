"""Mooncake JSONL (kvcache-ai/Mooncake, FAST25-release/README.md): one request a line, `timestamp` in milliseconds
from the trace's start, `input_length` and `output_length` in tokens, and `hash_ids`, one remapped hash per
512-token prefix block (equal ids, a prefix the KV cache can reuse).

AIPerf's extension of the format (ai-dynamo/aiperf, src/aiperf/dataset/loader/models.py, MooncakeTrace) carries the
prompt itself instead of its length, as `text_input` or as an OpenAI chat list in `messages`; exactly one of
input_length, text_input and messages, and hash_ids only beside input_length, as AIPerf reads these rows. Its
`session_id` is kept. The keys AIPerf uses to reshape what is sent or when (payload, tools, extra, delay,
message_mode) are refused: this reader replays a row's arrival, lengths and text, and dropping them would send
something else than the row says.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from specmeter.data._rows import at, iter_jsonl, optional_str, require_text, row_error
from specmeter.data.traces._fields import Stamped, hash_list, required, seconds, shown, tokens

BLOCK_TOKENS = 512
PROMPT_KEYS = ("input_length", "text_input", "messages")
NOT_REPLAYED = ("payload", "tools", "extra", "delay", "message_mode")
SIGNATURE = frozenset({"timestamp", "output_length", *PROMPT_KEYS})


def parse(text: str, source: str) -> Iterator[Stamped]:
    """The requests of a Mooncake JSONL text, in file order."""
    for line, row in iter_jsonl(text, source):
        where = at(source, line)
        for key in NOT_REPLAYED:
            if key in row:
                raise row_error(where, key, "is an AIPerf key this reader does not replay",
                                "drop it, or replay the file with AIPerf")
        written = required(row, "timestamp", where, "each request its arrival in milliseconds from the trace's start")
        fields: dict[str, Any] = {
            **_prompt(row, where),
            "output_length": tokens(required(row, "output_length", where, "the output length in tokens"), where,
                                    "output_length"),
            "session_id": optional_str(row, "session_id", where),
        }
        yield Stamped(line, seconds(written, where, "timestamp", scale=0.001), shown(written), fields)


def _prompt(row: dict[str, Any], where: str) -> dict[str, Any]:
    """The row's one prompt: its length (with its block hashes), its text, or its chat messages."""
    given = [key for key in PROMPT_KEYS if row.get(key) is not None]
    if len(given) != 1:
        problem = "is missing" if not given else f"conflicts with {given[1]!r}"
        raise row_error(where, given[0] if given else "input_length", problem,
                        "give exactly one of input_length (tokens), text_input (the prompt) or messages (a chat list)")
    if given[0] != "input_length" and row.get("hash_ids") is not None:
        raise row_error(where, "hash_ids", f"hash input_length's blocks, but the row gives {given[0]}",
                        "drop hash_ids, or give input_length instead of the text")
    if given[0] == "text_input":
        return {"text_input": require_text(row["text_input"], where, "text_input")}
    if given[0] == "messages":
        return {"messages": _messages(row["messages"], where)}
    hashes = row.get("hash_ids")
    return {"input_length": tokens(row["input_length"], where, "input_length"),
            "hash_ids": None if hashes is None else hash_list(hashes, where)}


def _messages(value: Any, where: str) -> list[dict[str, Any]]:
    """A chat list as AIPerf takes it: message objects, each with a role (the history replayed as written)."""
    if not isinstance(value, list) or not value:
        raise row_error(where, "messages", "must be a non-empty list of chat messages")
    for index, message in enumerate(value):
        if not isinstance(message, dict) or not isinstance(message.get("role"), str):
            raise row_error(where, f"messages[{index}]", 'must be an object with a "role"')
    return value
