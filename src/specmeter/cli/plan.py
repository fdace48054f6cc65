"""`specmeter plan RUN...` (predictions from a step-cost model fitted on measured runs) and `specmeter estimate`
(before any run: a roofline estimate from datasheet numbers and the models' config.json), and the old form
`calibrate RUN...`. Thin: parse, validate, call one workflow."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from specmeter.cli.args import note, terminal
from specmeter.cli.settings import settings, validated
from specmeter.common.errors import InputError
from specmeter.config import flag_text as parse
from specmeter.config.drafts import Drafts
from specmeter.config.models import EngineSpec
from specmeter.config.prediction import DEFAULT_KS, Fit, Prediction
from specmeter.config.workload import WorkloadSpec

KS = ",".join(map(str, DEFAULT_KS))  # the Ks predicted where --k is not given


@settings(Fit, "fit", validate=True)
@settings(Prediction, "asked", only=("acceptance", "batches"), validate=True)
@settings(Drafts, "drafts", only=("k",), defaults={"k": KS})
@settings(WorkloadSpec, "workload", only=("input_len",))
def plan(
    workload: dict[str, Any],
    drafts: dict[str, Any],
    asked: Prediction,
    fit: Fit,
    run_dirs: Annotated[list[Path], typer.Argument(help="Run directories of one engine, target and hardware (a sweep's, or several pooled for the fit); predictions are for the first.")],
) -> None:
    """What would K, drafters and batch sizes nobody measured do? Predicted from measured runs.

    TPOT, throughput and speedup per drafter, K and engine batch size from a step-cost model fitted on the
    runs' measurements (several runs: pooled, calibration.json written into the first), with intervals, every
    measured point checked, and recommend's table filled beyond the measured batches, labelled predicted.
    --input-len N: with a run swept over input lengths, the length to predict for (default: the first)."""
    from specmeter.workflows import plan as workflow

    if len(run_dirs) > 1 and fit.calibration is not None:
        raise InputError(f"--calibration {fit.calibration} with {len(run_dirs)} runs: several runs are pooled into a "
                         "calibration of their own; give the runs or --calibration with one run")
    request = workflow.PlanRequest(run_dir=run_dirs[0], ks=drafts["k"], batches=asked.batches,
                                   acceptance=asked.acceptance, exclude=fit.exclude, calibration=fit.calibration,
                                   input_len=parse.one_length(workload["input_len"], "plan") if workload else None)
    if len(run_dirs) > 1:
        workflow.plan_pooled(run_dirs, request, terminal())
    else:
        workflow.plan_run(request, terminal())


@settings(Prediction, "asked")
@settings(WorkloadSpec, "workload", only=("input_len",), defaults={"input_len": "1024"})
@settings(EngineSpec, "engine", only=("dtype",))
@settings(Drafts, "drafts", only=("k",), defaults={"k": KS})
def estimate(
    drafts: dict[str, Any],
    engine: dict[str, Any],
    workload: dict[str, Any],
    asked: dict[str, Any],
) -> None:
    """Before any run: would speculation pay on this GPU, for this target and drafter? A roofline estimate.

    Not a measurement: from datasheet numbers (--hardware or --gpu), the models' config.json and an acceptance
    profile, TPOT and throughput per K and batch size, with the KV capacity left after the draft.
    --input-len N: input tokens per sequence."""
    from specmeter.workflows import estimate as workflow

    dtype = engine.get("dtype")
    request = validated(Prediction, {**asked, "ks": drafts["k"], "input_len": parse.one_length(workload["input_len"],
                                                                                            "estimate"),
                                     "dtype": None if dtype is None else workflow.DTYPES.get(dtype, dtype)})
    workflow.estimate_before_run(request, terminal())


@settings(Fit, "fit", only=("exclude",), validate=True)
def calibrate(
    fit: Fit,
    run_dirs: Annotated[list[Path], typer.Argument()],
    out: Annotated[Path | None, typer.Option(help="Where to write calibration.json (default: into the first run directory).")] = None,
) -> None:
    """Old form of `plan RUN...` (the fit of runs pooled, without the predictions)."""
    from specmeter.workflows import plan as workflow

    note("specmeter calibrate RUN...", "specmeter plan RUN...")
    workflow.calibrate_runs(run_dirs, fit.exclude, out, terminal())
