"""`specmeter resume` (and `run`/`sweep --resume`): finish an interrupted run in its own directory."""

from __future__ import annotations

from pathlib import Path

from specmeter.plans.resume import resume_execution
from specmeter.workflows.execute import measure_one
from specmeter.workflows.plan import calibrate_sweep
from specmeter.workflows.terminal import Terminal


def resume(run_dir: Path, api_key: str | None, term: Terminal) -> None:
    """Run only what the stored plan has not finished, into the same directory, from the plan it stored."""
    summary = measure_one(resume_execution(run_dir, api_key), run_dir, term)
    if summary.plan.kind in ("sweep", "demo"):  # what a finished sweep keeps beside it
        calibrate_sweep(run_dir, summary, term)
