"""A load point split over client processes (load/workers.py): the same records as one process, on one clock
(every send, as the server saw it, falls between the record's own send and first-chunk times counted from the
parent's t0), the point's concurrency limit held across processes, the open-loop schedule kept, and errors,
dead processes and cancellation reaching the parent with nothing finished lost.

The server is a small aiohttp app in a thread of this process (fakeengine.threaded): it stamps each request's
arrival with time.perf_counter() (the client processes' clock too) and counts the requests it is streaming.
"""

from __future__ import annotations

import asyncio
import hashlib
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from aiohttp import web

from fakeengine.threaded import ThreadedServer
from specmeter.common.errors import ErrorRateExceeded, SpecmeterError
from specmeter.config.models import ConcurrencyPoint, LoadSpec, RatePoint
from specmeter.data.model import Conversation
from specmeter.engines.vllm import VLLMStats
from specmeter.load import eventloop, split
from specmeter.load.arrivals import arrival_times
from specmeter.load.client import OpenAIClient
from specmeter.load.point import point_conversations, run_point
from specmeter.load.replicas import Replicas
from specmeter.load.split import client_processes, owner, split_slots
from specmeter.load.traffic import PointKey, PointTraffic
from specmeter.metrics.requests import with_sd
from specmeter.schemas.records import RequestRecord

pytestmark = pytest.mark.timeout(120)


@dataclass
class Seen:
    arrival: float
    first_chunk: float | None = None


class StubServer(ThreadedServer):
    """Streams `chunks` content chunks `gap_s` apart (tokens per chunk from the prompt), continuous usage, a
    final usage chunk, [DONE]. A prompt containing FAIL gets HTTP 500."""

    def __init__(self, chunks: int = 4, gap_s: float = 0.005) -> None:
        super().__init__()
        self.chunks, self.gap_s = chunks, gap_s
        self.seen: dict[str, Seen] = {}  # by the request's last user message
        self.in_flight = 0
        self.max_in_flight = 0
        self._lock = threading.Lock()

    def routes(self, app: web.Application) -> None:
        app.router.add_post("/v1/chat/completions", self._handle)

    @staticmethod
    def tokens(prompt: str, i: int) -> int:
        return 1 + hashlib.sha256(f"{prompt}/{i}".encode()).digest()[0] % 3

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        arrival = time.perf_counter()
        body = await request.json()
        prompt = body["messages"][-1]["content"]
        seen = Seen(arrival)
        with self._lock:
            self.seen[prompt] = seen
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            if "FAIL" in prompt:
                return web.Response(status=500, text="engine exploded")
            resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
            await resp.prepare(request)
            done = 0
            for i in range(self.chunks):
                await asyncio.sleep(self.gap_s)
                done += self.tokens(prompt, i)
                chunk = {"choices": [{"index": 0, "delta": {"content": f"{prompt}.{i} "}, "finish_reason": None}],
                         "usage": {"prompt_tokens": 5, "completion_tokens": done}}
                if i == 0:
                    seen.first_chunk = time.perf_counter()
                await resp.write(b"data: " + _json(chunk) + b"\n\n")
            final = {"choices": [], "usage": {"prompt_tokens": 5, "completion_tokens": done}}
            await resp.write(b"data: " + _json(final) + b"\n\ndata: [DONE]\n\n")
            await resp.write_eof()
            return resp
        finally:
            with self._lock:
                self.in_flight -= 1


def _json(obj: Any) -> bytes:
    import json

    return json.dumps(obj).encode()


@pytest.fixture
def server() -> Iterator[StubServer]:
    with StubServer() as srv:
        yield srv


def workload(n: int, turns: int = 1, prefix: str = "c") -> list[Conversation]:
    return [Conversation(id=f"{prefix}{i:03d}", turns=[f"{prefix}{i:03d} turn {t}" for t in range(turns)])
            for i in range(n)]


def drive(url: str, point: ConcurrencyPoint | RatePoint, convs: list[Conversation], processes: int | None,
          cycle: bool = True, **load: Any) -> tuple[PointTraffic, list[RequestRecord]]:
    """run_point on the point's conversations (as the runner cycles them up to the point's floor; or, without
    `cycle`, just `convs`); returns its traffic and what on_record got."""
    spec = LoadSpec(warmup=0, client_processes=processes, **load)
    delivered: list[RequestRecord] = []

    async def go() -> PointTraffic:
        async with Replicas([OpenAIClient(url, timeout_s=30)]) as client:
            todo = point_conversations(convs, point, spec) if cycle else convs
            return await run_point(client, point, todo, spec, "m", PointKey("cfg", point.id), delivered.append)

    with eventloop.runner(spec.event_loop) as loop_runner:  # as the runner runs a point
        return loop_runner.run(go()), delivered


