"""Clear-on-read statistics (trtllm-serve's JSON iteration stats): each GET of the feed's path answers what
accumulated since the previous read and clears it, so every answer is kept as it came.

`FeedPoller` reads the path right before a point (that answer is older than the point), polls it through the
point and once after it, and keeps each read (`FeedRead`). `replay` hands the reads, in order, to an engine's
`IterationFeed`, which accumulates them into the point's run-level counts: the same reads give the same counts,
whenever the capture is summarized again.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from abc import ABC, abstractmethod
from collections.abc import Sequence
from types import TracebackType
from typing import Any

from specmeter.schemas.capture import FeedRead
from specmeter.schemas.sd import SDCounts
from specmeter.telemetry.scrape import Fetch, why

DEFAULT_INTERVAL_S = 0.5


class IterationFeed(ABC):
    """An engine's accumulator of one point's clear-on-read answers: `mark` takes the answer read right before
    the point, `add` each one read through it and after it; the SD summary takes `counts()` when the Prometheus
    counters give no run-level counts and checks the two against each other when both exist."""

    path: str

    def __init__(self) -> None:
        self.reads = 0  # answers read through the point and added
        self.failed_reads = 0  # polls that got no answer: skipped, the next read still returns what is left
        # Answers that cannot be counted although the server may have cleared what they held (unparseable,
        # or the read after the point failed): `counts()` is then short by an unknown amount.
        self.lost: list[str] = []

    @abstractmethod
    def mark(self, payload: Any) -> None:
        """The answer read right before the point: not counted, but it tells where the point starts."""

    @abstractmethod
    def add(self, payload: Any) -> None:
        """One answer read during or right after the point."""

    @abstractmethod
    def counts(self) -> SDCounts | None:
        """The point's run-level SD counts from everything added (None: nothing the feed could count)."""

    @property
    @abstractmethod
    def missed(self) -> int:
        """Entries known to be missing (evicted by the server before a read got them)."""

    def incomplete(self) -> str | None:
        """Why `counts()` is less than the whole point, or None when nothing is known to be missing."""
        parts: list[str] = []
        if self.missed:
            # at least: iterations evicted before the first one read are only seen when `mark` read one
            parts.append(f"at least {self.missed} iterations were evicted from {self.path} before a read got them")
        if self.lost:
            parts.append(f"{len(self.lost)} answers of {self.path} could not be counted ({self.lost[0]})")
        return "; ".join(parts) or None


def replay(feed: IterationFeed, reads: Sequence[FeedRead]) -> IterationFeed:
    """`feed` after taking `reads` in order. A failed poll is skipped (the next read still returns what is left);
    a failed last read, an answer that is not JSON, or one the feed cannot take is recorded in `feed.lost`."""
    for read in reads:
        mark, last = read.phase == "mark", read.phase == "last"
        if read.text is None:
            if last:
                feed.lost.append(f"the read after the point failed ({read.error})")
            elif not mark:
                feed.failed_reads += 1
            continue
        try:
            payload = json.loads(read.text)
        except ValueError as exc:
            if not mark:
                feed.lost.append(f"an answer was not JSON ({why(exc)})")
            continue
        try:
            if mark:
                feed.mark(payload)
            else:
                feed.add(payload)
                feed.reads += 1
        except Exception as exc:  # garbage the feed cannot take: recorded, never a reason to fail the point
            if not mark:
                feed.lost.append(f"an answer could not be read ({why(exc)})")
    return feed


class FeedPoller:
    """`async with FeedPoller(fetch, path, t0):` around a point. On entry it reads `path` once (phase "mark");
    then it polls every `interval_s`, and on a clean exit lets the poll in flight finish (cancelling it could
    drop an answer the server has already cleared) and reads once more (phase "last"). `reads` keeps them all."""

    def __init__(self, fetch: Fetch, path: str, t0: float, interval_s: float = DEFAULT_INTERVAL_S,
                 timeout_s: float = 5.0) -> None:
        self.fetch, self.path, self.t0, self.interval_s, self.timeout_s = fetch, path, t0, interval_s, timeout_s
        self.reads: list[FeedRead] = []
        self._stop = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    async def _read(self, phase: str) -> None:
        try:
            text = await self.fetch(self.path, self.timeout_s)
        except Exception as exc:
            self.reads.append(FeedRead(at_s=time.perf_counter() - self.t0, phase=phase, error=why(exc)))
            return
        self.reads.append(FeedRead(at_s=time.perf_counter() - self.t0, phase=phase, text=text))

    async def _poll(self) -> None:
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stop.wait(), self.interval_s)
            if self._stop.is_set():
                return
            await self._read("poll")

    async def __aenter__(self) -> FeedPoller:
        await self._read("mark")
        self._task = asyncio.create_task(self._poll())
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        task, self._task = self._task, None
        if task is None:
            return
        if exc_type is not None:  # the point failed: nothing more is read
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
            return
        self._stop.set()
        await task
        await self._read("last")
