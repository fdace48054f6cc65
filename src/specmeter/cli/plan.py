"""`specmeter plan RUN...` (predictions from a step-cost model fitted on measured runs) and `specmeter estimate`
(before any run: a roofline estimate from datasheet numbers and the models' config.json), and the old form
`calibrate RUN...`. Thin: parse, validate, call one workflow."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from specmeter.cli import options as o
from specmeter.cli.args import note, terminal
from specmeter.cli.settings import settings
from specmeter.common.errors import InputError
from specmeter.config import flag_text as parse
from specmeter.config.drafts import Drafts
from specmeter.config.models import EngineSpec
from specmeter.config.workload import WorkloadSpec

KS = "1,2,3,4,6,8"
BATCHES = "1,2,4,8,16,32,64,128,256"


@settings(Drafts, "drafts", only=("k",), defaults={"k": KS})
@settings(WorkloadSpec, "workload", only=("input_len",))
def plan(
    workload: dict[str, Any],
    drafts: dict[str, Any],
    run_dirs: Annotated[list[Path], typer.Argument(help="Run directories of one engine, target and hardware (a sweep's, or several pooled for the fit); predictions are for the first.")],
    batch: o.Batch = BATCHES,
    acceptance: o.Acceptance = None,
    exclude: o.Exclude = None,
    calibration: Annotated[Path | None, typer.Option(help="A calibration.json written by an earlier plan (e.g. of runs pooled) instead of fitting again.")] = None,
    json_out: o.Json = False,
) -> None:
    """What would K, drafters and batch sizes nobody measured do? Predicted from measured runs.

    TPOT, throughput and speedup per drafter, K and engine batch size from a step-cost model fitted on the
    runs' measurements (several runs: pooled, calibration.json written into the first), with intervals, every
    measured point checked, and recommend's table filled beyond the measured batches, labelled predicted.
    --input-len N: with a run swept over input lengths, the length to predict for (default: the first)."""
    from specmeter.workflows import plan as workflow

    if len(run_dirs) > 1 and calibration is not None:
        raise InputError(f"--calibration {calibration} with {len(run_dirs)} runs: several runs are pooled into a "
                         "calibration of their own; give the runs or --calibration with one run")
    request = workflow.PlanRequest(run_dir=run_dirs[0], ks=drafts["k"],
                                   batches=parse.sizes(batch, "--batch", "1,8,64"), acceptance=acceptance,
                                   exclude=exclude or [], calibration=calibration,
                                   input_len=parse.one_length(workload["input_len"], "plan") if workload else None)
    if len(run_dirs) > 1:
        workflow.plan_pooled(run_dirs, request, terminal(json_out))
    else:
        workflow.plan_run(request, terminal(json_out))


@settings(WorkloadSpec, "workload", only=("input_len",), defaults={"input_len": "1024"})
@settings(EngineSpec, "engine", only=("dtype",))
@settings(Drafts, "drafts", only=("k",), defaults={"k": KS})
def estimate(
    drafts: dict[str, Any],
    engine: dict[str, Any],
    workload: dict[str, Any],
    hardware: Annotated[str | None, typer.Option(help="A GPU preset (h100-sxm, h200, b200, a100-80gb, l40s, mi300x; h100, a100, mi300 also work).")] = None,
    gpu: Annotated[str | None, typer.Option(help="A GPU of your own, or the preset's numbers replaced: bandwidth=TB/s,tflops=dense TFLOP/s at --dtype,memory=GB (datasheet GB, taken as GiB).")] = None,
    target_config: Annotated[Path | None, typer.Option(help="The target's config.json (or its model directory).")] = None,
    draft_config: Annotated[Path | None, typer.Option(help="The draft model's or EAGLE head's config.json (or directory); none for --method ngram.")] = None,
    method: Annotated[str | None, typer.Option(help="draft_model, eagle, eagle3 or ngram (default: from the draft's config).")] = None,
    acceptance: o.Acceptance = None,
    batch: o.Batch = BATCHES,
    tp: Annotated[int, typer.Option(help="The target's tensor-parallel size (GPUs).")] = 1,
    draft_tp: Annotated[int | None, typer.Option(help="The draft's tensor-parallel size (default: --tp).")] = None,
    output_len: Annotated[int, typer.Option(help="Output tokens per sequence.")] = 256,
    kv_dtype: Annotated[str | None, typer.Option(help="The KV cache in bf16, fp16 or fp8 (default: 16 bits).")] = None,
    mem_fraction: Annotated[float, typer.Option(help="Of each GPU's memory, what the engine may use (vLLM's gpu_memory_utilization).")] = 0.9,
    reserve_gb: Annotated[float, typer.Option(help="GiB per GPU kept for activations, CUDA graphs and buffers.")] = 2.0,
    efficiency: Annotated[str | None, typer.Option(help="What a step reaches of the peaks, and costs beyond them (defaults: memory=0.8,compute=0.6,overhead_ms=0.3 per forward pass).")] = None,
    json_out: o.Json = False,
) -> None:
    """Before any run: would speculation pay on this GPU, for this target and drafter? A roofline estimate.

    Not a measurement: from datasheet numbers (--hardware or --gpu), the models' config.json and an acceptance
    profile, TPOT and throughput per K and batch size, with the KV capacity left after the draft.
    --input-len N: input tokens per sequence."""
    from specmeter.workflows import estimate as workflow

    dtype = engine.get("dtype")
    if hardware is None and gpu is None:
        raise InputError("estimate needs a GPU: --hardware NAME (a preset, e.g. h100) or --gpu "
                         "bandwidth=TB/s,tflops=TFLOP/s,memory=GB for one of your own")
    workflow.estimate_before_run(workflow.EstimateRequest.from_flags(
        None, gpu, efficiency, target_config=target_config, acceptance=acceptance, hardware=hardware,
        draft_config=draft_config, method=method, tp=tp, draft_tp=draft_tp,
        input_len=parse.one_length(workload["input_len"], "estimate"), output_len=output_len, ks=drafts["k"],
        batches=parse.sizes(batch, "--batch", "1,8,64"),
        dtype=None if dtype is None else workflow.DTYPES.get(dtype, dtype), kv_dtype=kv_dtype,
        mem_fraction=mem_fraction, reserve_gb=reserve_gb), terminal(json_out))


def calibrate(
    run_dirs: Annotated[list[Path], typer.Argument()],
    exclude: o.Exclude = None,
    out: Annotated[Path | None, typer.Option(help="Where to write calibration.json (default: into the first run directory).")] = None,
    json_out: o.Json = False,
) -> None:
    """Old form of `plan RUN...` (the fit of runs pooled, without the predictions)."""
    from specmeter.workflows import plan as workflow

    note("specmeter calibrate RUN...", "specmeter plan RUN...")
    workflow.calibrate_runs(run_dirs, exclude or [], out, terminal(json_out))
