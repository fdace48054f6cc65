"""Trace replay as a load kind, against the fake engine: every row sent once, in the trace's order, on the trace's
own schedule divided by the point's scale (scale 2 sends the same requests in half the time), its schedule error
measured per point, and every configuration and the baseline offered the identical schedule and content."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from fakeengine.drive import attach_pair, run_plan
from fakeengine.server import FakeEngine
from specmeter.common.errors import InputError
from specmeter.config.models import LoadSpec, TracePoint
from specmeter.data.model import Conversation
from specmeter.load import eventloop
from specmeter.load.client import OpenAIClient
from specmeter.load.kinds import kind_of
from specmeter.load.point import point_conversations, run_point
from specmeter.load.replicas import Replicas
from specmeter.load.traffic import PointKey
from specmeter.metrics.schedule import schedule_error
from specmeter.schemas.records import RequestRecord

pytestmark = pytest.mark.timeout(60)
# Arrivals as a trace gives them (seconds from its first), uneven, a burst among them, over 1.2 s.
ARRIVALS = [0.0, 0.05, 0.3, 0.31, 0.32, 0.6, 0.9, 1.2]


def trace_convs() -> list[Conversation]:
    """One conversation a row, as data/traces/content.py makes them: the row's arrival in its metadata."""
    return [Conversation(id=f"trace-{i + 1}", category="qa", turns=[f"Row {i}: explain caching briefly."],
                         max_tokens=8, metadata={"arrival_s": at}) for i, at in enumerate(ARRIVALS)]


def replay(url: str, scale: float) -> list[RequestRecord]:
    point, load = TracePoint(scale=scale), LoadSpec(warmup=0, max_tokens=8, trace_scale=[scale])
    delivered: list[RequestRecord] = []

    async def go() -> None:
        async with Replicas([OpenAIClient(url, timeout_s=30)]) as client:
            todo = point_conversations(trace_convs(), point, load)
            await run_point(client, point, todo, load, "m", PointKey("cfg", point.id), delivered.append)

    with eventloop.runner(load.event_loop) as loop_runner:
        loop_runner.run(go())
    return delivered


def test_every_row_is_sent_once_in_trace_order_on_the_scaled_schedule() -> None:
    with FakeEngine(output_tokens=8) as server:
        spans = {}
        for scale in (1.0, 2.0):
            before = len(server.completion_requests())
            records = replay(server.url, scale)
            sent = [r.body["messages"][-1]["content"] for r in server.completion_requests()[before:]]
            assert sent == [c.turns[0] for c in trace_convs()]  # each row once, in the trace's order
            assert [r.conversation_id for r in sorted(records, key=lambda r: r.start_s)] == [
                c.id for c in trace_convs()]
            assert all(r.ok for r in records)
            assert [r.scheduled_s for r in sorted(records, key=lambda r: r.start_s)] == pytest.approx(
                [at / scale for at in ARRIVALS])
            error = schedule_error(records)
            assert error is not None and error.count == len(ARRIVALS)
            assert error.p50 is not None and error.p99 is not None and 0 <= error.p50 <= error.p99 < 0.25
            spans[scale] = max(r.start_s for r in records) - min(r.start_s for r in records)
        assert not server.problems
    assert spans[1.0] / spans[2.0] == pytest.approx(2.0, rel=0.2)  # twice as fast on the schedule


def test_a_trace_point_is_sent_once_never_cycled_and_needs_its_arrivals() -> None:
    point = TracePoint(scale=0.5)
    assert point_conversations(trace_convs(), point, LoadSpec(trace_scale=[0.5])) == trace_convs()
    kind = kind_of(point)
    assert (kind.axis, kind.axis_value(), kind.headline_metric, point.id) == ("rate", 0.5, "tpot", "t0.5x")
    assert kind.strategy(LoadSpec()).slots is None
    bare = [Conversation(id="q", turns=["hi"])]
    with pytest.raises(InputError, match="conversation q has no trace arrival"):
        list(kind.strategy(LoadSpec()).plan(bare, seed="s"))


def test_trace_points_from_a_sweep_files_keys() -> None:
    load = LoadSpec.model_validate({"trace_scale": [0.5, 1, 2]})
    assert [p.id for p in load.points] == ["t0.5x", "t1x", "t2x"]
    assert LoadSpec.model_validate({"points": [{"scale": 3}]}).points == [TracePoint(scale=3)]
    with pytest.raises(ValueError, match="either as points or as concurrency/request_rate/trace_scale"):
        LoadSpec.model_validate({"trace_scale": [1], "points": [2]})
    with pytest.raises(ValueError, match="not a time scale"):
        LoadSpec.model_validate({"trace_scale": ["fast"]})
    with pytest.raises(ValueError, match="greater than 0"):
        LoadSpec.model_validate({"trace_scale": [0]})


def test_every_configuration_and_the_baseline_replay_the_same_schedule(tmp_path: Path) -> None:
    load: dict[str, Any] = {"trace_scale": [1, 2]}
    with FakeEngine(output_tokens=8) as spec, FakeEngine(output_tokens=8, speculative=False) as base:
        summary, error, _ = run_plan(attach_pair(spec.url, base.url, trace_convs(), repeats=2, interleave=True,
                                                 **load), tmp_path / "run")
        assert error is None, repr(error)
        for server in (spec, base):  # two points, two repeats: the trace four times over, each time in order
            sent = [r.body["messages"][-1]["content"] for r in server.completion_requests()]
            assert sent == [c.turns[0] for c in trace_convs()] * 4
    by_config = {c.config_id: c for c in summary.configs}
    assert len(by_config) == 2
    for config in by_config.values():
        assert {p.point_id for p in config.points} == {"t1x", "t2x"}
        for result in config.points:
            assert result.schedule_error is not None and result.schedule_error.count == len(ARRIVALS)
            assert result.schedule_error.p99 is not None and result.schedule_error.p99 < 0.25
