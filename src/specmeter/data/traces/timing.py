"""A window of a trace and its time scale: pure functions from a trace to another, the replay's own business left
to it.

A window keeps the requests that arrived from `start_s` for `duration_s` seconds after the first arrival and counts
their arrivals from the window's start, so a replay of it begins where the window does (a quiet stretch at its
start stays quiet). A time scale divides every arrival by its factor: 2 sends the same requests twice as fast, 0.5
half as fast; the order and the lengths stay as the trace has them. A Bailian follow-up whose parent arrived before
the window keeps its parent_chat_id: its row already carries the whole context the service received.
"""

from __future__ import annotations

import math

from specmeter.common.errors import InputError
from specmeter.data.traces.model import Trace


def window(trace: Trace, start_s: float, duration_s: float | None = None) -> Trace:
    """The requests arriving in [start_s, start_s + duration_s) seconds of the trace (to its end without a
    duration), their arrivals counted from start_s; a window that holds none is refused."""
    if not math.isfinite(start_s) or start_s < 0:
        raise InputError(f"trace window start {start_s:g} s: not a time in the trace; give 0 or more seconds "
                         "from the first arrival")
    if duration_s is not None and (not math.isfinite(duration_s) or duration_s <= 0):
        raise InputError(f"trace window duration {duration_s:g} s: not a stretch of time; give more than 0 "
                         "seconds")
    end = math.inf if duration_s is None else start_s + duration_s
    rows = [row.model_copy(update={"arrival_s": row.arrival_s - start_s}) for row in trace.rows
            if start_s <= row.arrival_s < end]
    if not rows:
        stretch = "on" if duration_s is None else f"for {duration_s:g} s"
        raise InputError(f"{trace.source}: no request arrives from {start_s:g} s {stretch} (its arrivals span 0 to "
                         f"{trace.span_s:g} s); choose a window inside them")
    return trace.model_copy(update={"rows": rows})


def scale(trace: Trace, factor: float) -> Trace:
    """The trace with every arrival divided by `factor` (2: twice as fast)."""
    if not math.isfinite(factor) or factor <= 0:
        raise InputError(f"trace time scale {factor:g}: not a speed; give a factor above 0 (2 sends twice as "
                         "fast, 0.5 half as fast)")
    return trace.model_copy(update={"rows": [row.model_copy(update={"arrival_s": row.arrival_s / factor})
                                             for row in trace.rows]})
