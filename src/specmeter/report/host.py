"""How quiet the machine was, in words: one line for the run (analysis.host judged each round; this renders it)."""

from __future__ import annotations

from specmeter.report.grid import point_label
from specmeter.schemas.results import RunSummary


def host_line(summary: RunSummary) -> tuple[str, bool] | None:
    """The run's host line and whether it warns (a round was disturbed); None where no round was read."""
    host = summary.analysis.host
    if host is None:
        return None
    niced = (f"; lowered-priority work took up to {host.niced_share:.0%}, which runs on what the run leaves idle"
             if host.niced_share >= host.disturbed_share else "")
    if host.quiet:
        return (f"machine quiet: other work took {host.median_foreign_share:.0%} of the CPU in the median round "
                f"and {host.max_foreign_share:.0%} at most, under the {host.disturbed_share:.0%} that disturbs a "
                f"round ({host.rounds} rounds read){niced}"), False
    points = ", ".join(point_label(summary, p) for p in host.disturbed_points)
    return (f"machine busy: {len(host.disturbed)} of {host.rounds} rounds disturbed by other work (up to "
            f"{host.max_foreign_share:.0%} of the CPU; {host.disturbed_share:.0%} disturbs a round), at {points}: "
            "their evidence is set aside where a point has clean rounds, and a speedup resting on disturbed rounds "
            "alone says 'disturbed', not a verdict; run it again on a quiet machine"
            f" ({'; '.join(host.disturbed)}){niced}"), True
