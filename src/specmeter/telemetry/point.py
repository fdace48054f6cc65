"""A point's telemetry on every replica of its server: the Prometheus text read right before it, the running-batch
gauge polled through it, the text read right after it; and the engine's clear-on-read feed, on one server only.

Each replica is read on its own (`reads`, one ReplicaReads each, on the attempt's clock): summarize sums their
counters and pools their batch samples (metrics/replicas.py), so nothing here decides what they add up to. A
feed clears on every read and counts one server's steps: over several replicas it is not read, and the summed
counters with the per-request stats give the point's SD.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from contextlib import AsyncExitStack
from types import TracebackType

from specmeter.schemas.capture import FeedRead, ReplicaReads, Scrape
from specmeter.telemetry.feed import FeedPoller
from specmeter.telemetry.gauge import Clock, GaugeSampler, wall_clock
from specmeter.telemetry.scrape import Fetch, scrape


class PointTelemetry:
    """`scrape_before()`, then `start(t0)`, then `async with telemetry:` around the point's traffic, then
    `scrape_after()`; `reads` holds each replica's, `feed_reads` the feed's (None: not read)."""

    def __init__(self, sources: Sequence[tuple[str, Fetch]], path: str, gauge: str | None,
                 feed_path: str | None, clock: Clock = wall_clock) -> None:
        """`sources`: each replica's base URL and GET; `gauge`: the running-batch gauge's name (None: the engine
        has none); `feed_path`: the engine's clear-on-read statistics (None: it has none); `clock`: the point's
        (a point taking turns with other servers' pauses for theirs and samples its gauge only on its own)."""
        self.fetches = [fetch for _, fetch in sources]
        self.clock = clock
        self.path, self.gauge = path, gauge
        self.feed_path = feed_path if len(sources) == 1 else None
        self.reads = [ReplicaReads(url=url) for url, _ in sources]
        self.t0 = 0.0
        self._samplers: list[GaugeSampler] = []
        self._poller: FeedPoller | None = None
        self._stack = AsyncExitStack()

    async def _scrape_all(self, t0: float) -> list[Scrape]:
        return list(await asyncio.gather(*(scrape(fetch, self.path, t0) for fetch in self.fetches)))

    async def scrape_before(self) -> None:
        """Every replica's text before the point, timed on time.perf_counter() until `start` gives the clock."""
        for read, before in zip(self.reads, await self._scrape_all(0.0)):
            read.before = before

    def start(self, t0: float) -> None:
        """The point's clock starts at `t0`: the scrapes before it move onto it."""
        self.t0 = t0
        for read in self.reads:
            if read.before is not None:
                read.before.at_s -= t0

    async def scrape_after(self) -> None:
        for read, after in zip(self.reads, await self._scrape_all(self.t0)):
            read.after = after

    @property
    def feed_reads(self) -> list[FeedRead] | None:
        return self._poller.reads if self._poller is not None else None

    async def __aenter__(self) -> PointTelemetry:
        if self.gauge is not None:
            self._samplers = [GaugeSampler(fetch, self.gauge, self.t0, path=self.path, clock=self.clock)
                              for fetch in self.fetches]
        if self.feed_path is not None:
            self._poller = FeedPoller(self.fetches[0], self.feed_path, self.t0)
        for sampler in self._samplers:
            await self._stack.enter_async_context(sampler)
        if self._poller is not None:  # drained on entry, read through the point and right after it
            await self._stack.enter_async_context(self._poller)
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        await self._stack.__aexit__(exc_type, exc, tb)
        for read, sampler in zip(self.reads, self._samplers):
            read.running = sampler.captured
