"""A phase-shift workload's phases as a table: for every configuration at every point, when each phase began, its
acceptance over the phase and over each half of it, the K drafted per step, and its decode speed against the
baseline on the phase's own requests. It renders metrics/phases.py and the speedups' per-phase ratios."""

from __future__ import annotations

from specmeter.report.grid import Grid, fmt, grid, ms, point_label, ratio_text
from specmeter.schemas.metrics import PhaseAcceptance
from specmeter.schemas.results import RunSummary


def phase_table(summary: RunSummary) -> Grid | None:
    """None without phases."""
    found = summary.analysis.phases
    if not found:
        return None
    speed = {(s.config_id, s.point_id, p.phase): p for s in summary.analysis.speedups for p in s.phases}
    t = grid("Per phase (workload.phases; AL and its 95% interval over the phase's requests, then over its first and "
             "its second half; drafted: draft tokens per step; TPOT speedup over the baseline on the phase's "
             "requests, paired)",
             ("configuration", "point", "phase", "from s", "requests", "AL", "AL 95%", "AL 1st -> 2nd half",
              "drafted", "TPOT ms", "TPOT speedup"), left={"configuration", "point", "phase"})
    for breakdown in found:
        if t.row_count:
            t.add_section()
        for phase in breakdown.phases:
            ratio = speed.get((breakdown.config_id, breakdown.point_id, phase.phase))
            row = phase.acceptance
            ci = (f"[{row.al_ci95_low:.2f}, {row.al_ci95_high:.2f}]"
                  if row.al_ci95_low is not None and row.al_ci95_high is not None else "-")
            t.add_row(breakdown.config_id, point_label(summary, breakdown.point_id), phase.phase,
                      f"{phase.started_s:.1f}", str(phase.requests), fmt(row.al_step_weighted), ci, _halves(phase),
                      fmt(phase.drafted_per_step), ms(phase.tpot_mean_s),
                      ratio_text(ratio.tpot) if ratio is not None else "-")
    return t


def _halves(phase: PhaseAcceptance) -> str:
    if phase.first_half is None or phase.second_half is None:
        return "-"
    return f"{fmt(phase.first_half.acceptance_length)} -> {fmt(phase.second_half.acceptance_length)}"
