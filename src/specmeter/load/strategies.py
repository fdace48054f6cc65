"""How a point's conversations are offered to the server: the strategy a load kind (load/kinds/) drives its
points with, and what every strategy shares (its plan without what was already measured, the cycled workload).

A point runs in this process, or, at high concurrency, split over client processes (load/workers.py): each
runs the same strategy on its share of the slots and of the planned conversations (`share`, load/split.py's
`owner`), on the same clock and t0, and hands its records back to this process.
"""

from __future__ import annotations

import asyncio
import itertools
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Collection, Iterable, Iterator, Sequence

from specmeter.config.models import LoadPoint, LoadSpec
from specmeter.data.model import Conversation
from specmeter.load.stops import PointProgress, StopCondition
from specmeter.load.traffic import Traffic

Planned = Iterable[tuple[Conversation, float | None]]


class Strategy(ABC):
    """How a point's conversations are offered to the server."""

    @abstractmethod
    def plan(self, conversations: Sequence[Conversation], seed: str) -> Planned:
        """Each conversation with its planned start offset (None: when a slot frees). Deterministic."""

    @abstractmethod
    async def drive(self, traffic: Traffic, planned: Planned) -> None:
        """Send every planned conversation (or until `traffic.stopped`, where the strategy heeds a clean end)."""

    @property
    @abstractmethod
    def slots(self) -> int | None:
        """The most requests it keeps in flight (None: no limit)."""

    @abstractmethod
    def share(self, slots: int | None) -> Strategy:
        """The same strategy with `slots` of its slots: one client process's part of the point. Which planned
        conversations that process sends is `owner`'s; plans (and so send times) stay the whole point's."""

    def stops(self) -> list[StopCondition[PointProgress]]:
        """Its own stop conditions, checked with the point's wherever it runs (in each client process: on that
        process's share). None by default."""
        return []


def planned_todo(strategy: Strategy, point: LoadPoint, conversations: Sequence[Conversation],
                 load: LoadSpec, skip: Collection[str] | None) -> Planned:
    """The point's plan without the conversations in `skip`. Deterministic: every client process
    computes the same one and takes its own items (`owner`)."""
    planned = strategy.plan(conversations, seed=f"{load.seed}:{point.id}")
    return ((c, at) for c, at in planned if not skip or c.id not in skip)


def cycled(conversations: Sequence[Conversation]) -> Iterator[Conversation]:
    """The workload over and over; repeated passes get ids `<id>#<pass>`."""
    if not conversations:
        return
    for pass_no in itertools.count():
        for conv in conversations:
            yield conv if pass_no == 0 else conv.model_copy(update={"id": f"{conv.id}#{pass_no + 1}"})


async def send_on_schedule(traffic: Traffic, planned: Planned, slot: asyncio.Semaphore | None) -> None:
    """Start each planned conversation at its offset on the point's clock (an open loop's, a trace's), whatever
    the server's speed, then wait for them all; `slot` caps how many are in flight (the wait is queued_s)."""
    started: list[asyncio.Task[None]] = []
    try:
        for conv, at in planned:
            assert at is not None
            while (delay := at - traffic.elapsed()) > 0:  # uvloop's millisecond timers can wake early:
                await asyncio.sleep(delay)  # never send before the schedule
            started.append(asyncio.create_task(traffic.conversation(conv, scheduled_s=at, slot=slot)))
        await gather(started)
    except BaseException:
        await cancel(started)
        raise


async def gather(aws: Sequence[Awaitable[None]]) -> None:
    """Every awaitable to the end; the first failure cancels the rest and is raised."""
    tasks = [asyncio.ensure_future(a) for a in aws]
    try:
        await asyncio.gather(*tasks)
    except BaseException:
        await cancel(tasks)
        raise


async def cancel(tasks: Sequence[asyncio.Future[None]]) -> None:
    for t in tasks:
        t.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
