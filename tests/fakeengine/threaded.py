"""Serving an aiohttp application from tests: in a daemon thread with its own event loop (specmeter's runner
blocks the test thread in an asyncio loop of its own), or, with `serve_post`, in the running loop."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any, Self

from aiohttp import web


class ThreadedServer:
    """An aiohttp application on 127.0.0.1, a free port, in a thread: `with Sub() as s:` serves at `s.url`.

    A subclass adds its routes in `routes` (and any middlewares). The server stops by itself after
    `max_lifetime_s` (`expired` then says so), so a test that forgets to stop it cannot hang the suite;
    handlers still running at the stop are cancelled."""

    def __init__(self, max_lifetime_s: float = 60.0) -> None:
        self.max_lifetime_s = max_lifetime_s
        self.url = ""
        self.expired = False
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop_event: asyncio.Event | None = None
        self._ready = threading.Event()
        self._start_error: BaseException | None = None
        self._handlers: set[asyncio.Task[Any]] = set()

    def routes(self, app: web.Application) -> None:
        raise NotImplementedError

    def middlewares(self) -> list[Any]:
        return []

    def start(self) -> Self:
        self._thread = threading.Thread(target=self._thread_main, name=type(self).__name__, daemon=True)
        self._thread.start()
        if not self._ready.wait(10):
            raise RuntimeError(f"{type(self).__name__} did not start within 10 s")
        if self._start_error is not None:
            raise RuntimeError(f"{type(self).__name__} failed to start: {self._start_error!r}")
        return self

    def stop(self) -> None:
        loop, ev = self._loop, self._stop_event
        if loop is not None and ev is not None and not loop.is_closed():
            try:
                loop.call_soon_threadsafe(ev.set)
            except RuntimeError:  # the loop closed in between
                pass
        if self._thread is not None:
            self._thread.join(10)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def track(self, task: asyncio.Task[Any]) -> None:
        """Cancel `task` (a request handler) when the server stops; `untrack` once it is done."""
        self._handlers.add(task)

    def untrack(self, task: asyncio.Task[Any]) -> None:
        self._handlers.discard(task)

    def _thread_main(self) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        try:
            loop.run_until_complete(self._serve())
        except BaseException as exc:  # reported to start()
            self._start_error = exc
            self._ready.set()
        finally:
            loop.close()

    async def _serve(self) -> None:
        app = web.Application(middlewares=self.middlewares())
        self.routes(app)
        runner = web.AppRunner(app, access_log=None, handler_cancellation=True, shutdown_timeout=0.5,
                               handle_signals=False)
        await runner.setup()
        try:
            site = web.TCPSite(runner, "127.0.0.1", 0, backlog=1024)
            await site.start()
            self.url = f"http://127.0.0.1:{runner.addresses[0][1]}"
            self._stop_event = asyncio.Event()
            self._ready.set()
            try:
                await asyncio.wait_for(self._stop_event.wait(), self.max_lifetime_s)
            except TimeoutError:
                self.expired = True
        finally:
            for task in list(self._handlers):
                task.cancel()
            await runner.cleanup()


@asynccontextmanager
async def serve_post(path: str, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
                     ) -> AsyncIterator[str]:
    """`handler` answers POST `path` on a free local port, in the running event loop; yields the base URL."""
    app = web.Application()
    app.router.add_post(path, handler)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    try:
        yield f"http://127.0.0.1:{runner.addresses[0][1]}"
    finally:
        await runner.cleanup()
