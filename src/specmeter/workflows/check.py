"""`specmeter check RUN --against REF_RUN`: did acceptance or speedup drop from the reference run to this one by more
than the bounds allow? The tables (or one JSON document), then a regression as its own exit code, naming each
metric, configuration and point."""

from __future__ import annotations

from pathlib import Path

from specmeter.analysis.regression import check_runs
from specmeter.common.errors import RegressionFound
from specmeter.config.comparison import Bounds
from specmeter.report.check import render_check
from specmeter.rundir.run_data import load_run
from specmeter.workflows.evidence import distinct_runs, require_records
from specmeter.workflows.terminal import Terminal


def check(run_dir: Path, against: Path, bounds: Bounds, term: Terminal) -> None:
    """Check `run_dir` against `against`; raise RegressionFound after showing everything when a metric regressed."""
    distinct_runs(run_dir, against, "check --against")
    run, reference = load_run(run_dir), load_run(against)
    for d in (run_dir, against):
        require_records(d, "check (its speedups pair requests)")
    result = check_runs(run, reference, max_al_drop=bounds.max_al_drop,
                        max_speedup_drop=bounds.max_speedup_drop)
    if term.json_out:
        term.emit(result.model_dump_json(indent=2))
    else:
        render_check(result, term.out)
    if result.regressed:
        raise RegressionFound(f"check: {len(result.regressions)} regression(s) in {result.run.name} against "
                              f"{result.reference.name}: " + "; ".join(result.regressions))
