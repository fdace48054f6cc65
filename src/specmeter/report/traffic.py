"""What a point's traffic did to the engine and to acceptance, as tables: the time the engine spent at each running
batch size where the load, not the client, set the batch (request rates and trace replays), and acceptance per
input-length bucket. They render what metrics and analysis computed; nothing is decided here."""

from __future__ import annotations

from collections.abc import Mapping

from specmeter.analysis.trace_answer import pooled_histogram
from specmeter.report.grid import Grid, fmt, grid, point_label
from specmeter.report.trees import ar_text
from specmeter.schemas.metrics import LengthBreakdown
from specmeter.schemas.results import ConfigResult, RunSummary


def batch_bins(histogram: Mapping[int, int]) -> list[tuple[str, float]]:
    """The samples' shares in power-of-two bins of batch size ('idle' for 0, then '1', '2-3', '4-7', ...), the
    bins that hold any, smallest first."""
    total = sum(histogram.values())
    bins: dict[int, float] = {}
    for size, n in histogram.items():
        low = 0 if size <= 0 else 1 << (size.bit_length() - 1)
        bins[low] = bins.get(low, 0.0) + n / total
    return [(_bin_label(low), share) for low, share in sorted(bins.items())]


def _bin_label(low: int) -> str:
    if low == 0:
        return "idle"
    return str(low) if low == 1 else f"{low}-{2 * low - 1}"


def batch_time_text(histogram: Mapping[int, int]) -> str:
    """'idle: 10%, 1: 40%, 2-3: 30%, 4-7: 20%': the share of the sampled time at each batch size bin."""
    return ", ".join(f"{label}: {share:.0%}" for label, share in batch_bins(histogram)) if histogram else "-"


def batch_time_table(summary: RunSummary) -> Grid | None:
    """Each configuration's time at each running batch size, pooled over repeats, at the points whose load sets
    the batch (request rates, trace replays); None where there are none or nothing was sampled."""
    points = [p for p in summary.plan.points if p.axis == "rate"]
    t = grid("Time at each engine batch size (running-batch samples at a fixed interval, pooled over repeats; "
             "idle: no request running)", ("configuration", "point", "samples", "time at batch"),
             left={"configuration", "point", "time at batch"})
    for config in summary.configs:
        for point in points:
            histogram = pooled_histogram(summary, point.id, config.config_id)
            if histogram:
                t.add_row(config.config_id, point.label(), str(sum(histogram.values())), batch_time_text(histogram))
    return t if t.row_count else None


def _first_lengths(summary: RunSummary, config: ConfigResult) -> tuple[str, LengthBreakdown] | None:
    """A configuration's acceptance per input length at its first point (plan order) that has it."""
    for point in summary.plan.points:
        found = next((pr.lengths for pr in config.repeats(point.id) if pr.lengths is not None), None)
        if found is not None:
            return point.id, found
    return None


def length_table(summary: RunSummary) -> Grid | None:
    """Acceptance per input-length bucket of each configuration at its first point that has it (acceptance barely
    moves with load); None unless some configuration's requests fall in two buckets or more."""
    found = [(c, *got) for c in summary.configs if (got := _first_lengths(summary, c)) is not None]
    if not any(len(b.buckets) > 1 for _, _, b in found):
        return None
    t = grid("Acceptance per input length (prompt tokens as the engine counted them, template included; "
             "per-request stats; 95% interval of AL over requests)",
             ("configuration", "point", "prompt tokens", "requests", "AL steps", "AL 95%", "AR"),
             left={"configuration", "point", "prompt tokens"})
    for config, point_id, breakdown in found:
        if t.row_count:
            t.add_section()
        for bucket in breakdown.buckets:
            row = bucket.acceptance
            ci = (f"[{row.al_ci95_low:.2f}, {row.al_ci95_high:.2f}]"
                  if row.al_ci95_low is not None and row.al_ci95_high is not None else "-")
            t.add_row(config.config_id, point_label(summary, point_id), row.category, str(row.requests),
                      fmt(row.al_step_weighted), ci, ar_text(row.counts))
        if breakdown.unknown:
            t.add_row(config.config_id, point_label(summary, point_id), "unknown (no usage)",
                      str(breakdown.unknown), "-", "-", "-")
    return t
