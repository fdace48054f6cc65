"""Load strategies, one per kind of load point: closed loop (N workers) and open loop (a request rate).

A conversation is replayed turn by turn and each later turn carries the model's own earlier replies,
as a chat user would. Every finished request is handed to `on_record` at once (the store appends it to
disk), so nothing finished is lost if the run stops.
"""

from __future__ import annotations

import asyncio
import itertools
import math
import time
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from specmeter.config import REQUESTS_PER_SLOT_FLOOR, ConcurrencyPoint, LoadSpec, RatePoint
from specmeter.data.model import Conversation
from specmeter.errors import ErrorRateExceeded
from specmeter.load.arrivals import arrival_times
from specmeter.load.client import OpenAIClient
from specmeter.load.requests import build_request
from specmeter.schemas.records import RequestRecord

OnRecord = Callable[[RequestRecord], None]
# Errors below this many finished requests never trip the error-rate limit (one early failure
# is not a rate).
MIN_REQUESTS_FOR_ERROR_LIMIT = 8


@dataclass(frozen=True)
class PointKey:
    """What every record sent at this point carries: ids from the stored plan."""

    config_id: str
    point_id: str
    repeat: int = 0


@dataclass
class PointTraffic:
    """The requests one strategy sent at one point, and how long the point took."""

    records: list[RequestRecord] = field(default_factory=list)
    wall_s: float = 0.0


def count_requests(conversations: Sequence[Conversation]) -> int:
    return sum(len(c.turns) for c in conversations)


def point_conversations(conversations: Sequence[Conversation], point: ConcurrencyPoint | RatePoint,
                        load: LoadSpec) -> list[Conversation]:
    """The conversations one point sends: the workload, cycled until the point has at least
    REQUESTS_PER_SLOT_FLOOR x N requests (N: its slots), or, with duration_s, `rate x duration`
    conversations at a rate point. Repeated passes get ids `<id>#<pass>`. Deterministic, so every
    configuration gets exactly this list, and resume finds the same ids."""
    floor = REQUESTS_PER_SLOT_FLOOR * (point.slots or 0)
    want_convs = 0
    if load.duration_s is not None and isinstance(point, RatePoint):
        want_convs = math.ceil(point.rate * load.duration_s)
    out: list[Conversation] = []
    requests = 0
    for n, conv in enumerate(_cycled(conversations)):
        if n >= len(conversations) and requests >= floor and len(out) >= want_convs:
            break
        out.append(conv)
        requests += len(conv.turns)
    return out


def _cycled(conversations: Sequence[Conversation]) -> Iterator[Conversation]:
    if not conversations:
        return
    for pass_no in itertools.count():
        for conv in conversations:
            yield conv if pass_no == 0 else conv.model_copy(update={"id": f"{conv.id}#{pass_no + 1}"})


class Traffic:
    """Sends conversations for one point and keeps its records, clock and error rate."""

    def __init__(self, client: OpenAIClient, load: LoadSpec, model: str, key: PointKey, on_record: OnRecord,
                 warmup: bool) -> None:
        self.client, self.load, self.model, self.key = client, load, model, key
        self.on_record, self.warmup = on_record, warmup
        self.result = PointTraffic()
        self.t0 = time.perf_counter()
        self._finished = self._errors = 0
        self._last_error: str | None = None  # of the latest failed request (the tipping one may have succeeded)

    def elapsed(self) -> float:
        return time.perf_counter() - self.t0

    async def conversation(self, conv: Conversation, scheduled_s: float | None = None,
                           slot: asyncio.Semaphore | None = None) -> None:
        """Every turn of `conv` in order; a failed turn ends it (later turns depend on its reply)."""
        ready = time.perf_counter()
        if slot is not None:
            await slot.acquire()
        try:
            history: list[str] = []
            for turn in range(len(conv.turns)):
                record = RequestRecord(
                    config_id=self.key.config_id, point_id=self.key.point_id, repeat=self.key.repeat,
                    conversation_id=conv.id, turn=turn, category=conv.category, warmup=self.warmup,
                    scheduled_s=scheduled_s if turn == 0 else None,
                )
                record.queued_s = time.perf_counter() - ready if turn == 0 else 0.0
                text = await self.client.send(build_request(conv, turn, history, self.load, self.model),
                                              record, self.t0)
                self.result.records.append(record)
                self.on_record(record)
                self._count(record)
                if not record.ok:
                    return
                history.append(text)
        finally:
            if slot is not None:
                slot.release()

    def _count(self, record: RequestRecord) -> None:
        self._finished += 1
        if not record.ok:
            self._errors += 1
            self._last_error = record.error
        limit = self.load.max_error_rate
        if self._finished >= MIN_REQUESTS_FOR_ERROR_LIMIT and self._errors / self._finished > limit:
            raise ErrorRateExceeded(self._errors, self._finished, limit, self._last_error)


