"""The planner's output as a person reads it: the calibration (terms, residuals) and the predictions (speedup
per K and batch, measured cells marked), each measured point against its prediction, and the filled table."""

from __future__ import annotations

import math
import statistics

from rich.console import Console
from rich.text import Text

from specmeter.report.console import to_rich
from specmeter.report.grid import Grid, grid
from specmeter.report.recommendation import BASIS
from specmeter.schemas.planner import Calibration, Cell, Check, FormChoice, PlanResult

PREDICTED = "predicted by a step-cost model calibrated on measurements, not measured"


def _pct(v: float | None) -> str:
    return "-" if v is None else f"{v * 100:+.1f}%"


def _x(v: float | None, low: float | None = None, high: float | None = None) -> str:
    if v is None:
        return "-"
    return f"{v:.2f}x" + (f" [{low:.2f}, {high:.2f}]" if low is not None and high is not None else "")


def calibration_grids(cal: Calibration) -> list[Grid]:
    scale = "no degrees of freedom" if cal.residual_scale is None else f"relative residual sd {cal.residual_scale:.1%}"
    terms = grid(f"Step-cost model: {cal.engine} {cal.engine_version or ''} on {cal.hardware}, target {cal.target} "
                 f"({len([o for o in cal.observations if o.used])} points, rank {cal.rank}, {scale}), form: "
                 f"{cal.form.name}",
                 ("term", "coefficient"), left={"term"})
    for name, value in zip(cal.terms, cal.coefficients):
        terms.add_row(name, f"{value * 1e3:.4g} ms")
    obs = grid("The points it was fitted on (step = mean TPOT x tokens per step)",
               ("run", "config", "point", "batch", "K", "tokens/step", "step ms", "fitted ms", "residual", "used"),
               left={"run", "config", "point", "used"})
    for o in cal.observations:
        obs.add_row(o.run.rsplit("/", 1)[-1], o.config_id, f"{o.point_id}-r{o.repeat}", f"{o.batch:.1f}", f"{o.k:.2f}",
                    f"{o.tokens_per_step:.2f}", f"{o.step_s * 1e3:.2f}",
                    "-" if o.fitted_s is None else f"{o.fitted_s * 1e3:.2f}", _pct(o.residual),
                    "yes" if o.used else "left out")
    return [terms, *([] if cal.choice is None else [form_grid(cal.choice)]), obs]


SHOWN_FORMS = 8  # the best candidates shown; calibration.json keeps every one


def form_grid(choice: FormChoice) -> Grid:
    """The candidate forms by held-out error, best first, the chosen one and those tied with it marked."""
    tied = {f.name for f in choice.tied}
    half = "" if choice.half_width is None else (f"; 95% of the chosen form's held-out steps within "
                                                 f"{math.expm1(choice.half_width):.0%}, the intervals' floor")
    g = grid(f"The form, chosen by {choice.scheme} ({', '.join(choice.groups)}): each candidate fitted without each "
             f"group and scored on it{half}", ("form", "held-out median", "worst", "predicted", "chosen"),
             left={"form", "chosen"})
    for sc in choice.scores[:SHOWN_FORMS]:
        mark = ("chosen" if choice.decided else "default") if sc.name == choice.chosen else (
            "tied" if sc.name in tied else "")
        g.add_row(sc.name, _share(sc.error), _share(sc.worst), f"{sc.predicted}/{sc.held_out}", mark)
    return g


TIED_NAMED = 4  # the tied forms a note names; the rest it counts


def form_notes(choice: FormChoice | None) -> list[str]:
    """What the choice could not decide: no form at all, or the tied forms and how far their predictions differ."""
    if choice is None:
        return []
    if not choice.decided:
        return [f"{choice.scheme}: no candidate form fitted without one group could predict it (too few loads or "
                f"Ks), so the step cost keeps the default form, {choice.chosen}, unchosen; measure more loads"]
    if not choice.tied:
        return []
    names = ", ".join(f.name for f in choice.tied[:TIED_NAMED])
    more = len(choice.tied) - TIED_NAMED
    names += f" and {more} more" if more > 0 else ""
    spread = ("" if choice.spread is None else
              f"; their steps differ by up to {choice.spread:.0%} ({choice.spread_at})")
    return [f"{choice.scheme} could not tell {choice.chosen} from {names}{spread}: predictions take the middle of "
            "them and their intervals span them all; measure another K to decide"]


def _share(v: float | None) -> str:
    return "-" if v is None else f"{v:.1%}"


def render_calibration(console: Console, cal: Calibration) -> None:
    for g in calibration_grids(cal):
        console.print(to_rich(g))
    for note in [*form_notes(cal.choice), *cal.notes]:
        console.print(Text("• " + note, style="dim"))


def speedup_grid(title: str, cells: list[Cell], batches: list[int]) -> Grid:
    """Rows K, columns batch: predicted speedup [interval]; a measured cell shows the measured value too."""
    g = grid(title, ("K", "AL", *(f"B={b}" for b in batches)), left={"K"})
    for k in sorted({c.k for c in cells}):
        row = [c for c in cells if c.k == k]
        al = row[0]
        ext = f" (+{al.extrapolated_positions} extrapolated)" if al.extrapolated_positions else ""
        out = [str(k), f"{al.al:.2f} [{al.al_low:.2f}, {al.al_high:.2f}]{ext}"]
        for b in batches:
            cell = next((c for c in row if c.batch == b), None)
            if cell is None or cell.speedup is None:
                out.append("-")
                continue
            text = _x(cell.speedup, cell.speedup_low, cell.speedup_high)
            if cell.measured and cell.measured_speedup is not None:
                text += f"\nmeasured {cell.measured_speedup:.2f}x"
            out.append(text)
        g.add_row(*out)
    return g


