"""A trace's window and time scale, by what must hold for any trace: a window keeps exactly the requests of its
stretch, counted from its start, and windows side by side hold every request once; a scale of f divides every gap
by f, keeps the order and the requests, and two scales compose."""

from __future__ import annotations

import math
from itertools import pairwise

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from specmeter.common.errors import InputError
from specmeter.data.traces.model import Trace, TraceRow
from specmeter.data.traces.timing import scale, window

GAPS = st.lists(st.floats(min_value=0, max_value=600, allow_nan=False), min_size=1, max_size=40)
FACTORS = st.floats(min_value=0.01, max_value=100, allow_nan=False)


def _trace(gaps: list[float]) -> Trace:
    """A trace whose first request arrives at 0 and each next one its gap after the one before (the first gap
    unused: a trace counts from its first arrival)."""
    arrivals = [0.0]
    for gap in gaps[1:]:
        arrivals.append(arrivals[-1] + gap)
    rows = [TraceRow(line=i + 1, arrival_s=t, input_length=i, output_length=1) for i, t in enumerate(arrivals)]
    return Trace(source="t.jsonl", format="mooncake", block_tokens=512, rows=rows)


def _gaps(trace: Trace) -> list[float]:
    arrivals = [row.arrival_s for row in trace.rows]
    return [b - a for a, b in pairwise(arrivals)]


@settings(max_examples=60, deadline=None)
@given(GAPS, st.floats(min_value=0, max_value=3000), st.floats(min_value=0.5, max_value=3000))
def test_a_window_keeps_its_stretch_counted_from_its_start(gaps: list[float], start: float, duration: float) -> None:
    trace = _trace(gaps)
    inside = [row for row in trace.rows if start <= row.arrival_s < start + duration]
    if not inside:
        with pytest.raises(InputError, match="no request arrives"):
            window(trace, start, duration)
        return
    kept = window(trace, start, duration)
    assert [row.line for row in kept.rows] == [row.line for row in inside]
    assert all(0 <= row.arrival_s < duration for row in kept.rows)
    assert _gaps(kept) == pytest.approx([b.arrival_s - a.arrival_s for a, b in pairwise(inside)], abs=1e-6)
    assert kept.rows[0].arrival_s == pytest.approx(inside[0].arrival_s - start, abs=1e-6)
    # Only the arrival moves: lengths and the file's line stay the request's own.
    assert [r.model_dump(exclude={"arrival_s"}) for r in kept.rows] == [
        r.model_dump(exclude={"arrival_s"}) for r in inside]
    assert (kept.source, kept.format, kept.block_tokens) == (trace.source, trace.format, trace.block_tokens)


@settings(max_examples=60, deadline=None)
@given(GAPS, st.floats(min_value=1, max_value=2000))
def test_windows_side_by_side_hold_every_request_once(gaps: list[float], duration: float) -> None:
    trace = _trace(gaps)
    lines: list[int] = []
    for k in range(math.floor(trace.span_s / duration) + 1):
        try:
            lines += [row.line for row in window(trace, k * duration, duration).rows]
        except InputError:  # a stretch without requests
            continue
    assert lines == [row.line for row in trace.rows]


def test_a_window_without_a_duration_runs_to_the_end_and_from_zero_is_the_trace() -> None:
    trace = _trace([0, 5, 5, 5])
    assert window(trace, 0) == trace
    assert [row.line for row in window(trace, 6).rows] == [3, 4]


@settings(max_examples=60, deadline=None)
@given(GAPS, FACTORS)
def test_a_scale_divides_every_gap_and_keeps_the_requests(gaps: list[float], factor: float) -> None:
    trace = _trace(gaps)
    scaled = scale(trace, factor)
    assert [gap * factor for gap in _gaps(scaled)] == pytest.approx(_gaps(trace), rel=1e-9, abs=1e-9)
    assert scaled.rows[0].arrival_s == 0
    assert [r.model_dump(exclude={"arrival_s"}) for r in scaled.rows] == [
        r.model_dump(exclude={"arrival_s"}) for r in trace.rows]


@settings(max_examples=60, deadline=None)
@given(GAPS, FACTORS, FACTORS)
def test_two_scales_are_one_of_their_product(gaps: list[float], first: float, second: float) -> None:
    trace = _trace(gaps)
    twice = [row.arrival_s for row in scale(scale(trace, first), second).rows]
    assert twice == pytest.approx([row.arrival_s for row in scale(trace, first * second).rows], rel=1e-9, abs=1e-9)


def test_a_faster_scale_sends_sooner_and_one_changes_nothing() -> None:
    trace = _trace([0, 2, 3])
    assert scale(trace, 1) == trace
    assert scale(trace, 2).span_s < trace.span_s < scale(trace, 0.5).span_s


@pytest.mark.parametrize(("call", "says"), [
    (lambda t: window(t, -1, 5), "window start -1 s"),
    (lambda t: window(t, math.nan, 5), "window start nan s"),
    (lambda t: window(t, 0, 0), "window duration 0 s"),
    (lambda t: window(t, 0, -2), "window duration -2 s"),
    (lambda t: window(t, 100, 5), "t.jsonl: no request arrives from 100 s for 5 s (its arrivals span 0 to 5 s)"),
    (lambda t: scale(t, 0), "time scale 0"),
    (lambda t: scale(t, -2), "time scale -2"),
    (lambda t: scale(t, math.inf), "time scale inf"),
])
def test_a_window_or_scale_that_means_nothing_is_refused_in_one_line(call: object, says: str) -> None:
    with pytest.raises(InputError) as caught:
        call(_trace([0, 2, 3]))  # type: ignore[operator]
    message = str(caught.value)
    assert says in message and "\n" not in message and "; " in message, message  # what is wrong, then the fix
