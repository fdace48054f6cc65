"""`specmeter calibrate RUN...` and `specmeter plan RUN_DIR`: the step-cost model fitted on measured runs, and
its predictions for drafters, K and batch sizes nobody measured, with the table they imply."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

from specmeter.analysis.by_length import at_length, lengths
from specmeter.analysis.recommend import recommend as decide_table
from specmeter.errors import InputError, stored_file_message
from specmeter.planner.calibration import calibrate, refit
from specmeter.planner.observations import drafter_key, request_mix
from specmeter.planner.predict import (
    DEFAULT_BATCHES,
    DEFAULT_KS,
    Predictor,
    checks,
    grid,
    mark_measured,
    measured_points,
)
from specmeter.planner.profiles import category_profiles, drafter_profiles, parse_acceptance
from specmeter.planner.tables import fill_unmeasured, predicted_k
from specmeter.report.planner import render_calibration, render_plan
from specmeter.run_data import run_records
from specmeter.schemas.planner import Calibration, Cell, PlanResult
from specmeter.schemas.results import RunSummary
from specmeter.store import RunStore, atomic_write_text, load_summary
from specmeter.workflows.terminal import Terminal

CALIBRATION = "calibration.json"


@dataclass(frozen=True)
class PlanRequest:
    run_dir: Path
    ks: Sequence[int] = DEFAULT_KS
    batches: Sequence[int] = DEFAULT_BATCHES
    acceptance: str | None = None  # a run (RUN or RUN:CONFIG), an iid rate, or per-position rates
    exclude: Sequence[str] = field(default_factory=tuple)
    calibration: Path | None = None  # a pooled calibration.json (default: fit on RUN_DIR)
    input_len: int | None = None  # an input-length axis: the length to predict for (default: the first)


def calibrate_runs(run_dirs: Sequence[Path], exclude: Sequence[str], out: Path | None,
                   terminal: Terminal) -> Calibration:
    """Fit on the runs pooled; write calibration.json (into the first run, or `out`)."""
    runs = [(str(d), load_summary(d)) for d in run_dirs]
    cal = calibrate(runs, exclude)
    path = out or run_dirs[0] / CALIBRATION
    atomic_write_text(path, cal.model_dump_json(indent=2) + "\n")
    if terminal.json_out:
        terminal.emit(cal.model_dump_json(indent=2))
    else:
        render_calibration(terminal.out, cal)
    terminal.human.print(f"calibration: {path}")
    return cal


def calibrate_sweep(run_dir: Path, summary: RunSummary, terminal: Terminal) -> Calibration | None:
    """After a sweep: the step-cost model fitted on its points, written beside it as calibration.json (a sweep the
    model cannot read, e.g. one without a baseline point, gets a note instead: the sweep itself stands)."""
    try:
        cal = calibrate([(str(run_dir), summary)])
    except (InputError, ValueError) as exc:
        terminal.human.print(f"[dim]no calibration.json: {exc}[/]")
        return None
    atomic_write_text(run_dir / CALIBRATION, cal.model_dump_json(indent=2) + "\n")
    scale = "" if cal.residual_scale is None else f", relative residual sd {cal.residual_scale:.1%}"
    terminal.human.print(f"calibration: {run_dir / CALIBRATION} (the step-cost model on "
                         f"{sum(o.used for o in cal.observations)} points{scale}; `specmeter plan {run_dir}` predicts "
                         "from it)")
    return cal


def _calibration(request: PlanRequest, summary: RunSummary) -> Calibration:
    if request.calibration is None:
        cal = calibrate([(str(request.run_dir), summary)], request.exclude)
        if not request.exclude:  # the run's own calibration: kept beside it, as a sweep keeps it
            atomic_write_text(request.run_dir / CALIBRATION, cal.model_dump_json(indent=2) + "\n")
        return cal
    try:
        cal = Calibration.model_validate_json(request.calibration.read_text(encoding="utf-8"))
    except OSError as exc:
        raise InputError(f"--calibration {request.calibration}: cannot read it ({exc.strerror}); check the path, or "
                         "write one with `specmeter calibrate RUN...`") from None
    except ValueError as exc:
        raise InputError(stored_file_message(f"--calibration {request.calibration}", exc, "a calibration",
                                             "write one with `specmeter calibrate RUN...`", Calibration)) from None
    if request.exclude and set(request.exclude) != set(cal.excluded):
        raise InputError(f"--exclude with --calibration {request.calibration}: that calibration left out "
                         f"{cal.excluded or 'nothing'}; calibrate again with the same --exclude")
    return cal


def plan_run(request: PlanRequest, terminal: Terminal) -> PlanResult:
    """Calibrate on the run (or read a pooled calibration), predict every drafter x K x batch, check every
    measured point, and fill recommend's unmeasured ranges from the model."""
    whole = load_summary(request.run_dir)
    run = str(request.run_dir)
    cal = _calibration(request, whole)  # every length: each point's own KV and prefill tokens enter the fit
    summary, length_note = _one_length(whole, request.input_len, run)
    mix = request_mix(summary)
    if mix is None:
        raise InputError(f"{run}: no completed request to read prompt and output lengths from")
    predictor = Predictor(refit(cal), mix)
    notes = [*cal.notes, *length_note]
    profiles = drafter_profiles(summary, run, request.exclude)
    if request.acceptance is not None:
        given = parse_acceptance(request.acceptance, max(request.ks))
        profiles = {key: given for key in predictor.model.drafters}
    cells: list[Cell] = []
    for key in predictor.model.drafters:
        if key in profiles:
            cells += grid(predictor, key, profiles[key], request.ks, request.batches)
        else:
            notes.append(f"{_label(cal, key)}: no acceptance profile (every configuration of it left out, or "
                         "nothing drafted): give --acceptance")
    categories: list[Cell] = []
    if request.acceptance is None:
        for (key, category), profile in sorted(category_profiles(summary, run, request.exclude).items()):
            if key in predictor.model.drafters:
                categories += grid(predictor, key, profile, request.ks, request.batches, category=category)
    ks = {c.id: c.k for c in summary.plan.configs}
    here = {p.id for p in summary.plan.points}
    measured = measured_points(cal.observations, [s for s in summary.analysis.speedups if s.point_id in here], ks)
    cells = mark_measured(cells, measured)
    tables = []
    if summary.plan.main_baseline is not None and measured:
        rec = decide_table(summary, run_records(RunStore(request.run_dir), summary.plan), source_run=run)
        for drafter in rec.drafters:
            found = next((drafter_key(c.spec) for c in summary.plan.configs if c.id in drafter.candidates), None)
            if found is None or found not in profiles or found not in predictor.model.drafters:
                tables.append(drafter)
                continue
            tables.append(fill_unmeasured(drafter, partial(predicted_k, predictor, found, profiles[found], request.ks,
                                                           min_gain=summary.plan.min_gain)))
    result = PlanResult(run=run, calibration=cal, acceptance={_label(cal, k): p.source for k, p in profiles.items()},
                        prompt_tokens=mix.prompt_tokens, output_tokens=mix.output_tokens, ks=list(request.ks),
                        batches=list(request.batches),
                        baseline_tpot_s={b: predictor.baseline_tpot(float(b)) for b in request.batches},
                        cells=cells, categories=categories, checks=checks(predictor, measured, profiles),
                        tables=tables, notes=notes)
    if terminal.json_out:
        terminal.emit(result.model_dump_json(indent=2))
    else:
        render_plan(terminal.out, result)
    return result


def _label(cal: Calibration, key: str) -> str:
    found = cal.drafter(key)
    return found.label if found else key


def _one_length(summary: RunSummary, input_len: int | None, run: str) -> tuple[RunSummary, list[str]]:
    """The run at one input length (an input-length axis: `input_len`, or the first), with a note; else as it is.
    Acceptance, the request mix and the table differ between lengths, so predictions are made for one."""
    ns = lengths(summary)
    if not ns:
        if input_len is not None:
            raise InputError(f"--input-len {input_len}: {run} has no input-length axis; its request mix is what it "
                             "sent, so drop --input-len")
        return summary, []
    n = ns[0] if input_len is None else input_len
    if n not in ns:
        raise InputError(f"--input-len {n}: {run} measured input lengths {', '.join(map(str, ns))}; choose one")
    others = [str(m) for m in ns if m != n]
    return at_length(summary, n), [f"predicted for {n} input tokens (the calibration fitted every length); "
                                   f"--input-len {' or '.join(others)} predicts for the others"]