def category_grid(title: str, cells: list[Cell], batches: list[int]) -> Grid:
    """Rows category, columns batch: the K with the highest predicted speedup there (off where none beats 1)."""
    g = grid(title, ("category", *(f"B={b}" for b in batches)), left={"category"})
    for category in sorted({c.category for c in cells if c.category is not None}):
        row = [category]
        for b in batches:
            here = [c for c in cells if c.category == category and c.batch == b and c.speedup is not None]
            best = max(here, key=lambda c: c.speedup or 0.0, default=None)
            if best is None or best.speedup is None:
                row.append("-")
            elif best.speedup <= 1.0:
                row.append(f"off ({best.speedup:.2f}x at K={best.k})")
            else:
                row.append(f"K={best.k} {best.speedup:.2f}x (AL {best.al:.2f})")
        g.add_row(*row)
    return g


def check_grid(checks: list[Check]) -> Grid:
    g = grid("Every measured point against the model at its own batch (TPOT speedup; blind: left out of the "
             "calibration and the acceptance profile)",
             ("config", "point", "batch", "measured", "predicted", "error", "inside", "blind"),
             left={"config", "point", "inside", "blind"})
    for c in checks:
        measured = _x(c.measured_tpot_speedup, c.measured_low, c.measured_high)
        g.add_row(c.config_id, c.point_id, f"{c.batch:.1f}", measured,
                  _x(c.predicted, c.predicted_low, c.predicted_high), _pct(c.error),
                  "-" if c.covered is None else "yes" if c.covered else "no", "no" if c.in_calibration else "yes")
    return g


def error_line(checks: list[Check]) -> str | None:
    """Median and worst |error| over the blind checks (else all), the benchmark's figures of merit."""
    blind = [c for c in checks if not c.in_calibration and c.error is not None]
    chosen = blind or [c for c in checks if c.error is not None]
    if not chosen:
        return None
    errors = [abs(c.error) for c in chosen if c.error is not None]
    what = "blind (left-out) points" if blind else "calibration points (in sample)"
    return (f"|error| of speedup over {len(errors)} {what}: median {statistics.median(errors):.1%}, worst "
            f"{max(errors):.1%}")


def unpredicted_lines(checks: list[Check]) -> list[str]:
    """One line per reason the model gave no prediction, with the points it left without one."""
    by_reason: dict[str, list[str]] = {}
    for c in checks:
        if c.predicted is None and c.why:
            by_reason.setdefault(c.why, []).append(f"{c.config_id}/{c.point_id}")
    return [f"no prediction at {', '.join(points)}: {why}" for why, points in by_reason.items()]


def render_plan(console: Console, result: PlanResult) -> None:
    console.print(Text(f"Planner for {result.run}: {PREDICTED}", style="bold"))
    for g in calibration_grids(result.calibration)[:-1]:  # the terms and the form chosen; not every point
        console.print(to_rich(g))
    for note in form_notes(result.calibration.choice):
        console.print(Text("• " + note, style="dim"))
    for drafter in sorted({c.drafter for c in result.cells}):
        cal = result.calibration.drafter(drafter)
        label = cal.label if cal else drafter
        console.print(to_rich(speedup_grid(f"{label}: predicted TPOT speedup over speculation off (acceptance: "
                                           f"{result.acceptance.get(label, '?')})",
                                           [c for c in result.cells if c.drafter == drafter], result.batches)))
        mine = [c for c in result.categories if c.drafter == drafter]
        if mine:
            console.print(to_rich(category_grid(f"{label} per category: the fastest K predicted per batch (each "
                                                "category's own acceptance profile)", mine, result.batches)))
    if result.checks:
        console.print(to_rich(check_grid(result.checks)))
        line = error_line(result.checks)
        if line:
            console.print(Text(line, style="bold"))
        for missing in unpredicted_lines(result.checks):
            console.print(Text("• " + missing, style="dim"))
    for table in result.tables:
        source = ("the sweep's table, no recommendation recorded" if result.answer_round is None else
                  f"the run's answer, round {result.answer_round}, verification {result.answer_verification}")
        t = grid(f"{table.drafter}: K per engine batch size ({source}; beyond the measured batches, predicted)",
                 ("batch sizes", "K", "basis", "why"), left={"basis", "why"})
        for seg in table.segments:
            t.add_row(f"{seg.start}-{seg.end}" if seg.end != seg.start else str(seg.start), str(seg.k),
                      BASIS[seg.basis], seg.reason)
        console.print(to_rich(t))
        console.print(Text("num_speculative_tokens_per_batch_size: "
                           + str([[r.start, r.end, r.k] for r in table.ranges]), style="green"), soft_wrap=True)
    for note in result.notes:
        console.print(Text("• " + note, style="dim"))
