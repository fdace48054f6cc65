"""`specmeter report`, `specmeter compare` (with `--check`: exit 5 where acceptance or speedup regressed; with
`--pool`: runs of one plan as one verdict), and the old form `check RUN --against REF`: stored runs, read again, no
server. Thin: parse, call one workflow."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from specmeter.cli.args import note, terminal
from specmeter.cli.settings import settings, validated
from specmeter.common.errors import InputError
from specmeter.config.comparison import POOL_ALONE, Bounds, Comparison
from specmeter.config.criteria import Criteria
from specmeter.config.flags import flagged
from specmeter.config.output import ReportFiles, Rereading


@settings(Rereading, "asked", validate=True)
def report(
    asked: Rereading,
    run_dir: Annotated[Path, typer.Argument(help="A run directory written by run, sweep or demo.")],
) -> None:
    """What did a run measure? Its report again from the saved results (no server), or as HTML, CSV, plots or the
    acceptance profiles simulators take."""
    from specmeter.workflows import report as workflow

    workflow.report(run_dir, asked, terminal(), recompute=asked.recompute)


def _check(run_dir: Path, against: Path, bounds: Bounds) -> None:
    from specmeter.workflows.check import check as workflow

    workflow(run_dir, against, bounds, terminal())


@settings(ReportFiles, "files", only=("plots",), validate=True)
@settings(Comparison, "how", validate=True)
@settings(Criteria, "criteria", only=("objective", "max_num_seqs", "min_gain", "indifference"))
def compare(
    criteria: dict[str, Any],
    how: Comparison,
    files: ReportFiles,
    run_dirs: Annotated[list[Path], typer.Argument(help="Two or more run directories on the same workload; the first is the reference. With --pool: runs of one plan (also results folders benchmarks/gpu/check.sh wrote).")],
) -> None:
    """How do stored runs differ (engines, versions, machines)? With --check: did a run regress? With --pool: does
    the answer hold across reruns?

    Side by side at the load points they share: throughput, TPOT, acceptance and each run's own speedup, and
    every run against the first, paired by request across runs. With --check (REF RUN): AL and speedup per
    configuration and point with intervals; exits 5 naming each metric, configuration and point whose whole
    interval lies below 1 - its bound, and refuses runs whose workloads differ (exit 2), saying what differs.
    With --pool (runs of one plan): each run is one observation of the deployment; per configuration and point the
    runs' speedups pooled by random effects over runs, with an interval that holds every run's estimate, and whether
    their verdicts agree; then one K table decided head to head on the pooled evidence (--objective, --min-gain,
    --indifference, --max-num-seqs as for recommend), each range saying whether every run chose its K, and where
    two Ks tie on it, that either is right. Nothing is written."""
    decide = [flag.name for name, _info, flag in flagged(Criteria) if name in criteria]
    if how.pool:
        if files.plots is not None:
            raise InputError(POOL_ALONE)
        from specmeter.workflows.pool import pool_runs

        pool_runs(run_dirs, validated(Criteria, criteria), terminal())
        return
    if decide:
        raise InputError(f"{' and '.join(decide)} decide the pooled answer: add --pool (compare RUN RUN ... --pool)")
    if how.check:
        if len(run_dirs) != 2 or how.allow_different_workloads or files.plots is not None:
            raise InputError(f"--check with {' '.join(map(str, run_dirs))}: --check takes the reference and the run "
                             "(REF RUN) on the same workload, without --allow-different-workloads or --plots")
        _check(run_dirs[1], run_dirs[0], how)
        return
    from specmeter.workflows.report import compare as compare_runs

    compare_runs(run_dirs, terminal(), allow_different_workloads=how.allow_different_workloads, plots=files.plots)


@settings(Bounds, "bounds", validate=True)
def check(
    bounds: Bounds,
    run_dir: Annotated[Path, typer.Argument()],
    against: Annotated[Path, typer.Option("--against")],
) -> None:
    """Old form of `compare REF RUN --check`."""
    note("specmeter check RUN --against REF", "specmeter compare REF RUN --check")
    _check(run_dir, against, bounds)
