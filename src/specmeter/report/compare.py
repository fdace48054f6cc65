"""The side-by-side tables of `specmeter compare`, as Grids every output can draw, built from a stored
RunComparison (analysis/compare.py decides; this only lays it out)."""

from __future__ import annotations

from collections.abc import Callable

from rich.console import Console

from specmeter.report.console import print_tables
from specmeter.report.grid import VERDICTS, Grid, Note, fmt, grid, ms, ratio_text
from specmeter.schemas.analysis import Speedup
from specmeter.schemas.compare import ComparedConfig, RunComparison, RunEntry

_KEYS = {"point", "role", "configuration", "run"}


def _config_cell(slot: ComparedConfig) -> str:
    """The slot's configuration ids, once each (runs may name the same configuration differently)."""
    ids = list(dict.fromkeys(e.config_id for e in slot.entries if e is not None))
    return " / ".join(ids)


def _speedup_cell(s: Speedup | None) -> str:
    """The ratio the run's verdict reads, its interval, and the verdict."""
    if s is None:
        return "-"
    ratio = s.tpot if s.decided_on == "tpot" else s.output_throughput
    on = " (on TPOT)" if s.decided_on == "tpot" else ""
    return f"{ratio_text(ratio)}\n{VERDICTS.get(s.verdict or '', '-')}{on}"


def runs_table(cmp: RunComparison) -> Grid:
    """Which runs, on which engine and weights: what every other table's columns are named after."""
    t = grid("Runs compared (the first is the reference)", ("run", "engine", "kind", "status", "created", "target"),
             left={"run", "engine", "kind", "status", "created", "target"})
    for r in cmp.runs:
        t.add_row(r.name, r.engine_version or "?", r.plan_kind, r.status, r.created_utc[:16].replace("T", " "),
                  r.target[:10] if r.target else "-")
    return t


def _per_run(cmp: RunComparison, title: str, heads: tuple[str, ...]) -> Grid:
    """A grid with the point and configuration, then `heads` once per run (named after the run)."""
    names = [f"{h} {r.name}" for r in cmp.runs for h in heads]
    return grid(title, ("point", "role", "configuration", *names), left={"point", "role", "configuration"})


def speed_table(cmp: RunComparison) -> Grid:
    """Output tok/s and mean TPOT of every run, per point and configuration."""
    t = _per_run(cmp, "Output tok/s and mean TPOT (ms) per run (pooled over repeats)", ("tok/s", "TPOT ms"))
    _rows(cmp, t, lambda e: (fmt(e.output_tokens_per_s, "{:.1f}"), ms(e.tpot_mean_s)))
    return t


def sd_table(cmp: RunComparison) -> Grid:
    """Acceptance length and each run's own speedup over its own baseline, copied from that run."""
    t = _per_run(cmp, "Acceptance length and each run's speedup over its own baseline (95% paired CI, verdict)",
                 ("AL", "speedup"))
    _rows(cmp, t, lambda e: (fmt(e.acceptance_length), _speedup_cell(e.speedup)))
    return t


def _rows(cmp: RunComparison, t: Grid, cells: Callable[[RunEntry], tuple[str, ...]]) -> None:
    """One row per point and configuration slot; `cells` gives one run's cells (dashes where it has none)."""
    width = (len(t.columns) - 3) // len(cmp.runs)
    for pc in cmp.points:
        if t.row_count:
            t.add_section()
        for slot in pc.configs:
            row = [pc.point.label, slot.role.value, _config_cell(slot)]
            for e in slot.entries:
                row += list(cells(e)) if e is not None else ["-"] * width
            t.add_row(*row)


def difference_table(cmp: RunComparison) -> Grid | None:
    """Each run against the reference's same configuration at the same load."""
    t = grid(f"Against the reference {cmp.reference.label}: paired by request across runs (95% CI; > 1: faster "
             "than the reference)", ("point", "role", "configuration", "run", "output tok/s", "TPOT", "paired"),
             left=_KEYS)
    for pc in cmp.points:
        rows = [(slot, e) for slot in pc.configs for e in slot.entries[1:] if e is not None and e.vs_reference]
        if rows and t.row_count:
            t.add_section()
        for slot, e in rows:
            d = e.vs_reference
            assert d is not None
            ref = d.reference_config_id
            config = e.config_id if e.config_id == ref else f"{e.config_id} vs {ref}"
            t.add_row(pc.point.label, slot.role.value, config, e.run,
                      ratio_text(d.output_throughput), ratio_text(d.tpot), str(d.paired_requests))
    return t if t.row_count else None


def compare_tables(cmp: RunComparison) -> list[Grid]:
    """The comparison's tables in reading order: which runs, their speed, their acceptance, the differences."""
    tables = [runs_table(cmp)]
    if cmp.points:
        tables += [speed_table(cmp), sd_table(cmp)]
    diff = difference_table(cmp)
    if diff is not None:
        tables.append(diff)
    return tables


def compare_notes(cmp: RunComparison) -> list[Note]:
    """Warnings first (what can make a difference wrong), then how the comparison was made."""
    out = [Note(f"{d.run}: {d.field} is {d.value}, the reference's is {d.reference}: compared anyway, so a "
                "difference mixes engine and workload", warn=True) for d in cmp.workload_differences]
    out += [Note(text, warn=True) for text in cmp.warnings]
    out += [Note(f"not compared: {text}", warn=True) for text in cmp.unmatched_points]
    if not cmp.points:
        out.append(Note("no load point is present in every run: nothing to compare", warn=True))
    for pc in cmp.points:
        for slot in pc.configs:
            for e in slot.entries[1:]:
                if e is not None and e.vs_reference is not None and e.vs_reference.note:
                    out.append(Note(f"{pc.point.label}, {e.run} {e.config_id}: {e.vs_reference.note}", warn=True))
    out += [Note(text) for text in cmp.notes]
    return out


def render_comparison(cmp: RunComparison, console: Console | None = None) -> None:
    """The comparison in a terminal: the tables, then the notes (warnings in yellow)."""
    print_tables(compare_tables(cmp), compare_notes(cmp), console or Console())
