"""`specmeter report`, `specmeter compare` (with `--check`: exit 5 where acceptance or speedup regressed; with
`--pool`: runs of one plan as one verdict), and the old form `check RUN --against REF`: stored runs, read again, no
server. Thin: parse, call one workflow."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from specmeter.cli import options as o
from specmeter.cli.args import note, terminal
from specmeter.cli.settings import settings, validated
from specmeter.common.errors import InputError
from specmeter.config import flag_text as parse
from specmeter.config.criteria import Criteria
from specmeter.config.flags import flagged

MaxAlDrop = Annotated[str | None, typer.Option(help="With --check: the largest drop in acceptance length allowed, a percentage (2%) or a fraction (0.02); default 2%.")]
MaxSpeedupDrop = Annotated[str | None, typer.Option(help="With --check: the largest drop in speedup over each run's own baseline allowed; default 3%.")]


def report(
    run_dir: Annotated[Path, typer.Argument(help="A run directory written by run, sweep or demo.")],
    html: Annotated[Path | None, typer.Option(help="Write the one-file HTML report here (plots inlined, works offline).")] = None,
    csv: Annotated[Path | None, typer.Option(help="Write requests.csv, points.csv, speedups.csv (and recommendation.csv) into this directory.")] = None,
    plots: o.Plots = None,
    recompute: Annotated[bool, typer.Option(help="First derive every point's metrics and the run's decisions again from the stored captures and requests (summary.json is rewritten; recommendation.json is kept).")] = False,
) -> None:
    """What did a run measure? Its report again from the saved results (no server), or as HTML, CSV or plots."""
    from specmeter.workflows import report as workflow

    workflow.report(run_dir, workflow.ReportFiles(html=html, csv=csv, plots=plots), terminal(),
                    recompute=recompute)


def _check(run_dir: Path, against: Path, max_al_drop: str | None, max_speedup_drop: str | None) -> None:
    from specmeter.workflows.check import Bounds
    from specmeter.workflows.check import check as workflow

    bounds = Bounds(parse.drop(max_al_drop or "2%", "--max-al-drop"),
                    parse.drop(max_speedup_drop or "3%", "--max-speedup-drop"))
    workflow(run_dir, against, bounds, terminal())


@settings(Criteria, "criteria", only=("objective", "max_num_seqs", "min_gain", "indifference"))
def compare(
    criteria: dict[str, Any],
    run_dirs: Annotated[list[Path], typer.Argument(help="Two or more run directories on the same workload; the first is the reference. With --pool: runs of one plan (also results folders benchmarks/gpu/check.sh wrote).")],
    allow_different_workloads: Annotated[bool, typer.Option(help="Compare runs whose requests or sampling differ (their differences then mix engine and workload).")] = False,
    plots: o.Plots = None,
    check: Annotated[bool, typer.Option("--check", help="REF RUN: exit 5 where RUN's acceptance or speedup dropped below REF's by more than the bounds, with confidence (for CI).")] = False,
    max_al_drop: MaxAlDrop = None,
    max_speedup_drop: MaxSpeedupDrop = None,
    pool: Annotated[bool, typer.Option("--pool", help="Runs of one plan (another day, box or server start) as one verdict per configuration and point and one answer, each range saying whether it held in every run.")] = False,
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
    if pool:
        if check or allow_different_workloads or plots is not None:
            raise InputError("--pool takes runs of one plan, without --check, --allow-different-workloads or --plots")
        from specmeter.workflows.pool import pool_runs

        pool_runs(run_dirs, validated(Criteria, criteria), terminal())
        return
    if decide:
        raise InputError(f"{' and '.join(decide)} decide the pooled answer: add --pool (compare RUN RUN ... --pool)")
    if check:
        if len(run_dirs) != 2 or allow_different_workloads or plots is not None:
            raise InputError(f"--check with {' '.join(map(str, run_dirs))}: --check takes the reference and the run "
                             "(REF RUN) on the same workload, without --allow-different-workloads or --plots")
        _check(run_dirs[1], run_dirs[0], max_al_drop, max_speedup_drop)
        return
    given = [f for f, v in (("--max-al-drop", max_al_drop), ("--max-speedup-drop", max_speedup_drop)) if v]
    if given:
        raise InputError(f"{' and '.join(given)} bound --check: add --check (compare REF RUN --check)")
    from specmeter.workflows.report import compare as compare_runs

    compare_runs(run_dirs, terminal(), allow_different_workloads=allow_different_workloads, plots=plots)


def check(
    run_dir: Annotated[Path, typer.Argument()],
    against: Annotated[Path, typer.Option("--against")],
    max_al_drop: MaxAlDrop = None,
    max_speedup_drop: MaxSpeedupDrop = None,
) -> None:
    """Old form of `compare REF RUN --check`."""
    note("specmeter check RUN --against REF", "specmeter compare REF RUN --check")
    _check(run_dir, against, max_al_drop, max_speedup_drop)
