"""An aiohttp application served from a thread, for stand-ins of engines that cannot run here (SGLang,
TensorRT-LLM): a subclass adds its routes; `with Stand-in() as s:` serves on a free port at `s.url`."""

from __future__ import annotations

import asyncio
import threading
from typing import Any, Self

from aiohttp import web


class ThreadedApp:
    def __init__(self) -> None:
        self.url = ""
        self._ready = threading.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._thread = threading.Thread(target=self._main, daemon=True)

    def routes(self, app: web.Application) -> None:
        raise NotImplementedError

    def middlewares(self) -> list[Any]:
        return []

    def __enter__(self) -> Self:
        self._thread.start()
        assert self._ready.wait(10), "stand-in did not start"
        return self

    def __exit__(self, *exc: object) -> None:
        if self._loop is not None and self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(10)

    def _main(self) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        loop.run_until_complete(self._serve())
        loop.close()

    async def _serve(self) -> None:
        app = web.Application(middlewares=self.middlewares())
        self.routes(app)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        self.url = f"http://127.0.0.1:{runner.addresses[0][1]}"
        self._stop = asyncio.Event()
        self._ready.set()
        try:
            await asyncio.wait_for(self._stop.wait(), 50)
        except TimeoutError:
            pass
        await runner.cleanup()