Planned = Iterable[tuple[Conversation, float | None]]


class Strategy(ABC):
    """How a point's conversations are offered to the server."""

    @abstractmethod
    def plan(self, conversations: Sequence[Conversation], seed: str) -> Planned:
        """Each conversation with its planned start offset (None: when a slot frees). Deterministic."""

    @abstractmethod
    async def drive(self, traffic: Traffic, planned: Planned) -> None:
        """Send every planned conversation."""


class ClosedLoop(Strategy):
    """N workers; each starts its next conversation the moment its previous one ends. With duration_s,
    the workload is cycled until that long has passed and the point has its request floor."""

    def __init__(self, point: ConcurrencyPoint, load: LoadSpec) -> None:
        self.concurrency = point.concurrency
        self.duration_s = load.duration_s

    def plan(self, conversations: Sequence[Conversation], seed: str) -> Planned:
        source = _cycled(conversations) if self.duration_s is not None else iter(conversations)
        return ((c, None) for c in source)

    async def drive(self, traffic: Traffic, planned: Planned) -> None:
        queue = iter(planned)
        floor = REQUESTS_PER_SLOT_FLOOR * self.concurrency
        sent = [0]

        async def worker() -> None:
            for conv, _ in queue:
                await traffic.conversation(conv)
                sent[0] += len(conv.turns)
                if self.duration_s is not None and traffic.elapsed() >= self.duration_s and sent[0] >= floor:
                    return

        await _gather([worker() for _ in range(self.concurrency)])


class OpenLoop(Strategy):
    """Conversations start on seeded arrival times (the same for every configuration), whatever the
    server's speed; an optional cap bounds how many are in flight (the wait is recorded as queued_s)."""

    def __init__(self, point: RatePoint, load: LoadSpec) -> None:
        self.point = point

    def plan(self, conversations: Sequence[Conversation], seed: str) -> Planned:
        p = self.point
        return zip(conversations, arrival_times(p.arrival, p.rate, len(conversations), seed, p.burstiness))

    async def drive(self, traffic: Traffic, planned: Planned) -> None:
        slot = asyncio.Semaphore(self.point.max_concurrency) if self.point.max_concurrency else None
        started: list[asyncio.Task[None]] = []
        try:
            for conv, at in planned:
                assert at is not None
                delay = at - traffic.elapsed()
                if delay > 0:
                    await asyncio.sleep(delay)
                started.append(asyncio.create_task(traffic.conversation(conv, scheduled_s=at, slot=slot)))
            await _gather(started)
        except BaseException:
            await _cancel(started)
            raise


# The registry: a load point's `kind` selects its strategy.
STRATEGIES: dict[str, Callable[[Any, LoadSpec], Strategy]] = {"concurrency": ClosedLoop, "rate": OpenLoop}


async def run_point(
    client: OpenAIClient,
    point: ConcurrencyPoint | RatePoint,
    conversations: Sequence[Conversation],
    load: LoadSpec,
    model: str,
    key: PointKey,
    on_record: OnRecord,
    warmup: bool = False,
    skip: set[str] | None = None,
) -> PointTraffic:
    """Offer `conversations` at `point`. `skip` holds ids already fully measured (resume): the others
    keep the send times they were planned with, so a resumed point offers the same schedule."""
    strategy = STRATEGIES[point.kind](point, load)
    planned = strategy.plan(conversations, seed=f"{load.seed}:{point.id}")
    todo = ((c, at) for c, at in planned if not skip or c.id not in skip)
    traffic = Traffic(client, load, model, key, on_record, warmup)
    try:
        await strategy.drive(traffic, todo)
    finally:
        traffic.result.wall_s = traffic.elapsed()
    return traffic.result


async def _gather(aws: Sequence[Awaitable[None]]) -> None:
    tasks = [asyncio.ensure_future(a) for a in aws]
    try:
        await asyncio.gather(*tasks)
    except BaseException:
        await _cancel(tasks)
        raise


async def _cancel(tasks: Sequence[asyncio.Future[None]]) -> None:
    for t in tasks:
        t.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
