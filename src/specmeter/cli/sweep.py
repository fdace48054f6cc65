"""The `specmeter sweep` command's flags, and the hidden command each of its Slurm jobs runs.

Beside cli/app.py, which registers them with the terminal they print through and the resume they hand over to, so
this module needs nothing from app.py. Thin like it: parse and call one workflow."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from specmeter.cli import parse as flags
from specmeter.cli.args import API_KEY_ENV, command_line, find_api_key, flag
from specmeter.workflows.terminal import Terminal

if TYPE_CHECKING:
    from specmeter.schemas.jobs import SlurmOptions

Resume = Callable[[Path, "str | None", bool], None]


def _slurm_options(executor: str, jobs: str, partition: str | None, account: str | None, time: str | None,
                   gpus_per_job: int | None, max_attempts: int, options: list[str] | None) -> SlurmOptions | None:
    """The Slurm flags as options (None: --executor local, where they must not be given)."""
    from specmeter.schemas.jobs import SlurmOptions
    given = [name for name, value in (("--partition", partition), ("--account", account), ("--time", time),
                                      ("--gpus-per-job", gpus_per_job), ("--slurm-option", options)) if value]
    if executor == "local":
        if given or jobs != "node":
            raise typer.BadParameter(f"{', '.join(given) or '--jobs'} applies to --executor slurm; add it")
        return None
    if executor != "slurm":
        raise typer.BadParameter(f"--executor {executor!r}: local or slurm")
    if jobs not in ("node", "drafter"):
        raise typer.BadParameter(f"--jobs {jobs!r}: node or drafter")
    extra = {}
    for item in options or []:
        key, _, value = item.partition("=")
        if not key or key.startswith("-"):
            raise typer.BadParameter(f"--slurm-option {item!r}: give KEY=VALUE (sbatch's --KEY=VALUE), e.g. mem=64G")
        extra[key] = value
    return SlurmOptions(partition=partition, account=account, time=time, gpus_per_job=gpus_per_job,
                        jobs="drafter" if jobs == "drafter" else "node", max_attempts=max_attempts, options=extra)


def sweep_command(terminal: Callable[[bool], Terminal], resume_run: Resume) -> Callable[..., None]:
    """The command, printing through `terminal(json_out)`; --resume hands over to `resume_run`."""

    def sweep(
        file: Annotated[Path | None, typer.Argument(help="Sweep file (YAML): workload, engine, candidates, load, repeats, interleave.")] = None,
        model: Annotated[str | None, typer.Option(help="Shorthand: target model to launch.")] = None,
        spec: Annotated[list[str] | None, typer.Option(help="Shorthand: a speculative config as JSON (repeatable); --k expands its K.")] = None,
        k: Annotated[str | None, typer.Option(help="Shorthand: draft lengths to try, e.g. 1,2,4.")] = None,
        concurrency: Annotated[str | None, typer.Option(help="Shorthand: concurrency points, e.g. 1,4,16, or auto: measure 1, 8 and 64, then where the crossover or a best-K boundary is least sure (a file's load.concurrency: {auto: {...}} sets the range, width and budget).")] = None,
        request_rate: Annotated[str | None, typer.Option(help="Shorthand: request-rate points (conversations/s).")] = None,
        dataset: Annotated[str, typer.Option(help="Shorthand: workload name.")] = "sample",
        dataset_path: Annotated[str | None, typer.Option(help="Shorthand: dataset file or directory.")] = None,
        num_prompts: Annotated[int | None, typer.Option(help="Shorthand: conversations per point.")] = None,
        max_tokens: Annotated[int | None, typer.Option(help="Shorthand: output cap per request.")] = None,
        dtype: Annotated[str | None, typer.Option(help="Shorthand: model dtype.")] = None,
        engine_env: Annotated[list[str] | None, typer.Option(help="Shorthand: server environment KEY=VALUE (repeatable).")] = None,
        repeats: Annotated[int | None, typer.Option(help="Run every point this many times per configuration.")] = None,
        interleave: Annotated[bool | None, typer.Option(help="Keep every server up together and alternate them at each point.")] = None,
        api_key: Annotated[str | None, typer.Option(help=f"API key (else ${API_KEY_ENV[0]} or ${API_KEY_ENV[1]}); never written anywhere.")] = None,
        out: Annotated[Path, typer.Option(help="Directory that receives the run directory.")] = Path("runs"),
        name: Annotated[str | None, typer.Option(help="Run directory name (default: timestamp + label).")] = None,
        json_out: Annotated[bool, typer.Option("--json", help="Print summary.json to stdout instead of tables (with --verify: one document of the sweep's summary, the final recommendation and each verification's summary).")] = False,
        resume: Annotated[Path | None, typer.Option(help="Finish an interrupted sweep (same as `specmeter resume`).")] = None,
        verify: Annotated[bool, typer.Option("--verify", help="Then recommend a K per batch size and run that dynamic config (as `specmeter verify`), reusing the sweep's servers.")] = False,
        objective: Annotated[str, typer.Option(help="With --verify: what the recommendation maximises: throughput, tpot or goodput.")] = "throughput",
        slo: Annotated[str | None, typer.Option(help="Per-request bounds, e.g. ttft_ms=500,tpot_ms=50: each point's goodput beside its throughput (sets load.slo); with --verify --objective goodput, what the table maximises.")] = None,
        rounds: Annotated[int, typer.Option(min=1, help="With --verify: the most verification rounds (a table verification contradicts is corrected and verified again).")] = 2,
        min_gain: Annotated[float | None, typer.Option(help="A larger K (or costlier drafter) must beat a smaller one head to head by more than this fraction (default 0.01).")] = None,
        stop_at_saturation: Annotated[bool | None, typer.Option("--stop-at-saturation/--no-stop-at-saturation", help="Stop going up the loads once every server saturated: throughput no longer rising while latency grows (default: on; load.stop_at_saturation).")] = None,
        ceiling: Annotated[bool, typer.Option("--ceiling", help="Add per drafter and K the same config at 100% synthetic acceptance (AL = K + 1; llama.cpp, or vLLM on a GPU build): the most that K could give here. Never recommended.")] = False,
        gpus: Annotated[str | None, typer.Option(help="GPU ids the sweep may use, e.g. 0,1 (nvidia-smi's indices; default: the file's gpus, else CUDA_VISIBLE_DEVICES, else every GPU nvidia-smi lists). Interleaved servers get GPUs of their own, or share them with equal memory fractions.")] = None,
        dry_run: Annotated[bool, typer.Option("--dry-run", help="Print the servers and where each would run (GPUs, tensor parallel, memory fraction), then exit without starting anything.")] = False,
        executor: Annotated[str, typer.Option(help="Where the plan runs: local (here, the default) or slurm (jobs submitted with sbatch, one node each, watched, resubmitted when they end unfinished, merged into the run directory).")] = "local",
        jobs: Annotated[str, typer.Option(help="With --executor slurm: node (the whole plan in one job, on one node) or drafter (a job per drafter, all its K, with its own baseline on the same node).")] = "node",
        partition: Annotated[str | None, typer.Option(help="With --executor slurm: the partition jobs run in.")] = None,
        account: Annotated[str | None, typer.Option(help="With --executor slurm: the account jobs are charged to.")] = None,
        time: Annotated[str | None, typer.Option(help="With --executor slurm: each job's time limit, e.g. 04:00:00.")] = None,
        gpus_per_job: Annotated[int | None, typer.Option(min=0, help="With --executor slurm: GPUs of one node each job asks for (its servers are placed on them).")] = None,
        max_attempts: Annotated[int, typer.Option(min=1, help="With --executor slurm: attempts per job group before it is given up (each resubmission resumes the last one's finished cells on the same node).")] = 3,
        slurm_option: Annotated[list[str] | None, typer.Option(help="With --executor slurm: another sbatch option KEY=VALUE (repeatable), e.g. mem=64G, or KEY alone, e.g. exclusive.")] = None,
    ) -> None:
        """Every speculative config at every load point against the baseline: which drafter and which K, at
        which load, and where speculation stops paying. Takes a sweep file, or the shorthand
        `specmeter sweep --model M --spec '{...}' --k 1,2,4 --concurrency 1,4,16`. With `--concurrency auto`
        (or load: {concurrency: auto} in the file) the sweep measures 1, 8 and 64, then places each next point
        where the crossover or a best-K boundary is least sure, until each is bracketed within 1.5x or 8 points
        ran; the report says which points were chosen and why. A candidate may carry `synthetic_acceptance:
        {rates: [...]}` or `{length: L}` (acceptance set, not verified: benchmarking only). With `--executor
        slurm` the plan runs as Slurm jobs, each on one node (a candidate beside its own baseline), resubmitted
        when they end unfinished and merged into the run directory; the report names each number's node."""
        if resume is not None:
            resume_run(resume, api_key, json_out)
            return
        from specmeter.workflows import sweep as workflow
        from specmeter.workflows.recommend import Criteria, parse_slo
        from specmeter.workflows.verify import VerifyRequest

        shorthand = workflow.SweepFlags(model=model, specs=spec or [], k=flag(flags.levels, k),
                                        concurrency=flag(flags.levels_or_auto, concurrency),
                                        request_rate=flag(flags.rates, request_rate), dataset=dataset,
                                        dataset_path=dataset_path, num_prompts=num_prompts, max_tokens=max_tokens,
                                        dtype=dtype, engine_env=flag(flags.pairs, engine_env) or {})
        key = find_api_key(api_key)
        slurm = _slurm_options(executor, jobs, partition, account, time, gpus_per_job, max_attempts, slurm_option)
        checks = VerifyRequest(criteria=Criteria.from_flags(objective, slo if objective == "goodput" else None),
                               rounds=rounds, api_key=key,
                               off_is_an_answer=True, command=command_line()) if verify else None
        workflow.sweep(workflow.SweepRequest(out=out, file=file, flags=shorthand, repeats=repeats,
                                             interleave=interleave, min_gain=min_gain,
                                             ceiling=True if ceiling else None, name=name, slo=parse_slo(slo),
                                             stop_at_saturation=stop_at_saturation, api_key=key,
                                             gpus=flag(flags.gpu_ids, gpus), dry_run=dry_run, command=command_line(),
                                             verify=checks, slurm=slurm), terminal(json_out))

    return sweep


def slurm_job_command(terminal: Callable[[bool], Terminal]) -> Callable[..., None]:
    """What one Slurm array task runs (the driver writes the call into its batch script; not for people)."""

    def slurm_job(
        run_dir: Annotated[Path, typer.Argument()],
        group: Annotated[str, typer.Argument()],
        attempt: Annotated[int, typer.Argument()],
        seed: Annotated[int, typer.Option(help="An earlier attempt to resume from on the same node (0: none).")] = 0,
    ) -> None:
        """Run one attempt of one job group of a Slurm run, into RUN_DIR/jobs/GROUP/attempt-ATTEMPT."""
        from specmeter.workflows.slurm_job import run_job

        run_job(run_dir, group, attempt, seed or None, find_api_key(None), command_line(), terminal(False))

    return slurm_job
