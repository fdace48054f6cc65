"""Load strategies, one per kind of load point: closed loop (N workers) and open loop (a request rate).

A conversation is replayed turn by turn and each later turn carries the model's own earlier replies,
as a chat user would. Every finished request is handed to `on_record` at once (the store appends it to
disk), so nothing finished is lost if the run stops.

A point runs in this process, or, at high concurrency, split over client processes (load/workers.py):
each runs the same strategy on its share of the slots and of the planned conversations (`share`,
`owner`), on the same clock and t0, and hands its records back to this process.
"""

from __future__ import annotations

import asyncio
import itertools
import math
import os
import time
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Collection, Iterable, Iterator, Sequence
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
# Automatic client processes (LoadSpec.client_processes unset): a point with at least this many slots is
# split, one process per STREAMS_PER_PROCESS slots, up to the usable cores. One Python process keeps a few
# hundred streams' timestamps honest; at 768 or 1024 paced streams its event loop falls behind (measured
# with benchmarks/client_overhead.py: on 2 cores, 2 processes halve the TTFT error at 768 streams).
AUTO_PROCESSES_FROM = 512
STREAMS_PER_PROCESS = 256


@dataclass(frozen=True)
class PointKey:
    """What every record sent at this point carries: ids from the stored plan."""

    config_id: str
    point_id: str
    repeat: int = 0
    attempt: int = 0  # which attempt at the point (a resume adds one): the clock its records' times count from


@dataclass
class PointTraffic:
    """The requests one strategy sent at one point, and how long the point took."""

    records: list[RequestRecord] = field(default_factory=list)
    wall_s: float = 0.0
    t0: float = 0.0  # time.perf_counter() when the point started: every record's start_s counts from it
    processes: int = 1  # client processes that sent it


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
                 warmup: bool, t0: float | None = None, relay: bool = False) -> None:
        """`t0`: the point's start on time.perf_counter() (a client process gets its parent's). `relay`: this is
        a client process's part of the point: records go to `on_record` only (the parent keeps them and
        enforces max_error_rate over every process)."""
        self.client, self.load, self.model, self.key = client, load, model, key
        self.on_record, self.warmup, self.relay = on_record, warmup, relay
        self.t0 = time.perf_counter() if t0 is None else t0
        self.result = PointTraffic(t0=self.t0)
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
                    attempt=self.key.attempt, conversation_id=conv.id, turn=turn, category=conv.category,
                    warmup=self.warmup,
                    scheduled_s=scheduled_s if turn == 0 else None,
                )
                record.queued_s = time.perf_counter() - ready if turn == 0 else 0.0
                text = await self.client.send(build_request(conv, turn, history, self.load, self.model),
                                              record, self.t0)
                self.deliver(record)
                if not record.ok:
                    return
                history.append(text)
        finally:
            if slot is not None:
                slot.release()

    def deliver(self, record: RequestRecord) -> None:
        """A finished request: kept, handed on, and counted against the error-rate limit."""
        if self.relay:
            self.on_record(record)
            return
        self.result.records.append(record)
        self.on_record(record)
        self._count(record)

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

    @property
    @abstractmethod
    def slots(self) -> int | None:
        """The most requests it keeps in flight (None: no limit)."""

    @abstractmethod
    def share(self, slots: int | None) -> Strategy:
        """The same strategy with `slots` of its slots: one client process's part of the point. Which planned
        conversations that process sends is `owner`'s; plans (and so send times) stay the whole point's."""