def by_key(records: list[RequestRecord]) -> dict[tuple[str, int], RequestRecord]:
    out = {(r.conversation_id, r.turn): r for r in records}
    assert len(out) == len(records), "a request was recorded twice"
    return out


def check_one_clock(traffic: PointTraffic, server: StubServer) -> None:
    """Each request reached the server after the client stamped its send and before the first chunk the client
    stamped: t0 + start_s <= arrival <= first chunk sent <= t0 + start_s + ttft_s, all on one clock."""
    for r in traffic.records:
        seen = server.seen[f"{r.conversation_id} turn {r.turn}"]
        sent = traffic.t0 + r.start_s
        assert r.ttft_s is not None and r.e2e_s is not None
        assert sent <= seen.arrival, (r.conversation_id, seen.arrival - sent)
        assert seen.first_chunk is not None and seen.first_chunk <= sent + r.ttft_s, r.conversation_id
        assert 0.0 <= r.start_s and r.start_s + r.e2e_s <= traffic.wall_s + 1e-3
        assert r.chunk_offsets_s == sorted(r.chunk_offsets_s) and r.ttft_s <= r.e2e_s


# ---- the same records, one clock --------------------------------------------------------------------------


@pytest.mark.parametrize("event_loop", ["asyncio", "uvloop"])
def test_processes_send_the_same_records_as_one_process(server: StubServer, event_loop: str) -> None:
    convs = workload(18, turns=2)
    point = ConcurrencyPoint(concurrency=6)
    one, _ = drive(server.url, point, convs, 1, event_loop=event_loop)
    check_one_clock(one, server)
    three, delivered = drive(server.url, point, convs, 3, event_loop=event_loop)
    assert (one.processes, three.processes) == (1, 3)
    check_one_clock(three, server)
    assert [r.key for r in delivered] == [r.key for r in three.records]  # on_record got each, as it came
    a, b = by_key(one.records), by_key(three.records)
    assert sorted(a) == sorted(b) and len(b) == 36
    for k, r in b.items():
        assert r.ok, r.error
        ref = a[k]
        for name in ("output_text", "output_tokens", "prompt_tokens", "chunk_tokens", "finish_reason", "config_id",
                     "point_id", "repeat", "category", "warmup", "scheduled_s"):
            assert getattr(r, name) == getattr(ref, name), (k, name)
        assert len(r.chunk_offsets_s) == len(ref.chunk_offsets_s) == server.chunks
        assert r.chunk_tokens == [StubServer.tokens(f"{k[0]} turn {k[1]}", i) for i in range(server.chunks)]
    # a later turn carries the reply to the earlier one, whichever process sent it
    assert all(b[(c, 1)].start_s >= b[(c, 0)].start_s + (b[(c, 0)].e2e_s or 0) for c, _ in b)


@pytest.mark.parametrize("event_loop", ["asyncio", "uvloop"])
def test_open_loop_keeps_its_schedule_across_processes(server: StubServer, event_loop: str) -> None:
    convs = workload(24)
    point = RatePoint(rate=80.0, arrival="constant")
    traffic, _ = drive(server.url, point, convs, 2, seed=3, event_loop=event_loop)
    check_one_clock(traffic, server)
    want = dict(zip((c.id for c in convs), arrival_times("constant", 80.0, 24, f"3:{point.id}")))
    got = by_key(traffic.records)
    assert {c for c, _ in got} == set(want)
    for (conv, _), r in got.items():
        assert r.scheduled_s == want[conv]  # the planned time, whichever process sent it
        assert r.start_s >= r.scheduled_s  # never early, though uvloop's millisecond timers wake early
        assert r.start_s - r.scheduled_s < 0.25, (conv, r.start_s - r.scheduled_s)  # and not late by much
    # the server saw them in schedule order, 1/80 s apart (loosely: a busy test machine)
    arrivals = sorted(server.seen[f"{c.id} turn 0"].arrival for c in convs)
    assert arrivals[-1] - arrivals[0] == pytest.approx(23 / 80.0, abs=0.15)


def test_resume_and_duration_split_like_one_process(server: StubServer) -> None:
    """`skip` (resume) leaves the same conversations out in every process, the rest keep their planned times;
    with duration_s each process cycles the workload on the shared clock until the time is up."""
    convs = workload(16)
    point = RatePoint(rate=100.0, arrival="constant")
    skip = {"c001", "c004", "c005"}
    spec = LoadSpec(warmup=0, client_processes=2)
    delivered: list[RequestRecord] = []

    async def resumed() -> PointTraffic:
        async with Replicas([OpenAIClient(server.url, timeout_s=30)]) as client:
            return await run_point(client, point, convs, spec, "m", PointKey("cfg", point.id), delivered.append,
                                   skip=skip)

    traffic = asyncio.run(resumed())
    want = dict(zip((c.id for c in convs), arrival_times("constant", 100.0, 16, f"0:{point.id}")))
    assert {r.conversation_id for r in traffic.records} == set(want) - skip
    assert all(r.scheduled_s == want[r.conversation_id] for r in traffic.records)

    # (the workload as given: the runner's floor-cycled list, cycled again, repeats ids in one process too)
    timed, _ = drive(server.url, ConcurrencyPoint(concurrency=2), workload(3), 2, cycle=False, duration_s=0.5)
    ids = [r.conversation_id for r in timed.records]
    assert len(ids) == len(set(ids)) >= 8  # at least the floor (4 x 2), each pass under its own id
    assert {"c000", "c001", "c002", "c000#2"} <= set(ids)
    assert max(r.start_s for r in timed.records) < 0.5 + 0.5  # nothing started long after the time was up


