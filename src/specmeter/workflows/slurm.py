"""`sweep --executor slurm` and `resume` of such a run: split the plan into job groups, drive them through Slurm
(executors/slurm.py), merge one attempt per group into the run directory, then derive its results from the merged
captures as `report --recompute` does, and show and keep them as a local sweep would."""

from __future__ import annotations

import os
import sys
from datetime import UTC, datetime
from pathlib import Path

from specmeter.common.errors import InputError, RunIncomplete
from specmeter.config.slurm import SlurmOptions
from specmeter.execution.runner import Execution
from specmeter.executors.groups import plan_for_jobs, sub_plan
from specmeter.executors.layout import AttemptDir, read_state, write_state
from specmeter.executors.merge import merge
from specmeter.executors.slurm import Driver
from specmeter.executors.slurm_cli import Slurm, SlurmCli
from specmeter.report.console import render
from specmeter.rundir.store import SUMMARY, load_summary
from specmeter.schemas.jobs import SlurmRun
from specmeter.workflows.execute import write_page
from specmeter.workflows.plan import calibrate_sweep
from specmeter.workflows.recompute import recompute
from specmeter.workflows.terminal import Terminal


def sweep_on_slurm(ex: Execution, run_dir: Path, options: SlurmOptions, term: Terminal,
                   slurm: Slurm | None = None) -> None:
    """Submit the plan's job groups, watch them to the end, merge."""
    slurm = slurm or SlurmCli()  # Slurm's commands are checked before anything is written
    run_dir = run_dir.resolve()  # jobs run from the submitting directory, but write here
    if run_dir.exists():
        raise InputError(f"{run_dir} already exists; give another --name, or `specmeter resume {run_dir}`")
    plan, groups = plan_for_jobs(ex.plan, options.jobs)
    state = SlurmRun(options=options, plan=plan, groups=groups, command=ex.command, cwd=os.getcwd(),
                     python=sys.executable, created_utc=datetime.now(UTC).isoformat(timespec="seconds"))
    for group in groups:
        where = AttemptDir(run_dir, group.name, 1)
        where.group_dir.mkdir(parents=True)
        where.plan_path.write_text(sub_plan(plan, group).model_dump_json(indent=2) + "\n", encoding="utf-8")
    write_state(run_dir, state)
    term.human.print(f"[bold]specmeter[/] on Slurm: run directory [cyan]{run_dir}[/], {len(groups)} job group(s): "
                     + "; ".join(f"{g.name} ({', '.join(g.config_ids)})" for g in groups))
    _drive(run_dir, state, slurm, term)


def resume_on_slurm(run_dir: Path, term: Terminal, slurm: Slurm | None = None) -> None:
    """Watch a Slurm run's jobs again (the driver was stopped) and resubmit what has no complete attempt: groups
    that used up their attempts get as many again."""
    state = read_state(run_dir)
    if (run_dir / SUMMARY).exists() and load_summary(run_dir).status == "complete":
        raise InputError(f"{run_dir}: this run is already complete; nothing to resume")
    latest = [state.latest(g.name) for g in state.groups]
    spent = [a.attempt for a in latest if a is not None and a.status == "incomplete"
             and a.attempt >= state.options.max_attempts]
    if spent:
        state.options.max_attempts += max(spent)
    _drive(run_dir.resolve(), state, slurm or SlurmCli(), term)


def _drive(run_dir: Path, state: SlurmRun, slurm: Slurm, term: Terminal) -> None:
    try:
        Driver(run_dir, state, slurm, term.human.print).run()
    except KeyboardInterrupt as exc:
        raise RunIncomplete(f"stopped watching; the submitted jobs go on in Slurm; `specmeter resume {run_dir}` "
                            "watches them again, resubmits and merges") from exc
    finish(run_dir, state, term)


def finish(run_dir: Path, state: SlurmRun, term: Terminal) -> None:
    """Merge, recompute from the merged captures, show and keep the results; incomplete: say how to go on."""
    merge(run_dir, state)
    write_state(run_dir, state)  # which attempt each group's results came from
    for done in recompute(run_dir):
        term.human.print(done.line())
    summary = load_summary(run_dir)
    if term.json_out:
        term.emit(summary.model_dump_json(indent=2))
    else:
        render(summary, term.answer, verbosity=term.verbosity)
    write_page(run_dir, term)
    if summary.status != "complete":
        raise RunIncomplete(f"{summary.incomplete_reason}; what finished is in {run_dir}; "
                            f"`specmeter resume {run_dir}` resubmits those groups")
    calibrate_sweep(run_dir, summary, term)
