"""How late a scheduled load kept its schedule: each request's send time minus the time its schedule gave it (an
open loop's drawn arrival, a trace's own arrival divided by its scale). A replay whose sends slip is offering
another load than the trace's, so the error is measured at every point, not assumed."""

from __future__ import annotations

from collections.abc import Sequence

from specmeter.metrics.stats import summarize
from specmeter.schemas.metrics import Distribution
from specmeter.schemas.records import RequestRecord


def schedule_error(records: Sequence[RequestRecord]) -> Distribution | None:
    """Seconds each scheduled send went out after its time (p50, p99 ...); None where nothing was scheduled (a
    closed loop). A capped open loop's wait for a slot is in it: its send waited too."""
    errors = [r.start_s - r.scheduled_s for r in records if r.scheduled_s is not None]
    return summarize(errors, ci=False) if errors else None
