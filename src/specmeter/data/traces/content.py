"""Acceptance-valid content for a trace: every row becomes a conversation of real text, so that a replay measures
the acceptance production traffic would get, not that of synthetic text.

Where the text comes from, row by row:
- the trace's own text (AIPerf's `text_input`, or `messages`: the user turns in order, the system prompt kept, the
  trace's assistant replies left to the model, as every multi-turn conversation here is replayed);
- otherwise the dataset's text, read as one stream per category (each row continuing where the previous row of its
  category stopped, so text repeats only once a category's stream runs out), cut to the row's input_length tokens
  of the target's tokenizer and checked to re-count within the tolerance; each row draws its category by the
  dataset's own mix (or the one given), seeded;
- random token ids only when asked (`random_tokens`), sent as ids, with the synthetic-bias warning.

Prefix sharing follows the trace: rows whose hash_ids agree on their leading ids (the same ids at the same
positions) get the same leading blocks of tokens, each block decoded on its own so the shared text is the same
string, and an engine's prefix cache reuses it as production's did. A follow-up (parent_chat_id) without hash_ids
begins with its parent's whole prompt, the history the service received, then text of its own to its length; the
parent's reply is not in the trace (only its length), so the row's own text stands in for it.

The output length is the trace's: each conversation's max_tokens, held exactly under load.ignore_eos as every
workload's own lengths are (data/selection.py's OutputPolicy).
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from specmeter.common.errors import InputError
from specmeter.config.trace import TraceSpec
from specmeter.data.model import Conversation
from specmeter.data.random_tokens import SYNTHETIC_BIAS
from specmeter.data.shaping import load_tokenizer
from specmeter.data.traces.model import Trace, TraceRow

TRACE_CATEGORY = "trace"  # rows carrying their own text: the trace names no category
CORRECTIONS = 4  # re-cuts of a row's own tail toward its length when decoding and re-counting moved it


@dataclass(frozen=True)
class Codec:
    """Text to the target's token ids and back (no special tokens: the server adds its own)."""

    encode: Callable[[str], list[int]]
    decode: Callable[[Sequence[int]], str]


def target_codec(tokenizer: str | None) -> Codec:
    """The target's own tokenizer as a codec (a local path or a cached hub id)."""
    tok = load_tokenizer(tokenizer, "a trace's dataset text")
    return Codec(encode=lambda text: list(tok.encode(text, add_special_tokens=False)),
                 decode=lambda ids: str(tok.decode(list(ids))))


@dataclass
class TraceWorkload:
    """The conversations of a trace, one per row in arrival order, and what to warn about their content."""

    conversations: list[Conversation]
    warnings: list[str] = field(default_factory=list)


@dataclass
class _Block:
    """One hash block's tokens as the first row that held it wrote them, and the blocks that follow it."""

    tokens: list[int]
    children: dict[int, _Block] = field(default_factory=dict)


class _Streams:
    """The dataset's text as one token stream per category, read on from where the last row stopped."""

    def __init__(self, source: Sequence[Conversation], codec: Codec, mix: dict[str, float] | None) -> None:
        texts: dict[str, list[str]] = {}
        for conv in source:
            texts.setdefault(conv.category, []).append("\n".join(p for p in (conv.system, *conv.turns) if p))
        if mix is not None:
            unknown = sorted(set(mix) - set(texts))
            if unknown:
                raise InputError(f"workload.trace.category_mix: no category {', '.join(unknown)} in the dataset; "
                                 f"available: {', '.join(sorted(texts))}")
            weights = {c: w for c, w in mix.items() if w > 0}
        else:
            weights = {c: float(len(t)) for c, t in texts.items()}
        self.categories = sorted(weights)
        self.weights = [weights[c] for c in self.categories]
        self.tokens = {c: codec.encode("\n\n".join(texts[c])) for c in self.categories}
        self.cursor = dict.fromkeys(self.categories, 0)
        self.wrapped: set[str] = set()

    def peek(self, category: str, n: int) -> list[int]:
        stream, at = self.tokens[category], self.cursor[category]
        if not stream:
            raise InputError(f"the dataset's {category} prompts hold no text to fill a trace's rows with")
        reps = math.ceil((at + n) / len(stream)) + 1
        return (stream * reps)[at:at + n] if at + n > len(stream) else stream[at:at + n]

    def advance(self, category: str, n: int) -> None:
        total = self.cursor[category] + n
        if total > len(self.tokens[category]):
            self.wrapped.add(category)
        self.cursor[category] = total % len(self.tokens[category])


