"""Polls one engine gauge (the running-batch size) while a point runs, in the client's event loop."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from types import TracebackType

from specmeter.schemas.capture import GaugeSamples
from specmeter.telemetry.prometheus import gauge_sum
from specmeter.telemetry.scrape import Fetch

DEFAULT_INTERVAL_S = 0.5
# Seconds since a point's t0 on its clock, or None while the point is paused (another server's turn: load/turns.py).
Clock = Callable[[float], float | None]


def wall_clock(t0: float) -> float:
    return time.perf_counter() - t0


class GaugeSampler:
    """`async with GaugeSampler(fetch, name, t0):` collects (seconds since t0, value) pairs in `captured`. A failed
    scrape is skipped: the gauge is context, never a reason to fail the point. With a `clock` that pauses, nothing
    is read while it is paused, and a read that ends paused is dropped: the server was idle for others' turns."""

    def __init__(self, fetch: Fetch, name: str, t0: float, interval_s: float = DEFAULT_INTERVAL_S,
                 path: str = "/metrics", clock: Clock = wall_clock) -> None:
        self.fetch, self.t0, self.path, self.clock = fetch, t0, path, clock
        self.captured = GaugeSamples(name=name, interval_s=interval_s)
        self._task: asyncio.Task[None] | None = None

    async def _poll(self) -> None:
        while True:
            if self.clock(self.t0) is not None:
                with contextlib.suppress(Exception):
                    value = gauge_sum(await self.fetch(self.path, 5.0), self.captured.name)
                    at = self.clock(self.t0)
                    if value is not None and at is not None:
                        self.captured.samples.append((at, value))
            await asyncio.sleep(self.captured.interval_s)

    async def __aenter__(self) -> GaugeSampler:
        self._task = asyncio.create_task(self._poll())
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
