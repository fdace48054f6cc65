"""Cells measured in turns (load/turns.py): the order the seats take their turns in, a wave of requests a turn, and
the runner measuring one round of a closed-loop point on two fake servers that way: at concurrency 1 one request in
flight across both, at concurrency 3 a wave of three on one server at a time, each cell's wall time and running
batch on its own busy clock."""

from __future__ import annotations

import asyncio
import itertools
from pathlib import Path

import pytest

from fakeengine.drive import attach_pair, conversations, run_plan
from fakeengine.server import FakeEngine
from specmeter.config.models import ConcurrencyPoint, RatePoint
from specmeter.load.turns import Turns, runs_whole
from specmeter.report.tables import plan_table
from specmeter.rundir.store import RunStore

pytestmark = pytest.mark.timeout(60)


async def _take(turns: Turns, requests: list[int], order: list[int], pause_s: float = 0.0) -> None:
    async def seat(i: int) -> None:
        try:
            for _ in range(requests[i]):
                async with turns.seats[i]:
                    order.append(i)
                    await asyncio.sleep(0.001)
                await asyncio.sleep(pause_s * i)  # a seat slow to ask again is waited for, not skipped
        finally:
            await turns.seats[i].leave()
    await asyncio.gather(*(seat(i) for i in range(len(requests))))


def test_seats_take_turns_in_laps_of_one_order_and_a_seat_that_left_is_skipped() -> None:
    """Every turn follows another seat's (no seat follows itself at a lap's end) while two or more are left."""
    order: list[int] = []
    asyncio.run(_take(Turns(3), [3, 3, 3], order, pause_s=0.002))
    assert order == [0, 1, 2, 0, 1, 2, 0, 1, 2]
    order = []
    asyncio.run(_take(Turns(3), [1, 4, 2], order))
    assert order == [0, 1, 2, 1, 2, 1, 1]


def test_a_seat_keeps_its_busy_clock_without_its_waits() -> None:
    async def run() -> tuple[float, float]:
        turns = Turns(2)
        first, second = turns.seats

        async def hold() -> None:
            async with first:
                await asyncio.sleep(0.2)
            await first.leave()

        async def wait() -> None:
            async with second:
                pass
            await second.leave()
        await asyncio.gather(hold(), wait())
        return first.waited_s, second.waited_s
    waited_first, waited_second = asyncio.run(run())
    assert waited_first < 0.05 <= 0.15 < waited_second


def test_a_turn_is_a_wave_and_a_seat_waits_once_per_turn_not_once_per_request() -> None:
    """Two seats, two requests in flight each: a turn admits a whole wave, passes on once all of it has finished,
    and a wave's requests waiting together count their wait once on the seat's busy clock."""
    async def run() -> tuple[list[tuple[str, int]], float]:
        turns = Turns(2, per_turn=2)
        events: list[tuple[str, int]] = []

        async def worker(i: int, requests: int) -> None:
            for _ in range(requests):
                async with turns.seats[i]:
                    events.append(("start", i))
                    await asyncio.sleep(0.05)
                    events.append(("end", i))

        async def seat(i: int, requests: int) -> None:
            try:
                await asyncio.gather(worker(i, requests), worker(i, requests))
            finally:
                await turns.seats[i].leave()
        await asyncio.gather(seat(0, 2), seat(1, 3))  # seat 1: three waves of two
        return events, turns.seats[1].waited_s
    events, waited = asyncio.run(run())
    holder = [i for kind, i in events if kind == "start"]
    assert holder == [0, 0, 1, 1, 0, 0, 1, 1, 1, 1]  # 0, 1, 0, 1, then 1 alone (0 has left)
    in_flight: dict[int, int] = {0: 0, 1: 0}
    for kind, i in events:
        in_flight[i] += 1 if kind == "start" else -1
        assert in_flight[1 - i] == 0  # never both servers at once
    # seat 1 waited for seat 0's two turns (about 0.05 s each), once each, not once per waiting request
    assert 0.08 < waited < 0.2


def test_a_wave_is_only_taken_where_the_server_runs_it_whole() -> None:
    assert runs_whole(ConcurrencyPoint(concurrency=1), None)  # one request: any server
    assert runs_whole(ConcurrencyPoint(concurrency=16), 64) and runs_whole(ConcurrencyPoint(concurrency=16), 16)
    assert not runs_whole(ConcurrencyPoint(concurrency=16), 8)  # past capacity a block queues all along
    assert not runs_whole(ConcurrencyPoint(concurrency=16), None)  # capacity unstated
    assert not runs_whole(RatePoint(rate=2.0), 64)  # an open loop keeps its schedule


