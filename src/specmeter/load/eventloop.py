"""The event loop a point's requests run on: uvloop where it is installed, else asyncio's own.

At hundreds of streams the client's per-read cost is mostly the event loop's (selector wake-ups, callback
scheduling, transport reads); uvloop does that work in C. With the client's own HTTP/1.1 transport
(load/http_stream.py) it costs less CPU per streamed chunk and the timestamps, taken in `data_received`,
lag less behind the socket (benchmarks/client_overhead.py: `specmeter` against `specmeter-asyncio`).
Nothing else changes with the loop: the same code, the same clock (`time.perf_counter`).
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
from collections.abc import Callable, Coroutine
from typing import Any, Literal, TypeVar

from specmeter.common.errors import InputError
from specmeter.common.installed import module_available
from specmeter.config.models import EventLoop

T = TypeVar("T")


def resolve_event_loop(kind: EventLoop) -> Literal["uvloop", "asyncio"]:
    """The loop `kind` means on this machine ("auto": uvloop when installed)."""
    if kind == "asyncio":
        return "asyncio"
    if module_available("uvloop"):
        return "uvloop"
    if kind == "uvloop":
        raise InputError("load.event_loop is uvloop but uvloop is not installed: pip install uvloop, "
                          "or set load.event_loop: auto")
    return "asyncio"


def loop_factory(kind: EventLoop) -> Callable[[], asyncio.AbstractEventLoop] | None:
    """For `asyncio.Runner(loop_factory=...)`: None is asyncio's default loop."""
    if resolve_event_loop(kind) == "asyncio":
        return None
    import uvloop

    return uvloop.new_event_loop


def runner(kind: EventLoop) -> asyncio.Runner:
    return asyncio.Runner(loop_factory=loop_factory(kind))


def run_cancellable(coro: Coroutine[Any, Any, T], event_loop: EventLoop) -> T:
    """asyncio.run on the load's event loop, with SIGTERM treated like Ctrl-C: cancel in-flight requests,
    then unwind."""
    with runner(event_loop) as asyncio_runner:
        loop = asyncio_runner.get_loop()
        task_holder: list[asyncio.Task[T]] = []

        def _cancel() -> None:
            for t in task_holder:
                t.cancel()

        with contextlib.suppress(NotImplementedError, RuntimeError):  # not the main thread / not Unix
            loop.add_signal_handler(signal.SIGTERM, _cancel)

        async def main() -> T:
            task = asyncio.current_task()
            assert task is not None
            task_holder.append(task)
            return await coro

        try:
            return asyncio_runner.run(main())
        finally:
            with contextlib.suppress(NotImplementedError, RuntimeError):
                loop.remove_signal_handler(signal.SIGTERM)
