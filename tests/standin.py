"""Stand-ins of engines that cannot run here (SGLang, TensorRT-LLM): an aiohttp application served from a
thread (a subclass adds its routes; `with StandIn() as s:` serves on a free port at `s.url`), and the
attach-mode run both suites send through one; and `serve_post`, one handler on a free port in the running loop."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any, Self

from aiohttp import web

from faultserver import conversations
from specmeter.config import EngineSpec, LoadSpec, SpecConfig
from specmeter.plans.run import run_plan
from specmeter.runner import Execution
from specmeter.schemas.plan import WorkloadSelection


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


def attach_execution(url: str, kind: str | None, api: str, dataset: str) -> Execution:
    """An attach-mode run of an EAGLE3 candidate (K = 4) on `url` at concurrency 2, with the engine given
    (`kind`) or left to detection (None): six short questions, 24 tokens each, no warm-up, no baseline."""
    convs = conversations([f"Question {i}: explain how caches work, briefly." for i in range(6)])
    plan = run_plan(EngineSpec(kind=kind, endpoint=url), SpecConfig(method="eagle3", num_speculative_tokens=4,
                                                                    draft_model="org/e3"),
                    LoadSpec(concurrency=[2], warmup=0, max_tokens=24, api=api), baseline=False,
                    baseline_endpoint=None, workload=WorkloadSelection(dataset=dataset))
    return Execution(plan=plan, conversations=convs, api_key=None, command=["specmeter", "run", "--endpoint", url])


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
