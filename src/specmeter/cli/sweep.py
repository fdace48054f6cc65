"""`specmeter sweep`, and the hidden command each of its Slurm jobs runs. Thin: parse, validate, call one
workflow."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from specmeter.cli.args import command_line, note, resume_run, terminal
from specmeter.cli.settings import decided_by, measuring, settings, validated
from specmeter.config.access import Access
from specmeter.config.criteria import Criteria
from specmeter.config.drafts import Drafts
from specmeter.config.output import RunOutput
from specmeter.config.slurm import Executor
from specmeter.config.tune import Tuning
from specmeter.plans.sweep import SweepSpec


@settings(Access, "access", validate=True)
@settings(RunOutput, "output", validate=True)
@settings(Executor, "executor")
@settings(SweepSpec, "top", only=("ceiling", "gpus", "baseline_endpoint"))
@settings(Tuning, "tuning")
@settings(Drafts, "drafts", validate=True)
@settings(Criteria, "criteria", only=("objective", "min_gain", "indifference"))
@measuring
def sweep(
    engine: dict[str, Any],
    workload: dict[str, Any],
    load: dict[str, Any],
    criteria: dict[str, Any],
    schedule: dict[str, Any],
    tuning: dict[str, Any],
    drafts: Drafts,
    top: dict[str, Any],
    executor: dict[str, Any],
    output: RunOutput,
    access: Access,
    file: Annotated[Path | None, typer.Argument(help="Sweep file (YAML): workload, engine, candidates, load, repeats, interleave.")] = None,
    resume: Annotated[Path | None, typer.Option(hidden=True)] = None,
) -> None:
    """Which drafter and which K pay, at which load, and where does speculation stop paying?

    Every speculative config at every load point against the baseline. Takes a sweep file, or the shorthand
    `specmeter sweep --model M --spec '{...}' --k 1,2,4 --concurrency 1,4,16`. With `--concurrency auto`
    (or load: {concurrency: auto} in the file) the sweep measures 1, 8 and 64, then places each next point
    where the crossover or a best-K boundary is least sure, until each is bracketed within 1.5x or 8 points
    ran; the report says which points were chosen and why. A candidate may carry `synthetic_acceptance:
    {rates: [...]}` or `{length: L}` (acceptance set, not verified: benchmarking only). With `--executor
    slurm` the plan runs as Slurm jobs, each on one node (a candidate beside its own baseline), resubmitted
    when they end unfinished and merged into the run directory; the report names each number's node."""
    if resume is not None:
        note("specmeter sweep --resume RUN", "specmeter resume RUN")
        resume_run(resume, access.api_key)
        return
    from specmeter.workflows import sweep as workflow
    from specmeter.workflows.propose import ProposeRequest
    from specmeter.workflows.verify import VerifyRequest

    objective, key = criteria.get("objective"), access.api_key
    tune = validated(Tuning, tuning)
    where = validated(Executor, executor)
    slurm = where.slurm()
    checks = VerifyRequest(criteria=decided_by({"objective": objective}, load if objective == "goodput" else {}),
                           rounds=tune.rounds, api_key=key,
                           off_is_an_answer=True, command=command_line()) if tune.verify else None
    proposals = None
    if checks is not None or tuning.get("propose") or tune.propose_k:  # (without --verify the workflow refuses them)
        proposals = ProposeRequest(budget=tune.propose, k_range=tune.propose_k,
                                   criteria=checks.criteria if checks is not None else Criteria(),
                                   repeats=schedule.get("repeats"),
                                   api_key=key, command=command_line())
    decided = {name: value for name, value in criteria.items() if name != "objective"}  # min_gain, indifference
    request = workflow.SweepRequest(
        spec=workflow.sweep_spec(file, drafts, {"engine": engine, "workload": workload, "load": load},
                                 {**schedule, **decided, **top}),
        out=output.out, gpus_given="gpus" in top, name=output.name, api_key=key, dry_run=where.dry_run,
        command=command_line(), verify=checks, propose=proposals, slurm=slurm)
    workflow.sweep(request, terminal())


def slurm_job(
    run_dir: Annotated[Path, typer.Argument()],
    group: Annotated[str, typer.Argument()],
    attempt: Annotated[int, typer.Argument()],
    seed: Annotated[int, typer.Option(help="An earlier attempt to resume from on the same node (0: none).")] = 0,
) -> None:
    """Run one attempt of one job group of a Slurm run, into RUN_DIR/jobs/GROUP/attempt-ATTEMPT (what one Slurm
    array task runs: the driver writes the call into its batch script; not for people)."""
    from specmeter.workflows.slurm_job import run_job

    run_job(run_dir, group, attempt, seed or None, Access().api_key, command_line(), terminal())
