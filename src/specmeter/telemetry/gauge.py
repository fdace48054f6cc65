"""Polls one engine gauge (the running-batch size) while a point runs, in the client's event loop."""

from __future__ import annotations

import asyncio
import contextlib
import time
from types import TracebackType

from specmeter.schemas.capture import GaugeSamples
from specmeter.telemetry.prometheus import gauge_sum
from specmeter.telemetry.scrape import Fetch

DEFAULT_INTERVAL_S = 0.5


class GaugeSampler:
    """`async with GaugeSampler(fetch, name, t0):` collects (seconds since t0, value) pairs in `captured`. A failed
    scrape is skipped: the gauge is context, never a reason to fail the point."""

    def __init__(self, fetch: Fetch, name: str, t0: float, interval_s: float = DEFAULT_INTERVAL_S,
                 path: str = "/metrics") -> None:
        self.fetch, self.t0, self.path = fetch, t0, path
        self.captured = GaugeSamples(name=name, interval_s=interval_s)
        self._task: asyncio.Task[None] | None = None

    async def _poll(self) -> None:
        while True:
            with contextlib.suppress(Exception):
                value = gauge_sum(await self.fetch(self.path, 5.0), self.captured.name)
                if value is not None:
                    self.captured.samples.append((time.perf_counter() - self.t0, value))
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
