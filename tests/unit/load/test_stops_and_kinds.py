"""Stop conditions (load/stops.py, the rounds' budgets) and the load-kind registry (load/kinds/), without a
server: each condition on its own, how a set composes them, and what every kind owns."""

from __future__ import annotations

import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any, get_args

import pytest

from specmeter.common.errors import EngineDied, ErrorRateExceeded
from specmeter.config.models import ConcurrencyPoint, LoadPoint, LoadSpec, RatePoint
from specmeter.engines.server_log import failure_reason
from specmeter.execution.rounds import MaxRequests, MaxRounds, MaxSeconds, RoundsRun, budgets
from specmeter.execution.runner import _Run
from specmeter.load.kinds import KINDS, kind_of
from specmeter.load.stops import (
    MIN_REQUESTS_FOR_ERROR_LIMIT,
    DurationFloor,
    ErrorRateLimit,
    PointProgress,
    ServerAlive,
    Stop,
    StopConditions,
)
from specmeter.load.traffic import PointKey, Traffic
from specmeter.schemas.analysis import Crossover, Speedup
from specmeter.schemas.records import RequestRecord


def record(ok: bool = True, start: float = 0.0, end: float = 1.0, conv: str = "c0",
           scheduled: float | None = None) -> RequestRecord:
    rec = RequestRecord(config_id="a", point_id="p", repeat=0, conversation_id=conv, turn=0, category="qa",
                        scheduled_s=scheduled)
    rec.start_s, rec.e2e_s, rec.ok = start, end - start, ok
    if not ok:
        rec.error_kind, rec.error = "http_5xx", "HTTP 500: boom"  # type: ignore[assignment]
    return rec


def progress(oks: list[bool], elapsed: float = 0.0, sent: int = 0) -> PointProgress:
    state = PointProgress(lambda: elapsed)
    for ok in oks:
        state.add(record(ok), 0)
    state.sent = sent
    return state


class Always:
    def __init__(self, stop: Stop | None) -> None:
        self.stop, self.checked = stop, 0

    def check(self, state: Any, /) -> Stop | None:
        self.checked += 1
        return self.stop


def test_a_failure_wins_over_a_clean_end_whatever_the_order() -> None:
    clean, fail = Stop("enough"), Stop("broken", ErrorRateExceeded(1, 1, 0.0, None))
    assert StopConditions(Always(clean), Always(fail)).check(None) is fail
    assert StopConditions(Always(None), Always(Stop("first")), Always(Stop("second"))).check(None) == Stop("first")
    assert StopConditions(Always(None)).check(None) is None
    assert StopConditions().check(None) is None


def test_error_rate_limit_counts_from_its_minimum_and_says_what_errors_says() -> None:
    limit = ErrorRateLimit(0.25)
    assert limit.check(progress([False] * (MIN_REQUESTS_FOR_ERROR_LIMIT - 1))) is None  # not a rate yet
    assert limit.check(progress([True] * 6 + [False] * 2)) is None  # 25% is not above 25%
    stop = limit.check(progress([True] * 5 + [False] * 3))
    assert stop is not None and isinstance(stop.error, ErrorRateExceeded)
    assert stop.why == str(ErrorRateExceeded(3, 8, 0.25, "HTTP 500: boom")) == str(stop.error)


def test_duration_floor_needs_both_the_time_and_the_requests() -> None:
    floor = DurationFloor(2.0, 8)
    assert floor.check(progress([], elapsed=2.0, sent=7)) is None
    assert floor.check(progress([], elapsed=1.9, sent=8)) is None
    stop = floor.check(progress([], elapsed=2.0, sent=8))
    assert stop is not None and stop.error is None  # a clean end


def test_server_alive_looks_only_when_a_request_failed() -> None:
    asked: list[float] = []

    def dead(wait_s: float) -> bool:
        asked.append(wait_s)
        return False

    cond = ServerAlive(dead, lambda: "the vllm server s0 died")
    assert cond.check(progress([])) is None and cond.check(progress([True])) is None
    assert not asked  # a success says the server answered: no need to ask
    stop = cond.check(progress([True, False]))
    assert stop is not None and isinstance(stop.error, EngineDied) and str(stop.error) == "the vllm server s0 died"
    assert asked == [0.0]  # an HTTP error from a live server: no wait
    refused = progress([])
    failed = record(False)
    failed.error_kind = "connection"
    refused.add(failed, 0)
    assert cond.check(refused) is not None and asked[-1] == cond.settle_s > 0  # a refused connection: wait for the exit
    assert ServerAlive(lambda wait_s: True, lambda: "unused").check(progress([False])) is None


