"""`specmeter sweep`, and the hidden command each of its Slurm jobs runs. Thin: parse, validate, call one
workflow."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from specmeter.cli import options as o
from specmeter.cli.args import command_line, find_api_key, note, resume_run, terminal
from specmeter.cli.settings import decided_by, measuring, settings, validated
from specmeter.common.errors import InputError
from specmeter.config import flag_text as parse
from specmeter.config.criteria import Criteria
from specmeter.config.tune import Tuning
from specmeter.plans.sweep import SweepSpec

if TYPE_CHECKING:
    from specmeter.config.slurm import SlurmOptions

def _slurm_options(executor: str, jobs: str, partition: str | None, account: str | None, time: str | None,
                   gpus_per_job: int | None, max_attempts: int, options: list[str] | None) -> SlurmOptions | None:
    """The Slurm flags as options (None: --executor local, where they must not be given)."""
    from specmeter.config.slurm import SlurmOptions
    given = [name for name, value in (("--partition", partition), ("--account", account), ("--time", time),
                                      ("--gpus-per-job", gpus_per_job), ("--slurm-option", options)) if value]
    if executor == "local":
        if given or jobs != "node":
            raise InputError(f"{', '.join(given) or '--jobs'} applies to --executor slurm; add --executor slurm")
        return None
    if executor != "slurm":
        raise InputError(f"--executor {executor}: no such executor; give local or slurm")
    if jobs not in ("node", "drafter"):
        raise InputError(f"--jobs {jobs}: no such grouping; give node or drafter")
    extra = parse.sbatch_options(options or [])
    return SlurmOptions(partition=partition, account=account, time=time, gpus_per_job=gpus_per_job,
                        jobs="drafter" if jobs == "drafter" else "node", max_attempts=max_attempts, options=extra)


@settings(SweepSpec, "top", only=("ceiling", "gpus"))
@settings(Tuning, "tuning")
@settings(Criteria, "criteria", only=("objective", "min_gain", "indifference"))
@measuring
def sweep(
    engine: dict[str, Any],
    workload: dict[str, Any],
    load: dict[str, Any],
    criteria: dict[str, Any],
    schedule: dict[str, Any],
    tuning: dict[str, Any],
    top: dict[str, Any],
    file: Annotated[Path | None, typer.Argument(help="Sweep file (YAML): workload, engine, candidates, load, repeats, interleave.")] = None,
    spec: o.Spec = None,
    k: o.K = None,
    api_key: o.ApiKey = None,
    out: o.Out = Path("runs"),
    name: o.Name = None,
    json_out: o.Json = False,
    verify: Annotated[bool, typer.Option("--verify", help="Then measure the K the step-cost model proposes (--propose), recommend a K per batch size and run that dynamic config (as `specmeter verify`), reusing the sweep's servers.")] = False,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Print the servers and where each would run (GPUs, tensor parallel, memory fraction), then exit without starting anything.")] = False,
    executor: Annotated[str, typer.Option(help="Where the plan runs: local (here, the default) or slurm (jobs submitted with sbatch, one node each, watched, resubmitted when they end unfinished, merged into the run directory).")] = "local",
    jobs: Annotated[str, typer.Option(help="With --executor slurm: node (the whole plan in one job, on one node) or drafter (a job per drafter, all its K, with its own baseline on the same node).")] = "node",
    partition: Annotated[str | None, typer.Option(help="With --executor slurm: the partition jobs run in.")] = None,
    account: Annotated[str | None, typer.Option(help="With --executor slurm: the account jobs are charged to.")] = None,
    time: Annotated[str | None, typer.Option(help="With --executor slurm: each job's time limit, e.g. 04:00:00.")] = None,
    gpus_per_job: Annotated[int | None, typer.Option(min=0, help="With --executor slurm: GPUs of one node each job asks for (its servers are placed on them).")] = None,
    max_attempts: Annotated[int, typer.Option(min=1, help="With --executor slurm: attempts per job group before it is given up (each resubmission resumes the last one's finished cells on the same node).")] = 3,
    slurm_option: Annotated[list[str] | None, typer.Option(help="With --executor slurm: another sbatch option KEY=VALUE (repeatable), e.g. mem=64G, or KEY alone, e.g. exclusive.")] = None,
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
        resume_run(resume, api_key, json_out)
        return
    from specmeter.workflows import sweep as workflow
    from specmeter.workflows.propose import ProposeRequest
    from specmeter.workflows.verify import VerifyRequest

    objective = criteria.get("objective")
    shorthand = workflow.SweepFlags(specs=spec or [], k=parse.ks(k) if k else None)
    key = find_api_key(api_key)
    tune = validated(Tuning, tuning)
    slurm = _slurm_options(executor, jobs, partition, account, time, gpus_per_job, max_attempts, slurm_option)
    checks = VerifyRequest(criteria=decided_by({"objective": objective}, load if objective == "goodput" else {}),
                           rounds=tune.rounds, api_key=key,
                           off_is_an_answer=True, command=command_line()) if verify else None
    proposals = None
    if checks is not None or tuning.get("propose") or tune.propose_k:  # (without --verify the workflow refuses them)
        proposals = ProposeRequest(budget=tune.propose, k_range=tune.propose_k,
                                   criteria=checks.criteria if checks is not None else Criteria(),
                                   repeats=schedule.get("repeats"),
                                   api_key=key, command=command_line())
    decided: dict[str, Any] = {key: criteria[key] for key in ("min_gain", "indifference") if key in criteria}
    workflow.sweep(workflow.SweepRequest(out=out, file=file, flags=shorthand, top={**schedule, **decided, **top},
                                         name=name, engine=engine, api_key=key, load=load, workload=workload,
                                         dry_run=dry_run, command=command_line(),
                                         verify=checks, propose=proposals, slurm=slurm), terminal(json_out))


def slurm_job(
    run_dir: Annotated[Path, typer.Argument()],
    group: Annotated[str, typer.Argument()],
    attempt: Annotated[int, typer.Argument()],
    seed: Annotated[int, typer.Option(help="An earlier attempt to resume from on the same node (0: none).")] = 0,
) -> None:
    """Run one attempt of one job group of a Slurm run, into RUN_DIR/jobs/GROUP/attempt-ATTEMPT (what one Slurm
    array task runs: the driver writes the call into its batch script; not for people)."""
    from specmeter.workflows.slurm_job import run_job

    run_job(run_dir, group, attempt, seed or None, find_api_key(None), command_line(), terminal(False))
