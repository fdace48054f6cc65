"""The steady window of one load point, and what was delivered inside it.

Throughput over a whole point includes ramp-up (slots still filling, or the arrival process just
started) and drain (no new work, the last requests finishing alone), so it understates what the
engine sustains under the applied load. These helpers find the window where the load was really
applied (each load kind, load/kinds/, picks its own) and count output tokens and finished requests inside it.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Protocol

from specmeter.metrics.stats import summarize
from specmeter.schemas.metrics import SteadyState
from specmeter.schemas.records import RequestRecord


class Timeline(Protocol):
    """What this module reads of a request record. Read-only properties, so that pydantic models,
    plain and frozen dataclasses all qualify and this module need not import the record class."""

    @property
    def start_s(self) -> float:
        """Send time, seconds since the point started."""

    @property
    def e2e_s(self) -> float | None:
        """Request duration; None when it never finished."""

    @property
    def chunk_offsets_s(self) -> list[float]:
        """Arrival of each streamed content chunk, seconds after send."""

    @property
    def chunk_tokens(self) -> list[int] | None:
        """Tokens in each chunk, when known."""

    @property
    def output_tokens(self) -> int | None:
        """Total output tokens, from the server's usage."""

    @property
    def ok(self) -> bool: ...


def closed_loop_window(spans: Sequence[tuple[float, float]], slots: int) -> tuple[float, float] | None:
    """(start, end) of the steady part of a closed-loop point with `slots` concurrent workers.

    `spans` are the (start, end) of every request. The window opens the first time `slots`
    requests are in flight together, and closes at the first request end at or after the last
    request start: from then on no new work arrives and the point is draining. Dips in between do
    not close it, since a worker replaying a conversation starts its next turn microseconds after
    the previous one ended. None when `slots` requests were never in flight together, or when the
    window is empty.
    """
    if slots < 1:
        raise ValueError(f"slots must be >= 1, got {slots}")
    for start, end in spans:
        if end < start:
            raise ValueError(f"spans: a request ends ({end}) before it starts ({start})")
    # Ends sort before starts at the same instant: a slot freed and retaken at once is never
    # counted twice.
    events = sorted([(start, 1) for start, _ in spans] + [(end, -1) for _, end in spans])
    in_flight = 0
    window_start: float | None = None
    for t, delta in events:
        in_flight += delta
        if in_flight >= slots:
            window_start = t
            break
    if window_start is None:
        return None
    last_start = max(start for start, _ in spans)
    # The request that started last ends at or after last_start, so this is never empty.
    window_end = min(end for _, end in spans if end >= last_start)
    if window_end <= window_start:
        return None
    return window_start, window_end


def open_loop_window(scheduled: Sequence[float]) -> tuple[float, float] | None:
    """(first, last) scheduled send of an open-loop point: the span over which the arrival process
    applied its rate. None for fewer than 2 sends, or when they all share one instant (no span
    to divide by)."""
    if len(scheduled) < 2:
        return None
    first, last = min(scheduled), max(scheduled)
    if last <= first:
        return None
    return first, last


def output_tokens_between(records: Iterable[Timeline], t0: float, t1: float) -> float:
    """Output tokens of ok records whose chunk arrived in [t0, t1] (arrival = start_s + offset).

    Each chunk counts its own tokens when chunk_tokens matches the chunks; otherwise the record's
    output_tokens is spread evenly over its chunks (a fractional count, hence the float). A record
    with no chunks, or with no token count at all, contributes nothing.
    """
    _check_interval(t0, t1)
    total = 0.0
    for rec in records:
        offsets = rec.chunk_offsets_s
        if not rec.ok or not offsets:
            continue
        per_chunk: Sequence[float]
        if rec.chunk_tokens is not None and len(rec.chunk_tokens) == len(offsets):
            per_chunk = rec.chunk_tokens
        elif rec.output_tokens is not None:
            per_chunk = [rec.output_tokens / len(offsets)] * len(offsets)
        else:
            continue
        for offset, tokens in zip(offsets, per_chunk):
            if t0 <= rec.start_s + offset <= t1:
                total += tokens
    return total


def requests_finished_between(records: Iterable[Timeline], t0: float, t1: float) -> int:
    """How many ok records ended (start_s + e2e_s) in [t0, t1]."""
    _check_interval(t0, t1)
    return sum(
        1
        for rec in records
        if rec.ok and rec.e2e_s is not None and t0 <= rec.start_s + rec.e2e_s <= t1
    )


def _check_interval(t0: float, t1: float) -> None:
    if t1 < t0:
        raise ValueError(f"t1 ({t1}) must not be before t0 ({t0})")


def steady_state(measured: Sequence[RequestRecord], window: tuple[float, float] | None, basis: str,
                 wall_s: float) -> SteadyState | None:
    """A point's figures over its steady `window` (found by its load kind, on `basis`) from its `measured`
    requests (warm-up left out); None when the load never got steady (no window)."""
    if window is None or wall_s <= 0:
        return None
    t0, t1 = window
    length = t1 - t0
    inside = [r for r in measured if r.ok and r.start_s >= t0 and (r.end_s or t1 + 1) <= t1]
    return SteadyState(
        basis=basis, start_s=t0, end_s=t1, share=min(1.0, length / wall_s),
        output_tokens_per_s=output_tokens_between(measured, t0, t1) / length,
        requests_per_s=requests_finished_between(measured, t0, t1) / length,
        tpot_s=summarize([t for r in inside if (t := r.tpot_s) is not None]),
        ttft_s=summarize([r.ttft_s for r in inside if r.ttft_s is not None]),
    )