def test_the_runner_watches_a_launched_server_only(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_text("starting\nKilled\n")
    proc = SimpleNamespace(alive=lambda wait_s=0.0: False, ended=lambda: "died", log_path=log)
    server = SimpleNamespace(process=proc, engine=SimpleNamespace(kind="vllm"), name="s0")
    (alive,) = _Run._stops(server)  # type: ignore[arg-type]
    stop = alive.check(progress([False]))
    assert stop is not None and isinstance(stop.error, EngineDied)
    assert str(stop.error) == f"the vllm server s0 died during the run: {failure_reason(log)} (whole log: {log})"
    assert "\n" not in str(stop.error)  # one line, with the log's root cause
    assert _Run._stops(SimpleNamespace(process=None, urls=["http://h:1"])) == []  # type: ignore[arg-type]  # attached: not ours


def test_traffic_checks_its_conditions_after_handing_each_record_on() -> None:
    seen: list[RequestRecord] = []
    traffic = Traffic(None, LoadSpec(), "m", PointKey("a", "p"), seen.append, False,  # type: ignore[arg-type]
                      [ServerAlive(lambda wait_s: False, lambda: "gone"), ErrorRateLimit(0.0)])
    traffic.deliver(record(True), ended_turns=1)
    assert traffic.progress.sent == 1 and traffic.stopped is None
    with pytest.raises(EngineDied, match="gone"):  # the caller's condition comes before the error rate
        traffic.deliver(record(False), ended_turns=1)
    assert len(seen) == len(traffic.result.records) == 2  # stored before the stop

    timed = Traffic(None, LoadSpec(), "m", PointKey("a", "p"), seen.append, False,  # type: ignore[arg-type]
                    [DurationFloor(0.0, 2)], relay=True)
    timed.deliver(record(True))
    assert timed.stopped is None  # the conversation goes on: nothing sent counts yet
    timed.deliver(record(True), ended_turns=2)
    assert timed.stopped is not None and timed.result.records == []  # relayed records stay with the parent


def test_round_budgets_in_order_and_only_those_set() -> None:
    run = RoundsRun(rounds=3, per_round=lambda: 20, began=time.monotonic() - 10)
    assert MaxRounds(3).check(run) == Stop("max_rounds (3) reached")
    assert MaxRequests(80).check(run) is None  # a fourth round makes 80
    assert MaxRequests(79).check(run) == Stop(
        "max_requests (79) reached: another round would send 80 per configuration")
    assert MaxSeconds(5).check(run) == Stop("max_seconds (5) reached")
    assert MaxSeconds(5).check(RoundsRun(3, lambda: 20, None)) is None  # not begun in this process
    load = LoadSpec(precision="adaptive", max_rounds=3, max_requests=79, max_seconds=5)
    assert budgets(load).check(run) == Stop("max_rounds (3) reached")  # the first set, in order
    assert budgets(LoadSpec(precision="adaptive", max_rounds=9)).check(run) is None


def test_every_point_model_has_its_kind_and_every_kind_its_point_model() -> None:
    tags = {model.model_fields["kind"].default for model in get_args(get_args(LoadPoint)[0])}
    assert set(KINDS) == tags
    for name, kind in KINDS.items():
        assert kind.name == name and kind.point_model.model_fields["kind"].default == name
        assert kind.axis in get_args(Crossover.model_fields["axis"].annotation)
        assert kind.headline_metric in get_args(Speedup.model_fields["decided_on"].annotation)


@pytest.mark.parametrize("point", [ConcurrencyPoint(concurrency=3), RatePoint(rate=1.5, max_concurrency=2),
                                   RatePoint(rate=2.0, arrival="gamma", burstiness=0.5)])
def test_a_kind_is_bound_to_its_point(point: ConcurrencyPoint | RatePoint) -> None:
    kind = kind_of(point)
    assert isinstance(kind, KINDS[point.kind]) and kind.point is point
    assert kind.axis == point.axis and kind.axis_value() == point.load
    assert kind.strategy(LoadSpec()).slots == point.slots


def test_each_kind_finds_its_own_steady_window() -> None:
    # two workers, both busy from 0.5 to the first end after the last start (2.1): the closed-loop window
    closed = [record(start=0.0, end=2.0, conv="a"), record(start=0.5, end=3.0, conv="b"),
              record(start=2.1, end=4.0, conv="a")]
    steady = kind_of(ConcurrencyPoint(concurrency=2)).steady_state(closed, wall_s=4.0)
    assert steady is not None and (steady.start_s, steady.end_s, steady.basis) == (0.5, 3.0, "all slots busy")
    # an open loop's window spans its scheduled sends, whatever the requests took
    opened = [record(start=s + 0.01, end=s + 5, scheduled=s) for s in (0.0, 1.0, 2.5)]
    steady = kind_of(RatePoint(rate=1.0)).steady_state(opened, wall_s=8.0)
    assert steady is not None and (steady.start_s, steady.end_s, steady.basis) == (0.0, 2.5, "arrivals running")
    assert kind_of(RatePoint(rate=1.0)).steady_state(opened[:1], wall_s=8.0) is None  # one arrival: no span
