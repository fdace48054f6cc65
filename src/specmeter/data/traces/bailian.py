"""Alibaba Bailian JSONL (alibaba-edu/qwen-bailian-usagetraces-anon, README.md): one request a line, `chat_id`,
`parent_chat_id` (-1 for a request that starts a conversation), `timestamp` in seconds from the trace's start,
`input_length` and `output_length` in tokens, `type` (text, search, image or file), `turn`, and `hash_ids`, one
salted hash per 16-token block.

A follow-up's parent must not come later in the file: the replay sends a conversation's turns in order. A parent the
file does not hold at all is a turn from before the trace's slice began: the row is kept as it is (its input length
already holds the context the service received). `type` and `hash_ids` may be absent, as
AIPerf reads them (src/aiperf/dataset/loader/models.py, BailianTrace); every other key of the schema is required.
"""

from __future__ import annotations

from collections.abc import Iterator

from specmeter.data._rows import at, iter_jsonl, optional_str, row_error
from specmeter.data.traces._fields import Stamped, hash_list, required, seconds, shown, tokens, whole

BLOCK_TOKENS = 16
ROOT = -1
SIGNATURE = frozenset({"chat_id", "parent_chat_id", "turn"})  # the keys a Mooncake row does not have


def parse(text: str, source: str) -> Iterator[Stamped]:
    """The requests of a Bailian JSONL text, in file order."""
    chats: dict[int, int] = {}  # chat_id -> its line
    awaited: dict[int, int] = {}  # a parent not seen yet -> the first line that named it
    for line, row in iter_jsonl(text, source):
        where = at(source, line)
        chat = whole(required(row, "chat_id", where, "each request its chat_id"), where, "chat_id", 0,
                     "a chat id (a whole number, 0 or more)")
        if chat in chats:
            raise row_error(where, "chat_id", f"{chat} repeats line {chats[chat]}",
                            "give every request its own chat_id")
        parent = whole(required(row, "parent_chat_id", where, "-1 for a new conversation, else the chat it follows"),
                       where, "parent_chat_id", ROOT, "-1 (a new conversation) or an earlier chat_id")
        if chat in awaited:
            raise row_error(where, "chat_id", f"{chat} is the parent of line {awaited[chat]}, above it",
                            "put a conversation's turns in the order they arrived")
        if parent != ROOT and parent not in chats:
            awaited.setdefault(parent, line)
        chats[chat] = line
        written = required(row, "timestamp", where, "each request its arrival in seconds from the trace's start")
        hashes = row.get("hash_ids")
        yield Stamped(line, seconds(written, where, "timestamp"), shown(written), {
            "input_length": tokens(required(row, "input_length", where, "the input length in tokens"), where,
                                   "input_length"),
            "output_length": tokens(required(row, "output_length", where, "the output length in tokens"), where,
                                    "output_length"),
            "hash_ids": None if hashes is None else hash_list(hashes, where),
            "chat_id": chat,
            "parent_chat_id": parent,
            "turn": whole(required(row, "turn", where, "the request's turn, 1 for a conversation's first"), where,
                          "turn", 1, "a turn number (1 or more)"),
            "request_type": optional_str(row, "type", where),
        })