class ClosedLoop(Strategy):
    """N workers; each starts its next conversation the moment its previous one ends. With duration_s,
    the workload is cycled until that long has passed and the point has its request floor."""

    def __init__(self, point: ConcurrencyPoint, load: LoadSpec) -> None:
        self.point, self.load = point, load
        self.concurrency = point.concurrency
        self.duration_s = load.duration_s

    @property
    def slots(self) -> int:
        return self.concurrency

    def share(self, slots: int | None) -> ClosedLoop:
        assert slots is not None and slots >= 1
        return ClosedLoop(self.point.model_copy(update={"concurrency": slots}), self.load)

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
        self.point, self.load = point, load

    @property
    def slots(self) -> int | None:
        return self.point.max_concurrency

    def share(self, slots: int | None) -> OpenLoop:
        return OpenLoop(self.point.model_copy(update={"max_concurrency": slots}), self.load)

    def plan(self, conversations: Sequence[Conversation], seed: str) -> Planned:
        p = self.point
        return zip(conversations, arrival_times(p.arrival, p.rate, len(conversations), seed, p.burstiness))

    async def drive(self, traffic: Traffic, planned: Planned) -> None:
        slot = asyncio.Semaphore(self.point.max_concurrency) if self.point.max_concurrency else None
        started: list[asyncio.Task[None]] = []
        try:
            for conv, at in planned:
                assert at is not None
                while (delay := at - traffic.elapsed()) > 0:  # uvloop's millisecond timers can wake early:
                    await asyncio.sleep(delay)  # never send before the schedule
                started.append(asyncio.create_task(traffic.conversation(conv, scheduled_s=at, slot=slot)))
            await _gather(started)
        except BaseException:
            await _cancel(started)
            raise


# The registry: a load point's `kind` selects its strategy.
STRATEGIES: dict[str, Callable[[Any, LoadSpec], Strategy]] = {"concurrency": ClosedLoop, "rate": OpenLoop}


def point_strategy(point: ConcurrencyPoint | RatePoint, load: LoadSpec) -> Strategy:
    return STRATEGIES[point.kind](point, load)


def planned_todo(strategy: Strategy, point: ConcurrencyPoint | RatePoint, conversations: Sequence[Conversation],
                 load: LoadSpec, skip: Collection[str] | None) -> Planned:
    """The point's plan without the conversations in `skip`. Deterministic: every client process
    computes the same one and takes its own items (`owner`)."""
    planned = strategy.plan(conversations, seed=f"{load.seed}:{point.id}")
    return ((c, at) for c, at in planned if not skip or c.id not in skip)


def split_slots(slots: int | None, processes: int) -> list[int | None]:
    """Each client process's share of a point's slots: as even as can be (None: no limit, for each)."""
    if slots is None:
        return [None] * processes
    assert 1 <= processes <= slots
    return [slots // processes + (i < slots % processes) for i in range(processes)]


def owner(index: int, slots: int | None, processes: int) -> int:
    """Which client process sends the `index`-th planned conversation: slot s of the point belongs to process
    s % processes (so process i holds split_slots' i-th share), and conversations go round the slots, so each
    process gets conversations in proportion to its slots and the first `slots` of them start at once."""
    return (index % (slots or processes)) % processes


def client_processes(point: ConcurrencyPoint | RatePoint, load: LoadSpec, warmup: bool = False) -> int:
    """How many client processes send this point: `load.client_processes`, or automatically one per
    STREAMS_PER_PROCESS slots from AUTO_PROCESSES_FROM slots on, up to the usable cores; never more than
    the point's slots, and 1 for warm-up (a few requests, excluded from results)."""
    slots = point.slots
    if warmup:
        return 1
    wanted = load.client_processes
    if wanted is None:
        if slots is None or slots < AUTO_PROCESSES_FROM:
            return 1
        wanted = min(usable_cores(), math.ceil(slots / STREAMS_PER_PROCESS))
    return max(1, min(wanted, slots or wanted))


def usable_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


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
    keep the send times they were planned with, so a resumed point offers the same schedule. With more
    than one client process (`client_processes`), load/workers.py sends them and `on_record` still gets
    every finished request here, as it finishes."""
    processes = client_processes(point, load, warmup)
    if processes > 1:
        from specmeter.load.workers import run_point_in_processes  # imports this module

        return await run_point_in_processes(processes, client, point, conversations, load, model, key, on_record,
                                            warmup=warmup, skip=skip)
    strategy = point_strategy(point, load)
    todo = planned_todo(strategy, point, conversations, load, skip)
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