# ---- limits ----------------------------------------------------------------------------------------------


def test_concurrency_limit_holds_across_processes() -> None:
    # Requests of 0.5 s: the first six (two per process) overlap however busy the machine is.
    with StubServer(chunks=5, gap_s=0.1) as srv:
        traffic, _ = drive(srv.url, ConcurrencyPoint(concurrency=6), workload(24), 3)
        assert traffic.processes == 3 and len(traffic.records) == 24
        assert srv.max_in_flight == 6  # reached, never passed
    with StubServer(chunks=5, gap_s=0.1) as srv:  # open loop, far faster than the cap lets through
        traffic, _ = drive(srv.url, RatePoint(rate=2000.0, arrival="constant", max_concurrency=5), workload(20), 2)
        assert traffic.processes == 2 and len(traffic.records) == 20
        assert srv.max_in_flight <= 5
        assert max(r.queued_s for r in traffic.records) > 0.1  # the cap made some wait


def test_a_process_that_finishes_early_is_no_failure() -> None:
    # Process 1 gets one conversation of three and exits while process 0 still streams its second.
    with StubServer(chunks=4, gap_s=0.1) as srv:
        traffic, _ = drive(srv.url, ConcurrencyPoint(concurrency=2), workload(3), 2, cycle=False)
    assert traffic.processes == 2 and sorted(by_key(traffic.records)) == [(f"c{i:03d}", 0) for i in range(3)]
    assert all(r.ok for r in traffic.records)


def test_split_slots_and_owner_divide_a_point_evenly() -> None:
    assert split_slots(10, 3) == [4, 3, 3] and split_slots(2, 2) == [1, 1] and split_slots(None, 2) == [None, None]
    for slots, n in [(10, 3), (1024, 2), (5, 5), (7, 2)]:
        shares = split_slots(slots, n)
        assert sum(s or 0 for s in shares) == slots
        first = [owner(k, slots, n) for k in range(slots)]  # the conversations that start at once
        assert [first.count(i) for i in range(n)] == shares
        many = [owner(k, slots, n) for k in range(100 * slots)]
        assert [many.count(i) for i in range(n)] == [100 * (s or 0) for s in shares]
    assert [owner(k, None, 3) for k in range(6)] == [0, 1, 2, 0, 1, 2]


def test_how_many_processes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(split, "usable_cores", lambda: 8)
    auto = LoadSpec()
    assert client_processes(ConcurrencyPoint(concurrency=256), auto) == 1  # small runs: as before
    assert client_processes(ConcurrencyPoint(concurrency=511), auto) == 1
    assert client_processes(ConcurrencyPoint(concurrency=512), auto) == 2
    assert client_processes(ConcurrencyPoint(concurrency=1024), auto) == 4
    assert client_processes(ConcurrencyPoint(concurrency=4096), auto) == 8  # no more than the cores
    assert client_processes(RatePoint(rate=1000.0), auto) == 1  # no cap: nothing says it is large
    assert client_processes(RatePoint(rate=1000.0, max_concurrency=1024), auto) == 4
    assert client_processes(ConcurrencyPoint(concurrency=1024), auto, warmup=True) == 1
    monkeypatch.setattr(split, "usable_cores", lambda: 1)
    assert client_processes(ConcurrencyPoint(concurrency=1024), auto) == 1  # one core: splitting cannot help
    three = LoadSpec(client_processes=3)
    assert client_processes(ConcurrencyPoint(concurrency=64), three) == 3  # asked for: whatever the cores
    assert client_processes(ConcurrencyPoint(concurrency=2), three) == 2  # never more than the slots
    assert client_processes(RatePoint(rate=5.0), three) == 3


# ---- failures --------------------------------------------------------------------------------------------


