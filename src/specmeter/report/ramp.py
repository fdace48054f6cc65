"""What a load ramp did (load.stop_at_saturation): each step judged, a point against the next lower load, with every
configuration's throughput and latency ratios, and where the ramp stopped going up and what it skipped. Drawn from
RunSummary.ramp as stored; nothing here decides."""

from __future__ import annotations

from specmeter.report.grid import Grid, Note, grid, point_label
from specmeter.schemas.analysis import Ratio
from specmeter.schemas.ramp import AxisRamp
from specmeter.schemas.results import RunSummary


def _bounded(r: Ratio, low: float | None, high: float | None) -> str:
    if r.value is None:
        return "-"
    return f"{r.value:.2f}x" + (f" [{low:.2f}, {high:.2f}]" if low is not None and high is not None else "")


def _axis(ramp: AxisRamp) -> str:
    axis = "concurrency" if ramp.axis == "concurrency" else "request rate"
    return axis if ramp.input_len is None else f"{axis} at {ramp.input_len} input tokens"


def stop_line(summary: RunSummary, ramp: AxisRamp) -> str | None:
    """One line: where the ramp of the axis stopped and what it skipped (None: it never saturated)."""
    if ramp.saturated_at is None:
        return None
    skipped = ", ".join(point_label(summary, p) for p in ramp.skipped) or "no higher load was planned"
    return (f"the load ramp ({_axis(ramp)}) stopped at {point_label(summary, ramp.saturated_at)}: every server had "
            f"saturated there (throughput no longer rising, latency growing); skipped: {skipped}")


def ramp_tables(summary: RunSummary) -> list[Grid]:
    """Per axis with steps judged: every configuration at every step, then the stop."""
    out: list[Grid] = []
    for ramp in summary.ramp:
        if not ramp.steps:
            continue
        t = grid(f"Load ramp ({_axis(ramp)}): each point against the next lower load (saturated: throughput rose no "
                 f"more than {ramp.min_gain:.0%} beyond its interval while E2E p50 grew more than "
                 f"{ramp.latency_rise:.0%})", ("step", "configuration", "throughput", "E2E p50", "saturated"),
                 left={"step", "configuration", "saturated"})
        for step in ramp.steps:
            t.add_section()
            span = f"{step.lower_point} -> {step.point_id}"
            for r in step.readings:
                t.add_row(span, r.config_id, _bounded(r.throughput, r.throughput_low, r.throughput_high),
                          _bounded(r.e2e_p50, r.latency_low, r.latency_high), "yes" if r.saturated else "no")
            if not step.readings:
                t.add_row(span, "-", "-", "-", "no")
        out.append(t)
    return out


def ramp_notes(summary: RunSummary) -> list[Note]:
    """The stop of each axis, as a warning: points the plan listed were not measured."""
    return [Note(f"{line}. {ramp.why} (load.stop_at_saturation: false measures every point)", warn=True)
            for ramp in summary.ramp if (line := stop_line(summary, ramp)) is not None]
