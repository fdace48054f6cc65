"""`specmeter resume` (and `run`/`sweep --resume`): finish an interrupted run in its own directory."""

from __future__ import annotations

from pathlib import Path

from specmeter.executors.layout import is_slurm_run
from specmeter.plans.resume import resume_execution
from specmeter.workflows.execute import measure_one
from specmeter.workflows.plan import calibrate_sweep
from specmeter.workflows.slurm import resume_on_slurm
from specmeter.workflows.terminal import Terminal


def resume(run_dir: Path, api_key: str | None, term: Terminal) -> None:
    """Run only what the stored plan has not finished, into the same directory, from the plan it stored; a Slurm
    run's driver watches its jobs again instead."""
    if is_slurm_run(run_dir):
        resume_on_slurm(run_dir, term)
        return
    summary = measure_one(resume_execution(run_dir, api_key), run_dir, term)
    if summary.plan.kind in ("sweep", "demo"):  # what a finished sweep keeps beside it
        calibrate_sweep(run_dir, summary, term)