def test_error_rate_counts_every_process_and_keeps_the_records(server: StubServer) -> None:
    convs = [Conversation(id=f"f{i:03d}", turns=[f"f{i:03d} turn 0 FAIL"]) for i in range(40)]
    delivered: list[RequestRecord] = []
    spec = LoadSpec(warmup=0, client_processes=2, max_error_rate=0.5)
    point = ConcurrencyPoint(concurrency=4)

    async def go() -> None:
        async with Replicas([OpenAIClient(server.url, timeout_s=30)]) as client:
            await run_point(client, point, convs, spec, "m", PointKey("cfg", point.id), delivered.append)

    with pytest.raises(ErrorRateExceeded):
        asyncio.run(go())
    assert len(delivered) >= 8 and all(r.error_kind == "http_5xx" for r in delivered)
    assert len({r.key for r in delivered}) == len(delivered)
    assert _children() == []


def _children() -> list[int]:
    psutil = pytest.importorskip("psutil")
    deadline = time.monotonic() + 5
    while True:
        kids = [p.pid for p in psutil.Process().children(recursive=True) if p.status() != psutil.STATUS_ZOMBIE]
        if not kids or time.monotonic() > deadline:
            return kids
        time.sleep(0.05)


def _run_until(url: str, action: Any, records_before: int = 3) -> tuple[BaseException | None, list[RequestRecord]]:
    """Run a long closed-loop point over 2 processes; once `records_before` records are in, call `action(task)`."""
    delivered: list[RequestRecord] = []
    spec = LoadSpec(warmup=0, client_processes=2)
    point = ConcurrencyPoint(concurrency=4)
    convs = workload(400)

    async def go() -> BaseException | None:
        async with Replicas([OpenAIClient(url, timeout_s=30)]) as client:
            task = asyncio.create_task(run_point(client, point, convs, spec, "m", PointKey("cfg", point.id),
                                                 delivered.append))
            while len(delivered) < records_before and not task.done():
                await asyncio.sleep(0.01)
            action(task)
            try:
                await task
            except BaseException as exc:
                return exc
            return None

    return asyncio.run(go()), delivered


def test_cancelling_stops_every_process_and_keeps_what_finished() -> None:
    with StubServer(chunks=10, gap_s=0.02) as srv:
        started = time.monotonic()
        error, delivered = _run_until(srv.url, lambda task: task.cancel())
        assert isinstance(error, asyncio.CancelledError)
        assert time.monotonic() - started < 20
        assert len(delivered) >= 3 and len(delivered) < 400
        assert all(r.ok for r in delivered)  # in-flight requests were cancelled, not delivered half-done
        finished = {p for p, s in srv.seen.items() if s.first_chunk is not None}
        assert {f"{r.conversation_id} turn {r.turn}" for r in delivered} <= finished
    assert _children() == []


def test_a_process_that_dies_fails_the_point() -> None:
    psutil = pytest.importorskip("psutil")

    def kill_one(task: Any) -> None:
        kids = psutil.Process().children()
        assert kids, "no client process"
        kids[0].kill()

    with StubServer(chunks=10, gap_s=0.02) as srv:
        error, delivered = _run_until(srv.url, kill_one)
    assert isinstance(error, SpecmeterError), repr(error)
    assert "client process" in str(error) and "exited with -9" in str(error)
    assert len(delivered) >= 3
    assert _children() == []


def test_a_process_stopped_by_its_own_sigterm_fails_the_point() -> None:
    psutil = pytest.importorskip("psutil")

    def term_one(task: Any) -> None:
        psutil.Process().children()[0].terminate()

    with StubServer(chunks=10, gap_s=0.02) as srv:
        error, delivered = _run_until(srv.url, term_one)
    assert isinstance(error, SpecmeterError) and "stopped (SIGTERM)" in str(error), repr(error)
    assert all(r.ok for r in delivered)
    assert _children() == []


def test_a_run_through_the_runner_with_client_processes(tmp_path: Any) -> None:
    """The whole pipeline (runner, store, summary) with a point split over 2 processes: every request stored
    once, the point's numbers computed from them, SD stats read from each record."""
    from fakeengine.drive import attach_plan, conversations, only_config, point_requests, run_plan
    from fakeengine.server import FakeEngine
    from specmeter.rundir.store import RunStore

    convs = conversations([f"Question {i}: explain caching." for i in range(12)])
    with FakeEngine() as srv:
        plan = attach_plan(srv.url, convs, concurrency=[4], client_processes=2, warmup=2)
        summary, error, _ = run_plan(plan, tmp_path / "run")
        max_running = srv.max_running
    assert error is None, repr(error)
    assert summary.status == "complete"
    records = [with_sd(r, VLLMStats()) for r in RunStore(tmp_path / "run").read_records() if not r.warmup]
    assert len(records) == point_requests(convs, 4) == len({r.key for r in records})
    assert all(r.ok and r.sd is not None for r in records)
    assert max_running <= 4
    (level,) = only_config(summary).points
    assert level.latency.num_requests == level.latency.num_ok == len(records)
    assert level.sd.available
