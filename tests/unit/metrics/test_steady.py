"""Steady window of a load point and what was delivered inside it (metrics/steady.py)."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from specmeter.metrics.steady import (
    closed_loop_window,
    open_loop_window,
    output_tokens_between,
    requests_finished_between,
)


@dataclass
class Rec:
    start_s: float
    e2e_s: float | None
    chunk_offsets_s: list[float] = field(default_factory=list)
    chunk_tokens: list[int] | None = None
    output_tokens: int | None = None
    ok: bool = True


def _worker(first_start: float, durations: list[float], gap: float) -> list[tuple[float, float]]:
    """One closed-loop worker: each request starts `gap` after its previous one ended."""
    spans = []
    t = first_start
    for d in durations:
        spans.append((t, t + d))
        t += d + gap
    return spans


# 4 slots, ramp-up staggered by 0.5 s; each worker starts its next request `gap` after the previous
# one ended (g below). Durations are chosen so no two ends coincide:
#   w0: 0.0 + 4 x 2.0            ends 2, 4, 6, 8 (+ k g)       last end 8 + 3g
#   w1: 0.5 + 3 x 2.6            ends 3.1, 5.7, 8.3 (+ k g)
#   w2: 1.0 + 5 x 1.5            ends 2.5, 4, 5.5, 7, 8.5 (+ k g), last start 7 + 4g
#   w3: 1.5 + [3.0, 3.0, 2.2]    starts 1.5, 4.5 + g, 7.5 + 2g; ends 4.5, 7.5 + g, 9.7 + 2g
# All four are in flight from 1.5 (w3's first send). The last send is w3's at 7.5 + 2g; the first
# end after it is w0 running out of work at 8 + 3g. So the window is [1.5, 8 + 3g].
WORKERS: list[tuple[float, list[float]]] = [
    (0.0, [2.0] * 4),
    (0.5, [2.6] * 3),
    (1.0, [1.5] * 5),
    (1.5, [3.0, 3.0, 2.2]),
]


def _closed_loop(gap: float) -> list[tuple[float, float]]:
    return [s for first, durations in WORKERS for s in _worker(first, durations, gap)]


def test_closed_loop_window_of_staggered_ramp_up_and_drain() -> None:
    gap = 1e-3  # the client building its next request
    spans = _closed_loop(gap)
    window = closed_loop_window(spans, slots=4)
    assert window == pytest.approx((1.5, 8.0 + 3 * gap))
    wall = max(end for _, end in spans)
    assert window is not None and 0.0 <= window[0] < window[1] <= wall
    # Input order does not matter.
    assert closed_loop_window(list(reversed(spans)), slots=4) == window


def test_back_to_back_turns_do_not_cut_the_window() -> None:
    # Multi-turn replay: each next turn starts 1 us after the previous ended, so in flight dips
    # to 3 for 1 us at every turn boundary (first at 2.0). The window must still run from full
    # load to the drain.
    gap = 1e-6
    window = closed_loop_window(_closed_loop(gap), slots=4)
    assert window == pytest.approx((1.5, 8.0 + 3 * gap), abs=1e-9)


def test_closed_loop_never_full_is_none() -> None:
    # Three workers for four slots (too few conversations): never 4 in flight.
    spans = [s for first, durations in WORKERS[:3] for s in _worker(first, durations, 0.0)]
    assert closed_loop_window(spans, slots=4) is None
    assert closed_loop_window([], slots=1) is None
    # Sequential requests never overlap, even when one starts the instant another ends.
    assert closed_loop_window([(0.0, 1.0), (1.0, 2.0), (2.0, 3.0)], slots=2) is None


def test_closed_loop_single_slot_and_empty_window() -> None:
    # One slot: full from the first send; drain starts when the last request (sent at 2.01) ends.
    assert closed_loop_window([(0.0, 1.0), (1.01, 2.0), (2.01, 3.0)], slots=1) == (0.0, 3.0)
    # Full load reached only at the last sends, the instant a request ends: empty window.
    assert closed_loop_window([(0.0, 1.0), (1.0, 2.0), (1.0, 3.0)], slots=2) is None


def test_closed_loop_rejects_bad_input() -> None:
    with pytest.raises(ValueError, match="slots"):
        closed_loop_window([(0.0, 1.0)], slots=0)
    with pytest.raises(ValueError, match="spans"):
        closed_loop_window([(2.0, 1.0)], slots=1)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.floats(min_value=0.0, max_value=5.0),
            st.lists(st.floats(min_value=0.01, max_value=3.0), min_size=1, max_size=6),
        ),
        min_size=1,
        max_size=6,
    ),
    st.floats(min_value=0.0, max_value=1e-3),
)
def test_closed_loop_window_properties(workers: list[tuple[float, list[float]]], gap: float) -> None:
    spans = [s for first, durations in workers for s in _worker(first, durations, gap)]
    slots = len(workers)
    window = closed_loop_window(spans, slots)
    if window is None:
        return
    start, end = window
    wall = max(e for _, e in spans)
    assert 0.0 <= start < end <= wall
    # The window opens on a send and closes on an end, after the last send.
    assert start in {s for s, _ in spans}
    assert end in {e for _, e in spans}
    assert end >= max(s for s, _ in spans)
    # Just after it opens, all slots are busy.
    assert sum(1 for s, e in spans if s <= start < e) >= slots


def test_open_loop_window() -> None:
    assert open_loop_window([0.0, 0.4, 1.1, 2.5]) == (0.0, 2.5)
    assert open_loop_window([0.3, 2.0, 1.0]) == (0.3, 2.0)
    assert open_loop_window([]) is None
    assert open_loop_window([1.0]) is None
    assert open_loop_window([1.0, 1.0]) is None


# Chunks straddle the window [1.0, 2.0]:
#   a: start 0.5, chunks at 0.7, 1.0, 1.5, 2.5 (tokens 1, 2, 3, 4) -> 2 + 3 inside = 5
#   b: start 1.75, chunks at 1.875, 2.0, 2.125; no chunk_tokens, 9 tokens -> 3 per chunk, 2 inside = 6
#   c: start 0.0, chunks at 0.2, 1.2 with mismatched chunk_tokens [5], 4 tokens -> 2 per chunk, 1 inside = 2
#   d: failed, chunks inside the window -> 0
#   e: no chunks -> 0
#   f: chunks but no token count at all -> 0
RECORDS: list[Rec] = [
    Rec(start_s=0.5, e2e_s=2.1, chunk_offsets_s=[0.2, 0.5, 1.0, 2.0], chunk_tokens=[1, 2, 3, 4], output_tokens=10),
    Rec(start_s=1.75, e2e_s=0.5, chunk_offsets_s=[0.125, 0.25, 0.375], output_tokens=9),
    Rec(start_s=0.0, e2e_s=1.3, chunk_offsets_s=[0.2, 1.2], chunk_tokens=[5], output_tokens=4),
    Rec(start_s=1.1, e2e_s=0.5, chunk_offsets_s=[0.1, 0.2], chunk_tokens=[7, 7], output_tokens=14, ok=False),
    Rec(start_s=1.2, e2e_s=0.1, output_tokens=3),
    Rec(start_s=1.3, e2e_s=0.2, chunk_offsets_s=[0.1]),
]


def test_output_tokens_between_straddling_chunks() -> None:
    assert output_tokens_between(RECORDS, 1.0, 2.0) == pytest.approx(5 + 6 + 2)


def test_output_tokens_over_the_whole_span_is_the_total() -> None:
    # Every chunk of an ok record is counted once: chunk_tokens where they match, else output_tokens.
    assert output_tokens_between(RECORDS, 0.0, 10.0) == pytest.approx(10 + 9 + 4)
    # Adjacent windows split the total (no chunk sits exactly on 1.25).
    assert output_tokens_between(RECORDS, 0.0, 1.25) + output_tokens_between(RECORDS, 1.25, 10.0) == pytest.approx(23)
    assert output_tokens_between([], 0.0, 1.0) == 0.0


def test_requests_finished_between() -> None:
    # Ends: a 2.6, b 2.25, c 1.3, d failed, e 1.3, f 1.5.
    assert requests_finished_between(RECORDS, 1.0, 2.0) == 3  # c, e, f
    assert requests_finished_between(RECORDS, 2.0, 3.0) == 2  # a, b
    assert requests_finished_between(RECORDS, 0.0, 10.0) == 5  # all ok records
    unfinished = Rec(start_s=0.0, e2e_s=None, ok=True)
    assert requests_finished_between([unfinished], 0.0, 10.0) == 0


def test_reversed_interval_raises() -> None:
    with pytest.raises(ValueError, match="t1"):
        output_tokens_between(RECORDS, 2.0, 1.0)
    with pytest.raises(ValueError, match="t1"):
        requests_finished_between(RECORDS, 2.0, 1.0)

