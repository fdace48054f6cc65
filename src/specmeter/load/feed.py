"""Reads an engine's clear-on-read statistics (`IterationFeed`) through a point, in the client's event loop."""

from __future__ import annotations

import asyncio
import contextlib
import json
from types import TracebackType

from specmeter.engines.base import IterationFeed
from specmeter.load.client import OpenAIClient

DEFAULT_INTERVAL_S = 0.5


def _why(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {' '.join(str(exc).split())[:120]}"


class FeedPoller:
    """`async with FeedPoller(client, feed):` around a point. On entry it reads `feed.path` once and gives
    the answer to `feed.mark` (what accumulated before the point: the probe, the warmup, an earlier point);
    then it polls every `interval_s`, and on a clean exit lets the poll in flight finish (cancelling it could
    drop an answer the server has already cleared) and reads once more. Every answer goes to `feed.add`.
    A poll that fails is skipped (counted in `feed.failed_reads`); an answer that is not JSON, or a failed
    last read, is recorded in `feed.lost`: what it held is gone from the server."""

    def __init__(self, client: OpenAIClient, feed: IterationFeed, interval_s: float = DEFAULT_INTERVAL_S,
                 timeout_s: float = 5.0) -> None:
        self.client, self.feed, self.interval_s, self.timeout_s = client, feed, interval_s, timeout_s
        self._stop = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    async def _read(self, *, mark: bool = False, last: bool = False) -> None:
        path = self.feed.path
        try:
            text = await self.client.get_text(path, timeout_s=self.timeout_s)
        except Exception as exc:
            if last:
                self.feed.lost.append(f"the read after the point failed ({_why(exc)})")
            elif not mark:
                self.feed.failed_reads += 1
            return
        try:
            payload = json.loads(text)
        except ValueError as exc:
            if not mark:
                self.feed.lost.append(f"an answer was not JSON ({_why(exc)})")
            return
        try:
            if mark:
                self.feed.mark(payload)
            else:
                self.feed.add(payload)
                self.feed.reads += 1
        except Exception as exc:  # garbage the feed cannot take: recorded, never a reason to fail the point
            if not mark:
                self.feed.lost.append(f"an answer could not be read ({_why(exc)})")

    async def _poll(self) -> None:
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stop.wait(), self.interval_s)
            if self._stop.is_set():
                return
            await self._read()

    async def __aenter__(self) -> FeedPoller:
        await self._read(mark=True)
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
        await self._read(last=True)
