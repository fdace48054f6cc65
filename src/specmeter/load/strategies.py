"""Closed-loop load: N workers, each replays whole conversations turn by turn.

A conversation keeps its concurrency slot across its turns, and each later turn carries the model's
own earlier replies, as a chat user would. Every finished request is handed to `on_record` at once
(the store appends it to disk), so nothing finished is lost if the run stops.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from specmeter.config import LoadSpec
from specmeter.data.model import Conversation
from specmeter.load.client import OpenAIClient
from specmeter.load.records import RequestRecord
from specmeter.load.requests import build_request

OnRecord = Callable[[RequestRecord], None]
# Errors below this many finished requests never trip the error-rate limit (one early failure
# is not a rate).
MIN_REQUESTS_FOR_ERROR_LIMIT = 8


class ErrorRateExceeded(Exception):
    def __init__(self, errors: int, finished: int, limit: float, last_error: str | None) -> None:
        super().__init__(
            f"{errors} of {finished} requests failed (limit {limit:.0%}); last error: {last_error}; "
            "check the server log, or raise --max-error-rate to keep going"
        )


@dataclass
class LevelResult:
    records: list[RequestRecord] = field(default_factory=list)
    wall_s: float = 0.0


def count_requests(conversations: Sequence[Conversation]) -> int:
    return sum(len(c.turns) for c in conversations)


async def run_level(
    client: OpenAIClient,
    conversations: Sequence[Conversation],
    concurrency: int,
    load: LoadSpec,
    model: str,
    phase: str,
    on_record: OnRecord,
    warmup: bool = False,
    skip: set[str] | None = None,
) -> LevelResult:
    """Send every turn of every conversation with at most `concurrency` conversations in flight.

    `skip` holds ids of conversations already fully measured (resume). A partly measured
    conversation is replayed whole: its later turns depend on replies of this server.
    """
    queue: asyncio.Queue[Conversation] = asyncio.Queue()
    for conv in conversations:
        if skip is None or conv.id not in skip:
            queue.put_nowait(conv)
    result = LevelResult()
    stats = {"finished": 0, "errors": 0}
    last_error: list[str | None] = [None]
    phase_t0 = time.perf_counter()

    async def worker() -> None:
        while True:
            try:
                conv = queue.get_nowait()
            except asyncio.QueueEmpty:
                return
            history: list[str] = []
            for turn in range(len(conv.turns)):
                ready = time.perf_counter()
                req = build_request(conv, turn, history, load, model)
                record = RequestRecord(
                    phase=phase, concurrency=concurrency, conversation_id=conv.id, turn=turn,
                    category=conv.category, warmup=warmup,
                )
                record.queued_s = time.perf_counter() - ready
                text = await client.send(req, record, phase_t0)
                result.records.append(record)
                on_record(record)
                stats["finished"] += 1
                if not record.ok:
                    stats["errors"] += 1
                    last_error[0] = record.error
                    _check_error_rate(stats, load.max_error_rate, last_error[0])
                    break  # later turns depend on this reply
                history.append(text)
                _check_error_rate(stats, load.max_error_rate, last_error[0])

    tasks = [asyncio.create_task(worker()) for _ in range(max(1, min(concurrency, queue.qsize())))]
    try:
        await asyncio.gather(*tasks)
    except BaseException:
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        raise
    finally:
        result.wall_s = time.perf_counter() - phase_t0
    return result


def _check_error_rate(stats: dict[str, int], limit: float, last_error: str | None) -> None:
    finished, errors = stats["finished"], stats["errors"]
    if finished >= MIN_REQUESTS_FOR_ERROR_LIMIT and errors / finished > limit:
        raise ErrorRateExceeded(errors, finished, limit, last_error)