def test_a_concurrency_1_round_takes_turns_and_each_cell_reads_as_if_alone(tmp_path: Path) -> None:
    convs = conversations([f"Question {i}: explain caching." for i in range(6)])
    with FakeEngine(output_tokens=24, slow_chunk_s=0.03, default_fault="slow") as sd, \
            FakeEngine(output_tokens=24, slow_chunk_s=0.03, default_fault="slow", speculative=False) as base:
        ex = attach_pair(sd.url, base.url, convs, interleave=True, concurrency=[1, 3, 4], max_num_seqs=3)
        summary, error, reporter = run_plan(ex, tmp_path / "run")
        assert error is None, repr(error)
    assert "interleaved (in turns, a wave of requests at a time)" in plan_table(summary).title
    unstated = summary.plan.model_copy(update={  # capacity unstated and no concurrency 1: every point in blocks
        "load": summary.plan.load.model_copy(update={"points": [p for p in summary.plan.points if p.id != "c1"]}),
        "configs": [c.model_copy(update={"engine": c.engine.model_copy(update={"max_num_seqs": None})})
                    for c in summary.plan.configs]})
    title = plan_table(summary.model_copy(update={"plan": unstated})).title
    assert "; interleaved" in title and "in turns" not in title
    store = RunStore(tmp_path / "run")
    ids = [c.id for c in summary.plan.configs]
    measured = [r for r in reporter.records if not r.warmup and r.point_id == "c1"]
    # finish order is turn order: laps over the plan's configurations, one request each, never one after its own
    assert [r.config_id for r in measured] == [ids[n % 2] for n in range(len(measured))]
    records = store.read_records()
    for config in summary.configs:
        other = [i for i in ids if i != config.config_id]
        capture = store.read_capture(config.config_id, "c1", 0)
        assert capture is not None and capture.attempts[-1].turns_with == other
        mine = [r for r in records if r.config_id == config.config_id and r.point_id == "c1" and not r.warmup]
        busy = sum(r.e2e_s or 0.0 for r in mine)
        everyone = sum(r.e2e_s or 0.0 for r in records if r.point_id == "c1" and not r.warmup)
        point = config.point("c1", 0)
        # its wall time is its own busy time, not the round's span (which holds the other's requests too)
        assert busy <= point.latency.wall_s < busy + 0.5 * (everyone - busy)
        assert all(0 <= r.start_s and r.start_s + (r.e2e_s or 0.0) <= point.latency.wall_s + 1e-6 for r in mine)
        rb = point.running_batch
        assert rb is not None and rb.samples > 0 and rb.max == 1
        assert rb.mean is not None and rb.mean > 0.6  # sampled on its own turns only: not diluted by the other's
        c3 = store.read_capture(config.config_id, "c3", 0)
        assert c3 is not None and c3.attempts[-1].turns_with == other
        wide = config.point("c3", 0).running_batch
        assert wide is not None and wide.max == 3  # its own wave only: never the other server's requests
        c4 = store.read_capture(config.config_id, "c4", 0)
        assert c4 is not None and c4.attempts[-1].turns_with == []  # a wave of four overfills 3 slots: blocks
    # at concurrency 3 the turns are waves of three: A, B, A, B ... in the order they finish
    waves = [len(list(run)) for _, run in itertools.groupby(r.config_id for r in reporter.records
                                                            if not r.warmup and r.point_id == "c3")]
    assert all(n == 3 for n in waves) and len(waves) >= 4


def test_a_failing_server_ends_the_round_without_holding_up_the_other(tmp_path: Path) -> None:
    """Every request to the speculative server fails: the error-rate limit stops the run, and the baseline's turns,
    waiting on the failing seat, end with it instead of hanging."""
    convs = conversations([f"Question {i}: explain caching." for i in range(12)])
    with FakeEngine(output_tokens=12, default_fault="http_500") as sd, \
            FakeEngine(output_tokens=12, speculative=False) as base:
        ex = attach_pair(sd.url, base.url, convs, interleave=True, concurrency=[1], max_error_rate=0.2)
        summary, error, _ = run_plan(ex, tmp_path / "run")
    assert summary is None and error is not None and "error" in str(error).lower()
    records = RunStore(tmp_path / "run").read_records()
    assert any(not r.ok for r in records) and any(r.ok for r in records)  # both servers had their turns