def trace_conversations(trace: Trace, spec: TraceSpec, source: Sequence[Conversation] | None,
                        codec: Codec | None, vocab: tuple[int, list[int]] | None = None,
                        seed: int = 0) -> TraceWorkload:
    """One conversation per row of `trace`. `source`, `codec`: the dataset and the target's tokenizer, for rows
    without text (unless random_tokens); `vocab`: (vocab_size, special ids) for random_tokens."""
    rng = random.Random(f"{seed}:trace")
    streams = None
    allowed: list[int] = []
    if spec.random_tokens:
        if vocab is None:
            raise InputError("workload.trace.random_tokens needs the target's vocabulary (its config.json)")
        banned = set(vocab[1])
        allowed = [t for t in range(vocab[0]) if t not in banned]
    elif any(r.text_input is None and r.messages is None for r in trace.rows):
        if not source or codec is None:
            raise InputError(f"{trace.source}: its rows carry lengths, not text: name a dataset to fill them "
                             "(workload.dataset) and the target's tokenizer, or set workload.trace.random_tokens")
        streams = _Streams(source, codec, spec.category_mix)
    root = _Block([])
    chats: dict[int, list[list[int]]] = {}
    out: list[Conversation] = []
    for row in trace.rows:
        if row.output_length == 0:
            raise InputError(f"{trace.source} line {row.line}: output_length 0 is a request that failed in the "
                             "trace; replay a file without failed rows (BurstGPT's _without_fails files)")
        if row.text_input is not None or row.messages is not None:
            out.append(_own_text(trace, row))
            continue
        assert row.input_length is not None  # a reader gives a length where it gives no text
        if row.input_length == 0:
            raise InputError(f"{trace.source} line {row.line}: input_length 0 leaves no prompt to send; drop the row")
        prefix = _shared_prefix(trace, row, root, chats)
        category = "random" if streams is None else rng.choices(streams.categories, streams.weights)[0]

        def own(n: int, category: str = category) -> list[int]:
            if streams is None:
                return [rng.choice(allowed) for _ in range(n)]
            return streams.peek(category, n)

        blocks = _fill(trace, row, prefix, own, codec if streams is not None else None, spec.length_tolerance)
        if streams is not None:
            streams.advance(category, sum(len(b) for b in blocks[len(prefix):]))
        _remember(trace, row, blocks, root, chats)
        out.append(_conversation(row, blocks, len(prefix), category, codec if streams is not None else None))
    warnings = [SYNTHETIC_BIAS] if spec.random_tokens else []
    if streams is not None:
        warnings += [f"the dataset's {c} text is shorter than the trace asks of it: it repeats, and an engine's "
                     "prefix cache may reuse repeats the trace does not have; name a larger dataset"
                     for c in sorted(streams.wrapped)]
    return TraceWorkload(out, warnings)


def _shared_prefix(trace: Trace, row: TraceRow, root: _Block, chats: dict[int, list[list[int]]]) -> list[list[int]]:
    """The leading blocks the row shares with earlier rows: its hash_ids' matching leading blocks, or without
    hashes its parent's whole prompt."""
    if row.hash_ids and trace.block_tokens:
        blocks, node = [], root
        for h in row.hash_ids:
            child = node.children.get(h)
            if child is None:
                break
            blocks.append(child.tokens)
            node = child
        return blocks
    if row.parent_chat_id is not None and row.parent_chat_id in chats:
        return chats[row.parent_chat_id]
    return []


def _fill(trace: Trace, row: TraceRow, prefix: list[list[int]], own: Callable[[int], list[int]],
          codec: Codec | None, tolerance: float) -> list[list[int]]:
    """The row's blocks of tokens: the shared prefix (cut to its length), then its own tokens to the length, laid
    in the trace's blocks. With a codec (text), the own tail is re-cut until the decoded text counts within the
    tolerance of the row's length."""
    length = row.input_length
    assert length is not None
    shared: list[list[int]] = []
    used = 0
    for block in prefix:
        take = block[:length - used]
        if take:
            shared.append(take)
        used += len(take)
    own_n = length - used
    allowed = max(1, math.floor(tolerance * length))
    for _ in range(CORRECTIONS + 1):
        blocks = shared + _laid(trace, row, used, own(max(own_n, 0)))
        if codec is None:
            return blocks
        counted = len(codec.encode(_text(blocks, codec)))
        if abs(counted - length) <= allowed:
            return blocks
        if own_n <= 0:
            break
        own_n += length - counted
    raise InputError(f"{trace.source} line {row.line}: the dataset's text re-counts to {counted} tokens of the "
                     f"target's tokenizer, not within {allowed} of the row's {length}; widen "
                     "workload.trace.length_tolerance")


