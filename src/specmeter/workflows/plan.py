"""`specmeter calibrate RUN...` and `specmeter plan RUN_DIR`: the step-cost model fitted on measured runs, and
its predictions for drafters, K and batch sizes nobody measured, with the table they imply."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path

from specmeter.analysis.by_length import at_length, lengths
from specmeter.analysis.recommend import recommend as decide_table
from specmeter.common.errors import InputError, stored_file_message
from specmeter.config.prediction import DEFAULT_BATCHES, DEFAULT_KS
from specmeter.predict.calibration import calibrate
from specmeter.predict.observations import drafter_key, request_mix
from specmeter.predict.predict import (
    Predictor,
    checks,
    grid,
    mark_measured,
    measured_points,
)
from specmeter.predict.profiles import category_profiles, drafter_profiles, parse_acceptance, set_profiles
from specmeter.predict.tables import fill_unmeasured, predicted_k
from specmeter.report.planner import render_calibration, render_plan
from specmeter.rundir.answer import read_answer
from specmeter.rundir.run_data import run_records
from specmeter.rundir.store import CALIBRATION, RunStore, keep, load_summary, write_once
from specmeter.schemas.planner import Calibration, Cell, PlanResult
from specmeter.schemas.recommend import Recommendation
from specmeter.schemas.results import RunSummary
from specmeter.workflows.terminal import Terminal


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
                   terminal: Terminal) -> Path:
    """Fit on the runs pooled; write calibration.json into the first run (the next free calibration-<n>.json where
    one is there with another fit), or to `out`, which must not exist yet. Returns where it is."""
    runs = [(str(d), load_summary(d)) for d in run_dirs]
    cal = calibrate(runs, exclude)
    text = cal.model_dump_json(indent=2) + "\n"
    if out is not None:
        write_once(out, text)
        path = out
    else:
        path = keep(run_dirs[0] / CALIBRATION, text)
    if terminal.json_out:
        terminal.emit(cal.model_dump_json(indent=2))
    else:
        render_calibration(terminal.out, cal)
    terminal.human.print(f"calibration: {path}")
    return path


def calibrate_sweep(run_dir: Path, summary: RunSummary, terminal: Terminal) -> Calibration | None:
    """After a sweep: the step-cost model fitted on its points, written beside it as calibration.json (a sweep the
    model cannot read, e.g. one without a baseline point, gets a note instead: the sweep itself stands)."""
    try:
        cal = calibrate([(str(run_dir), summary)])
    except (InputError, ValueError) as exc:
        terminal.human.print(f"[dim]no calibration.json: {exc}[/]")
        return None
    path = keep(run_dir / CALIBRATION, cal.model_dump_json(indent=2) + "\n")
    scale = "" if cal.residual_scale is None else f", relative residual sd {cal.residual_scale:.1%}"
    terminal.human.print(f"calibration: {path} (the step-cost model on "
                         f"{sum(o.used for o in cal.observations)} points{scale}; `specmeter plan {run_dir}` predicts "
                         "from it)")
    return cal


def _calibration(request: PlanRequest, summary: RunSummary) -> Calibration:
    if request.calibration is None:
        return calibrate([(str(request.run_dir), summary)], request.exclude)
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
    predictor = Predictor.calibrated(cal, mix)
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
    specs = {c.id: c.spec for c in summary.plan.configs}
    deployable = [m for m in measured if not specs[m.config_id].synthetic]
    if measured and not deployable:
        notes.append("no table to fill: every configuration measured set its acceptance (synthetic), and those are "
                     "never recommended")
    start = (_answer(request.run_dir, summary, notes) if summary.plan.main_baseline is not None and deployable
             else None)
    if start is not None:
        rec = start[0]
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
                        cells=cells, categories=categories,
                        checks=checks(predictor, measured, profiles, set_profiles(summary)),
                        tables=tables, notes=notes, answer_round=start[1] if start is not None else None,
                        answer_verification=start[0].verification if start is not None else None)
    if request.calibration is None and not request.exclude:  # the run's own fit, kept beside it as a sweep does
        keep(request.run_dir / CALIBRATION, cal.model_dump_json(indent=2) + "\n")
    if terminal.json_out:
        terminal.emit(result.model_dump_json(indent=2))
    else:
        render_plan(terminal.out, result)
    return result


def _answer(run_dir: Path, summary: RunSummary, notes: list[str]) -> tuple[Recommendation, int | None]:
    """The table the planner fills: the run's answer (its latest round; on an input-length axis, the table of the
    length predicted for), else the sweep's table decided now (not written: `recommend` records answers)."""
    answer = read_answer(run_dir)
    if answer is None:
        notes.append(f"no recommendation yet: the sweep's table, decided now; `specmeter recommend {run_dir}` "
                     "records it as the run's answer")
        return decide_table(summary, run_records(RunStore(run_dir), summary.plan), source_run=str(run_dir)), None
    n = next((p.input_len for p in summary.plan.points if p.input_len is not None), None)  # `summary`: one length
    rec = next((part for part in answer.recommendation.per_input_len if part.input_len == n), answer.recommendation)
    return rec, answer.latest.number


def plan_pooled(run_dirs: Sequence[Path], request: PlanRequest, terminal: Terminal) -> PlanResult:
    """`plan RUN RUN...`: the step-cost model fitted on the runs pooled (calibrate_runs: written into the first,
    its table where a person reads), then the first run's predictions from that calibration."""
    written = calibrate_runs(run_dirs, request.exclude, None, replace(terminal, out=terminal.human, json_out=False))
    return plan_run(replace(request, run_dir=run_dirs[0], calibration=written), terminal)


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
