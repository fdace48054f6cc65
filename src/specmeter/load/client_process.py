"""A client process: one share of a load point, sent from its own process and event loop (load/workers.py
starts it, and says how the share is chosen and how its timestamps stay on the parent's clock)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import pickle
import signal
import time
import traceback
from typing import Any, cast

from specmeter.config.models import EventLoop
from specmeter.load import eventloop
from specmeter.load.kinds import kind_of
from specmeter.load.pipes import STOP_TIMEOUT_S, WorkerJob, clock_name, frame, read_frame
from specmeter.load.replicas import Replicas
from specmeter.load.split import owner
from specmeter.load.strategies import planned_todo
from specmeter.load.traffic import OnRecord, Traffic
from specmeter.schemas.records import RequestRecord


def main(event_loop: EventLoop = "auto") -> None:
    """A client process: read a job on stdin, say ready, wait for go, send the job's share of the point,
    relaying each record to stdout as it finishes; stop early on "stop" or when stdin closes."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle
    out_fd = os.dup(1)
    os.dup2(2, 1)  # anything printed goes to stderr, never into the message channel
    with eventloop.runner(event_loop) as loop_runner:
        loop_runner.run(_serve(out_fd))


class _Channel(asyncio.Protocol):
    """The write end of the message pipe: writes never block the event loop (the parent reads at once)."""

    def __init__(self) -> None:
        self.loop = asyncio.get_running_loop()
        self.closed: asyncio.Future[None] = self.loop.create_future()
        self.transport: asyncio.WriteTransport | None = None
        self.records: list[RequestRecord] = []

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.WriteTransport, transport)  # uvloop's pipe transport is not a subclass

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.closed.done():
            self.closed.set_result(None)

    def send(self, message: tuple[Any, ...]) -> None:
        self._flush()  # records first: messages keep their order
        if self.transport is not None and not self.transport.is_closing():
            self.transport.write(frame(message))

    def record(self, record: RequestRecord) -> None:
        """A finished request, sent with the others that finish in this turn of the event loop (one frame and
        one wake-up of the parent for many: a turn of a busy loop finishes dozens)."""
        if not self.records:
            self.loop.call_soon(self._flush)
        self.records.append(record)

    def _flush(self) -> None:
        if self.records:
            batch, self.records = self.records, []
            if self.transport is not None and not self.transport.is_closing():
                self.transport.write(frame(("records", batch)))

    async def close(self) -> None:
        self._flush()
        if self.transport is not None:
            self.transport.close()  # after what is buffered is written
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(self.closed), STOP_TIMEOUT_S)


async def _serve(out_fd: int) -> None:
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), os.fdopen(0, "rb", buffering=0))
    _, out = await loop.connect_write_pipe(_Channel, os.fdopen(out_fd, "wb", buffering=0))
    try:
        message = await read_frame(reader)
        if message is None:
            return
        assert message[0] == "job", message[0]
        job: WorkerJob = message[1]
        async with Replicas.from_settings(job.client) as client:
            out.send(("ready", clock_name(), time.perf_counter()))
            message = await read_frame(reader)
            if message is None or message[0] != "go":
                return  # stopped before the point started
            drive = asyncio.create_task(_drive(job, client, message[1], out.record))
            control = asyncio.create_task(read_frame(reader))  # "stop", or None: the parent is gone
            terminated = asyncio.Event()
            with contextlib.suppress(NotImplementedError):
                loop.add_signal_handler(signal.SIGTERM, terminated.set)
            term = asyncio.create_task(terminated.wait())
            await asyncio.wait({drive, control, term}, return_when=asyncio.FIRST_COMPLETED)
            if not drive.done():
                drive.cancel()  # in-flight requests end as `cancelled`, as in one process
            control.cancel()
            term.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await drive
            # Before the session closes (that is no part of the point). Stopped by its own SIGTERM: the
            # parent did not ask, and must not take this share of the point for finished.
            out.send(("done", terminated.is_set()))
    except Exception as exc:
        out.send(("error", _picklable(exc), traceback.format_exc()))
    finally:
        await out.close()


async def _drive(job: WorkerJob, client: Replicas, t0: float, send: OnRecord) -> None:
    whole = kind_of(job.point).strategy(job.load)
    todo = planned_todo(whole, job.point, job.conversations, job.load, job.skip)
    mine = (item for k, item in enumerate(todo) if owner(k, whole.slots, job.processes) == job.index)
    share = whole.share(job.slots)
    traffic = Traffic(client, job.load, job.model, job.key, send, job.warmup, share.stops(), t0=t0, relay=True)
    await share.drive(traffic, mine)


def _picklable(exc: BaseException) -> BaseException | str:
    """`exc` if it survives a pickle round trip (some exception types do not), else its text."""
    try:
        pickle.loads(pickle.dumps(exc))
        return exc
    except Exception:
        return f"{type(exc).__name__}: {exc}"
