"""A phase-shift workload's phases for every configuration at every point, on the requests its speedups are
paired on (the rounds other work did not disturb, analysis.headtohead.Side)."""

from __future__ import annotations

from collections.abc import Sequence

from specmeter.analysis.headtohead import Side
from specmeter.metrics.phases import phase_breakdown
from specmeter.schemas.metrics import PhaseBreakdown
from specmeter.schemas.records import RequestRecord
from specmeter.schemas.results import RunSummary


def phase_breakdowns(summary: RunSummary, records: Sequence[RequestRecord]) -> list[PhaseBreakdown]:
    """[] unless the workload had phases."""
    if summary.plan.workload.phases is None:
        return []
    out = []
    for config in summary.configs:
        for point in summary.plan.points:
            side = Side.of(config, records, point.id)
            if (found := phase_breakdown(config.config_id, point.id, side.requests.values())) is not None:
                out.append(found)
    return out
