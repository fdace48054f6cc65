"""`specmeter check` as a person reads it: every metric checked, this run against the reference, the verdict, and
what was not checked. Drawn from the RegressionCheck as analysis decided it; nothing here decides."""

from __future__ import annotations

from rich.console import Console
from rich.text import Text

from specmeter.report.console import print_tables
from specmeter.report.grid import Grid, Note, fmt, grid
from specmeter.schemas.check import CheckedMetric, RegressionCheck

OUTCOME = {"regressed": "REGRESSED", "held": "held", "unsettled": "unsettled"}


def _change(c: CheckedMetric) -> str:
    text = fmt(c.change.value, "{:.3f}x")
    return text if c.low is None or c.high is None else f"{text} [{c.low:.3f}, {c.high:.3f}]"


def _metric(c: CheckedMetric) -> str:
    if c.metric == "acceptance_length":
        return "AL"
    return "speedup (TPOT)" if c.decided_on == "tpot" else "speedup (tok/s)"


def check_table(result: RegressionCheck) -> Grid:
    t = grid(f"Check: {result.run.label} against {result.reference.label} (change: this run / the reference, "
             f"{result.confidence:.0%} interval; a regression: the whole interval below the bound)",
             ("point", "configuration", "metric", "reference", "this run", "change", "allowed down to", "outcome",
              "paired"), left={"point", "configuration", "metric", "outcome"})
    point = None
    for c in result.checks:
        if c.point != point and point is not None:
            t.add_section()
        point = c.point
        t.add_row(c.point, c.config_id, _metric(c), fmt(c.reference), fmt(c.value), _change(c), f"{c.bound:.3f}",
                  OUTCOME[c.outcome], str(c.paired_requests) if c.paired_requests else "counters")
    return t


def check_notes(result: RegressionCheck) -> list[Note]:
    out = [Note(w, warn=True) for w in result.warnings]
    out += [Note(u, warn=True) for u in result.unmatched]
    unsettled = [c for c in result.checks if c.outcome == "unsettled"]
    if unsettled:
        out.append(Note("unsettled (the interval straddles the bound, or there is none: more requests or rounds "
                        "would tell): " + "; ".join(c.line() + (f": {c.note}" if c.note else "") for c in unsettled),
                        warn=True))
    out += [Note(n) for n in result.notes]
    for metric, name in (("acceptance_length", "AL"), ("speedup", "speedup")):
        of = [c for c in result.checks if c.metric == metric]
        for basis in dict.fromkeys(c.basis for c in of):
            used = [f"{c.config_id} at {c.point}" for c in of if c.basis == basis]
            where = "everywhere" if len(used) == len(of) else ", ".join(used)
            out.append(Note(f"{name} ({where}): {basis}"))
    return out


def render_check(result: RegressionCheck, console: Console) -> None:
    print_tables([check_table(result)], check_notes(result), console)
    bounds = f"AL down {result.max_al_drop:.1%}, speedup down {result.max_speedup_drop:.1%}"
    if result.regressed:
        for line in result.regressions:
            console.print(Text(f"regressed: {line}", style="bold red"), soft_wrap=True)
    else:
        console.print(Text(f"no regression beyond the bounds ({bounds}) at {len(result.checks)} checked metrics",
                           style="bold green"), soft_wrap=True)
