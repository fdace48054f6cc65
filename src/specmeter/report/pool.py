"""`specmeter compare --pool` in words: per cell each run's speedup and the pooled one with its verdict, then how
each range of the pooled answer held across the runs (analysis.pool decides; this renders)."""

from __future__ import annotations

from specmeter.report.grid import VERDICTS, Grid, grid, point_label
from specmeter.schemas.pool import Pooled, PooledCell
from specmeter.schemas.results import RunSummary


def _interval(value: float | None, low: float | None, high: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:.2f}x" + (f" [{low:.2f}, {high:.2f}]" if low is not None and high is not None else "")


def _agreement(cell: PooledCell) -> str:
    parts = ["verdicts agree" if cell.verdicts_agree else "verdicts differ"]
    if cell.intervals_overlap is False:
        parts.append("intervals disjoint")
    if cell.left_out:
        parts.append(f"left out (disturbed): {', '.join(cell.left_out)}")
    return "; ".join(parts)


def cells_table(pooled: Pooled, summary: RunSummary) -> Grid:
    """One row per cell: each run's estimate and verdict, the pooled interval and verdict, and whether they agree."""
    labels = run_labels(pooled)
    t = grid(f"Pooled over {len(pooled.runs)} runs: speedup over the baseline per run, and pooled (random effects "
             "over runs, 95%; it holds every run's estimate)",
             ("configuration", "point", *labels, "pooled", "verdict", "across runs"),
             left={"configuration", "point", "verdict", "across runs"})
    for cell in pooled.cells:
        by_run = {r.run: r for r in cell.runs}
        per_run = [(_interval(r.value, r.low, r.high) + (f" {r.verdict}" if r.verdict else "")) if r is not None
                   else "-" for r in (by_run.get(name) for name in pooled.runs)]
        t.add_row(cell.config_id, point_label(summary, cell.point_id), *per_run,
                  _interval(cell.pooled.value, cell.pooled.ci95_low, cell.pooled.ci95_high),
                  VERDICTS.get(cell.verdict or "", "-"), _agreement(cell))
    return t


def run_labels(pooled: Pooled) -> list[str]:
    """Short column names for the runs (run 1, run 2, ...); summary_lines names each."""
    return [f"run {i}" for i in range(1, len(pooled.runs) + 1)]


def held_lines(pooled: Pooled) -> list[str]:
    """How each measured range of the pooled table held in the runs."""
    return [f"batch {h.start}{f'-{h.end}' if h.end != h.start else ''} ({', '.join(h.point_ids)}), K={h.k}: "
            f"{h.held}" for h in pooled.held]


def summary_lines(pooled: Pooled) -> list[str]:
    """The cells' agreement in two lines: where the runs' own intervals are disjoint, and where verdicts differ."""
    judged = [c for c in pooled.cells if c.intervals_overlap is not None]
    apart = [c for c in judged if c.intervals_overlap is False]
    differ = [c for c in pooled.cells if not c.verdicts_agree]
    legend = "; ".join(f"{label}: {name}" for label, name in zip(run_labels(pooled), pooled.runs))
    return [legend, f"{len(apart)} of {len(judged)} cells: the runs' own 95% intervals share no value (the runs "
            "differ by more than each one's interval says)",
            f"{len(differ)} of {len(pooled.cells)} cells: the runs' verdicts differ"
            + (f" ({', '.join(f'{c.config_id} @ {c.point_id}' for c in differ)})" if differ else "")]
