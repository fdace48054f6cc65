"""Client processes: one load point sent from several processes, every timestamp on one clock.

One Python process keeps a few hundred streams honestly timed; past that its event loop falls behind and
every timestamp it takes is late by its backlog (at 1024 paced streams, hundreds of ms on TTFT). Then
`run_point_in_processes` splits the point over N processes (load/client_process.py's `main`, each with its own
event loop and connection pool) and merges what they measure:

- The work. Every process computes the point's whole plan itself (plans are deterministic) and sends the
  conversations `owner` gives it with its `share` of the slots: a closed loop of concurrency C runs
  C // N or C // N + 1 workers in each; an open loop's cap (max_concurrency) is split the same way, and
  each process keeps the exact planned send times of its conversations, so the schedule is the point's.
- The clock. Timestamps are time.perf_counter(), which on Linux is clock_gettime(CLOCK_MONOTONIC): one
  system-wide clock, not a per-process one, so the same value means the same instant in every process
  (`time.get_clock_info("perf_counter")` names it; macOS and Windows use system-wide counters too). The
  parent takes the point's t0 once, after every process is ready, and hands it to them: a record's
  start_s is perf_counter() - t0 in whichever process sent it, and its chunk offsets count from its own
  send, as in one process. Before the point starts the parent checks that this holds: each process
  reports its clock's name and a reading, which must fall between the parent's readings before it
  spawned the process and after the report arrived; otherwise the point is not run split.
- The records. Each finished request is pickled back to the parent as it finishes (those that finish in the
  same turn of the process's event loop in one message). The parent keeps them
  in arrival order (finish order, up to the pipes' interleaving), hands each to `on_record` at once
  (the store appends it to disk) and checks the point's stop conditions (max_error_rate, a dead server) over
  all processes together; a strategy's own (closed loop's duration floor) run in each process, on its share.
- Stopping. An error in the parent (error rate, dead engine), Ctrl-C or SIGTERM (both cancel the parent's
  task) sends every process "stop": it cancels its in-flight requests (as one process would), sends what
  had finished, and exits; the parent stores those too (bounded by STOP_TIMEOUT_S), kills what is left and
  re-raises. An error raised in a process is raised in the parent (with a note naming the process); a
  process that dies is a SpecmeterError carrying its stderr's last lines. Processes ignore SIGINT (a
  terminal's Ctrl-C reaches the whole process group): the parent stops them. A process stops the same
  way on its own SIGTERM (the parent, told so, fails the point unless it is being stopped itself) and
  when its stdin closes (its parent is gone).

The pipes' frames are load/pipes.py's; a client process runs load/client_process.py.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
import time
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import specmeter
from specmeter.common.errors import SpecmeterError
from specmeter.config.models import EventLoop, LoadPoint, LoadSpec
from specmeter.data.model import Conversation
from specmeter.load.kinds import kind_of
from specmeter.load.pipes import STOP_TIMEOUT_S, WorkerJob, clock_name, frame, read_frame
from specmeter.load.replicas import Replicas
from specmeter.load.split import split_slots
from specmeter.load.stops import PointProgress, StopCondition
from specmeter.load.traffic import OnRecord, PointKey, PointTraffic, Traffic
from specmeter.schemas.records import RequestRecord

START_TIMEOUT_S = 120.0  # imports and a session, on a machine that may be busy
EXIT_TIMEOUT_S = 10.0  # for a process that said it is done to exit
STDERR_LINES = 20


async def run_point_in_processes(
    processes: int,
    client: Replicas,
    point: LoadPoint,
    conversations: Sequence[Conversation],
    load: LoadSpec,
    model: str,
    key: PointKey,
    on_record: OnRecord,
    *,
    warmup: bool = False,
    skip: set[str] | None = None,
    stops: Sequence[StopCondition[PointProgress]] = (),
) -> PointTraffic:
    """`run_point`, split over `processes` client processes (see the module's docstring). `stops`: the point's
    conditions, checked here over every process's records (a strategy's own run in each process)."""
    shares = split_slots(kind_of(point).strategy(load).slots, processes)
    convs = list(conversations)
    jobs = [WorkerJob(i, processes, shares[i], client.settings, point, convs, load, model, key, warmup,
                      frozenset(skip or ())) for i in range(processes)]
    pool = _Pool()
    traffic: Traffic | None = None
    try:
        await pool.start(jobs)
        # The point starts once every process is ready: start-up is no part of it.
        traffic = Traffic(client, load, model, key, on_record, warmup, stops)
        pool.go(traffic.t0)
        await pool.collect(traffic)
        traffic.result.wall_s = traffic.elapsed()
    except BaseException:
        if traffic is not None:
            traffic.result.wall_s = traffic.elapsed()
        pool.stop()
        await pool.drain(traffic)
        raise
    finally:
        await pool.close()
    traffic.result.processes = processes
    return traffic.result


@dataclass(eq=False)
class _Worker:
    index: int
    proc: asyncio.subprocess.Process
    stderr: deque[str] = field(default_factory=lambda: deque(maxlen=STDERR_LINES))
    tasks: list[asyncio.Task[None]] = field(default_factory=list)
    done: bool = False  # said so: every record it sent is in
    ended: bool = False  # its stdout closed and it exited (its last message taken off the queue)

    def send(self, message: tuple[Any, ...]) -> None:
        stdin = self.proc.stdin
        if stdin is not None and not stdin.is_closing():
            with contextlib.suppress(ConnectionError, RuntimeError):
                stdin.write(frame(message))

    def died(self, what: str) -> SpecmeterError:
        tail = " / ".join(line for line in self.stderr if line.strip())
        code = self.proc.returncode
        status = f"exited with {code}" if code is not None else "closed its pipe"
        return SpecmeterError(f"client process {self.index} {status} {what}"
                              + (f"; its stderr: {tail}" if tail else ""))


class _Pool:
    """The client processes of one point, and one queue of everything they send."""

    def __init__(self) -> None:
        self.workers: list[_Worker] = []
        self.queue: asyncio.Queue[tuple[_Worker, tuple[Any, ...]]] = asyncio.Queue()

    async def start(self, jobs: Sequence[WorkerJob]) -> None:
        """Spawn one process per job and wait until each is ready, checking that its clock is ours."""
        frames = [frame(("job", job)) for job in jobs]  # plain data: the client holds nothing engine-specific
        clock = clock_name()
        spawned: dict[int, float] = {}
        for job, job_frame in zip(jobs, frames):
            spawned[job.index] = time.perf_counter()
            proc = await asyncio.create_subprocess_exec(
                *_worker_command(job.load.event_loop), stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE)
            worker = _Worker(job.index, proc)
            self.workers.append(worker)
            worker.tasks = [asyncio.create_task(self._read(worker)), asyncio.create_task(self._stderr(worker))]
            assert proc.stdin is not None
            proc.stdin.write(job_frame)
        ready = 0
        try:
            async with asyncio.timeout(START_TIMEOUT_S):
                while ready < len(self.workers):
                    worker, message = await self._next()
                    if message[0] != "ready":
                        raise self._failure(worker, message, "before the point started")
                    _, their_clock, reading = message
                    now = time.perf_counter()
                    if their_clock != clock or not spawned[worker.index] <= reading <= now:
                        raise SpecmeterError(
                            f"client process {worker.index} does not share this process's clock ({their_clock} "
                            f"read {reading:.6f}, here {clock} read {spawned[worker.index]:.6f} .. {now:.6f}): "
                            "its timestamps would not be comparable; set load.client_processes: 1")
                    ready += 1
        except TimeoutError:
            late = [w for w in self.workers if not w.ended]
            raise late[0].died(f"not ready after {START_TIMEOUT_S:g} s") if late else SpecmeterError(
                "client processes did not start") from None

    def go(self, t0: float) -> None:
        for worker in self.workers:
            worker.send(("go", t0))

    async def collect(self, traffic: Traffic) -> None:
        """Deliver every record until each process is done; raise the first failure."""
        while not all(w.done for w in self.workers):
            worker, message = await self._next()
            kind = message[0]
            if kind == "records":
                for record in message[1]:
                    traffic.deliver(record)
            elif kind == "done" and not message[1]:
                worker.done = True
            elif kind == "ended" and worker.done:
                continue  # finished its share and exited, while others still run
            elif kind == "done":  # stopped by a signal of its own, not by us
                await asyncio.sleep(0.2)  # the same signal (SIGTERM to the group) may cancel us too: that wins
                raise SpecmeterError(f"client process {worker.index} was stopped (SIGTERM) before it finished")
            else:
                raise self._failure(worker, message, "before it finished its requests")

    def stop(self) -> None:
        for worker in self.workers:
            worker.send(("stop",))

    async def drain(self, traffic: Traffic | None) -> None:
        """After a stop: keep what the processes finished in the meantime (never raising), until each has
        ended or STOP_TIMEOUT_S passed."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + STOP_TIMEOUT_S
        with contextlib.suppress(TimeoutError, asyncio.CancelledError):
            while not all(w.ended for w in self.workers):
                _, message = await asyncio.wait_for(self._next(), max(0.0, deadline - loop.time()))
                if message[0] == "records" and traffic is not None:
                    records: list[RequestRecord] = message[1]
                    for record in records:
                        traffic.result.records.append(record)
                        with contextlib.suppress(Exception):  # the error that stopped the point is already raised
                            traffic.on_record(record)

    async def close(self) -> None:
        """Every process exited (or killed), its pipes read to the end, nothing left running."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + EXIT_TIMEOUT_S
        for worker in self.workers:
            with contextlib.suppress(TimeoutError, asyncio.CancelledError):
                await asyncio.wait_for(worker.proc.wait(), max(0.0, deadline - loop.time()))
            if worker.proc.returncode is None:
                with contextlib.suppress(ProcessLookupError):
                    worker.proc.kill()
                with contextlib.suppress(asyncio.CancelledError):
                    await worker.proc.wait()
            for task in worker.tasks:
                task.cancel()
            await asyncio.gather(*worker.tasks, return_exceptions=True)
            if worker.proc.stdin is not None:
                worker.proc.stdin.close()

    async def _next(self) -> tuple[_Worker, tuple[Any, ...]]:
        worker, message = await self.queue.get()
        if message[0] == "ended":
            worker.ended = True
        return worker, message

    async def _read(self, worker: _Worker) -> None:
        assert worker.proc.stdout is not None
        try:
            while True:
                message = await read_frame(worker.proc.stdout)
                if message is None:
                    break
                await self.queue.put((worker, message))
        except Exception as exc:  # a torn frame: the process died mid-write
            await self.queue.put((worker, ("broken", f"{type(exc).__name__}: {exc}")))
        await worker.proc.wait()  # its exit code, for the message
        await self.queue.put((worker, ("ended",)))

    async def _stderr(self, worker: _Worker) -> None:
        """Keep the last lines of the process's stderr (for the message if it dies), reading it all (a full pipe
        would block the process)."""
        assert worker.proc.stderr is not None
        rest = b""
        while data := await worker.proc.stderr.read(1 << 16):
            *lines, rest = (rest + data).split(b"\n")
            worker.stderr.extend(line[:500].decode("utf-8", "replace").rstrip() for line in lines)
            rest = rest[-500:]
        if rest:
            worker.stderr.append(rest.decode("utf-8", "replace").rstrip())

    @staticmethod
    def _failure(worker: _Worker, message: tuple[Any, ...], when: str) -> BaseException:
        if message[0] == "error":
            _, exc, where = message
            if isinstance(exc, BaseException):
                exc.add_note(f"raised in client process {worker.index}:\n{where}")
                return exc
            return SpecmeterError(f"client process {worker.index} failed: {exc}\n{where}")
        if message[0] == "broken":
            return worker.died(f"mid-message {when} ({message[1]})")
        if message[0] == "ended":
            return worker.died(when)
        return SpecmeterError(f"client process {worker.index} sent {message[0]!r} {when}")


def _worker_command(event_loop: EventLoop) -> list[str]:
    """`python -c ...` importing load/client_process.py from where this process found specmeter (the child finds the
    same copy even when the parent's was put on sys.path by hand); the loop is chosen before the job is read."""
    src = str(Path(specmeter.__file__).resolve().parents[1])
    code = (f"import sys; p = {src!r}; sys.path.insert(0, p) if p not in sys.path else None; "
            f"from specmeter.load.client_process import main; main({event_loop!r})")
    return [sys.executable, "-c", code]