def _laid(trace: Trace, row: TraceRow, start: int, tokens: list[int]) -> list[list[int]]:
    """`tokens`, from token `start` of the prompt, split on the trace's block boundaries where the row has hashes
    (so each block can be shared on its own), else one block."""
    if not tokens:
        return []
    size = trace.block_tokens
    if not row.hash_ids or not size:
        return [tokens]
    blocks, at = [], 0
    while at < len(tokens):
        end = size - (start + at) % size  # to the next block boundary
        blocks.append(tokens[at:at + end])
        at += end
    return blocks


def _remember(trace: Trace, row: TraceRow, blocks: list[list[int]], root: _Block,
              chats: dict[int, list[list[int]]]) -> None:
    """Keep the row's blocks for the rows after it: under its hash path (a block a hash already names keeps its
    first tokens) and under its chat id."""
    if row.hash_ids and trace.block_tokens:
        node = root
        for h, tokens in zip(row.hash_ids, blocks):
            node = node.children.setdefault(h, _Block(tokens))
    if row.chat_id is not None:
        chats[row.chat_id] = blocks


def _text(blocks: list[list[int]], codec: Codec) -> str:
    """Each block decoded on its own, so rows sharing blocks share the text itself."""
    return "".join(codec.decode(b) for b in blocks)


def _metadata(row: TraceRow, **extra: Any) -> dict[str, Any]:
    links = {k: getattr(row, k) for k in ("chat_id", "parent_chat_id", "turn", "session_id") if getattr(row, k)
             is not None}
    return {"arrival_s": row.arrival_s, "trace_line": row.line, **links, **extra}


def _conversation(row: TraceRow, blocks: list[list[int]], shared: int, category: str,
                  codec: Codec | None) -> Conversation:
    shared_tokens = sum(len(b) for b in blocks[:shared])
    meta = _metadata(row, input_tokens=row.input_length, shared_tokens=shared_tokens)
    if codec is None:
        ids = [t for b in blocks for t in b]
        return Conversation(id=f"trace-{row.line}", category=category, turns=[f"<{len(ids)} random token ids>"],
                            raw_prompt=True, prompt_token_ids=ids, max_tokens=row.output_length,
                            metadata={**meta, "synthetic": True})
    return Conversation(id=f"trace-{row.line}", category=category, turns=[_text(blocks, codec)],
                        max_tokens=row.output_length, metadata=meta)


def _own_text(trace: Trace, row: TraceRow) -> Conversation:
    """A row carrying its prompt: text_input as one turn, or messages as the system prompt and the user turns."""
    meta = _metadata(row)
    category = row.request_type or TRACE_CATEGORY
    if row.text_input is not None:
        if not row.text_input.strip():
            raise InputError(f"{trace.source} line {row.line}: text_input is empty; give the prompt or a length")
        return Conversation(id=f"trace-{row.line}", category=category, turns=[row.text_input],
                            max_tokens=row.output_length, metadata=meta)
    assert row.messages is not None
    system: str | None = None
    turns: list[str] = []
    for i, message in enumerate(row.messages):
        role, content = message.get("role"), message.get("content")
        if not isinstance(content, str) or not content.strip():
            raise InputError(f"{trace.source} line {row.line}: message {i} has no text content; a replay sends "
                             "text messages only")
        if role == "system" and i == 0:
            system = content
        elif role == "user":
            turns.append(content)
        elif role != "assistant":  # the model's own reply takes an assistant message's place
            raise InputError(f"{trace.source} line {row.line}: message {i} has role {role!r}; a replay sends "
                             "a system prompt first, user turns and assistant replies")
    if not turns:
        raise InputError(f"{trace.source} line {row.line}: messages hold no user turn to send")
    return Conversation(id=f"trace-{row.line}", category=category, turns=turns, system=system,
                        max_tokens=row.output_length, metadata=meta)
