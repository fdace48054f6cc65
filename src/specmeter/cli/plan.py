"""The `specmeter plan` command's flags: predictions from a run (RUN_DIR: a step-cost model calibrated on its
measured points) or, before renting a GPU, the roofline estimate (--hardware or --gpu, the models' config.json).

Beside cli/app.py, which registers it with the terminal it prints through, so this module needs nothing from
app.py. Thin like it: parse and call one workflow."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Annotated

import typer

from specmeter.cli import parse as flags
from specmeter.workflows.terminal import Terminal


def _levels(text: str, flag: str) -> list[int]:
    try:
        values = flags.levels(text)
    except ValueError as exc:
        raise typer.BadParameter(str(exc)) from None
    if not values or min(values) < 1:
        raise typer.BadParameter(f"{flag} {text!r}: positive integers, e.g. --k 1,2,4 --batch 1,8,64")
    return values


def plan_command(terminal: Callable[[bool], Terminal]) -> Callable[..., None]:
    """The command, printing through `terminal(json_out)`."""

    def plan(
        run_dir: Annotated[Path | None, typer.Argument(help="A sweep's run directory: predictions from a step-cost model calibrated on it. Without it, --hardware gives a roofline estimate before any run.")] = None,
        k: Annotated[str, typer.Option("--k", help="Ks to predict, e.g. 1,2,3,4,6,8.")] = "1,2,3,4,6,8",
        batch: Annotated[str, typer.Option(help="Engine batch sizes to predict, e.g. 1,2,4,8,16,32,64,128,256.")] = "1,2,4,8,16,32,64,128,256",
        acceptance: Annotated[str | None, typer.Option(help="A run directory (RUN or RUN:CONFIG_ID), an iid rate (0.7) or per-position rates (0.8,0.6,0.45); with RUN_DIR, instead of the run's own.")] = None,
        exclude: Annotated[list[str] | None, typer.Option(help="With RUN_DIR: leave this configuration out of the calibration and the acceptance profile (repeatable): its points are then predicted blind.")] = None,
        calibration: Annotated[Path | None, typer.Option(help="With RUN_DIR: a calibration.json from `specmeter calibrate` (runs pooled) instead of fitting on RUN_DIR alone.")] = None,
        hardware: Annotated[str | None, typer.Option(help="Before any run: a GPU preset (h100-sxm, h200, b200, a100-80gb, l40s, mi300x; h100, a100, mi300 also work).")] = None,
        gpu: Annotated[str | None, typer.Option(help="Before any run, a GPU of your own or the preset's numbers replaced: bandwidth=TB/s,tflops=dense TFLOP/s at --dtype,memory=GB (datasheet GB, taken as GiB).")] = None,
        target_config: Annotated[Path | None, typer.Option(help="Before any run: the target's config.json (or its model directory).")] = None,
        draft_config: Annotated[Path | None, typer.Option(help="Before any run: the draft model's or EAGLE head's config.json (or directory); none for --method ngram.")] = None,
        method: Annotated[str | None, typer.Option(help="Before any run: draft_model, eagle, eagle3 or ngram (default: from the draft's config).")] = None,
        tp: Annotated[int, typer.Option(help="Before any run: the target's tensor-parallel size (GPUs).")] = 1,
        draft_tp: Annotated[int | None, typer.Option(help="Before any run: the draft's tensor-parallel size (default: --tp).")] = None,
        input_len: Annotated[int | None, typer.Option(help="Before any run: input tokens per sequence (default 1024). With RUN_DIR swept over input lengths: the length to predict for (default: the first).")] = None,
        output_len: Annotated[int, typer.Option(help="Before any run: output tokens per sequence.")] = 256,
        dtype: Annotated[str | None, typer.Option(help="Before any run: weights and matmuls in bf16, fp16 or fp8 (default: the target config's).")] = None,
        kv_dtype: Annotated[str | None, typer.Option(help="Before any run: the KV cache in bf16, fp16 or fp8 (default: 16 bits).")] = None,
        mem_fraction: Annotated[float, typer.Option(help="Before any run: of each GPU's memory, what the engine may use (vLLM's gpu_memory_utilization).")] = 0.9,
        reserve_gb: Annotated[float, typer.Option(help="Before any run: GiB per GPU kept for activations, CUDA graphs and buffers.")] = 2.0,
        efficiency: Annotated[str | None, typer.Option(help="Before any run: what a step reaches of the peaks, and costs beyond them (defaults: memory=0.8,compute=0.6,overhead_ms=0.3 per forward pass).")] = None,
        json_out: Annotated[bool, typer.Option("--json", help="Print the predictions (or the estimate) as one JSON document instead of tables.")] = False,
    ) -> None:
        """Where speculation would pay. From a sweep (RUN_DIR): TPOT, throughput and speedup per drafter, K and
        engine batch size from a step-cost model calibrated on its measurements, with intervals, every measured
        point checked, and recommend's table filled beyond the measured batches, labelled predicted. Before any
        run (--hardware): a roofline estimate, not a measurement, from datasheet numbers, the models'
        config.json and an acceptance profile, with the KV capacity left after the draft."""
        ks, batches = _levels(k, "--k"), _levels(batch, "--batch")
        if run_dir is not None and hardware is None and gpu is None:
            from specmeter.workflows import plan as from_run

            from_run.plan_run(from_run.PlanRequest(run_dir=run_dir, ks=ks, batches=batches, acceptance=acceptance,
                                                   exclude=exclude or [], calibration=calibration,
                                                   input_len=input_len), terminal(json_out))
            return
        if exclude or calibration is not None:
            raise typer.BadParameter("--exclude and --calibration shape the model calibrated on RUN_DIR: give one")
        from specmeter.workflows import estimate

        estimate.estimate_before_run(estimate.EstimateRequest.from_flags(
            run_dir, gpu, efficiency, target_config=target_config, acceptance=acceptance, hardware=hardware,
            draft_config=draft_config, method=method, tp=tp, draft_tp=draft_tp,
            input_len=1024 if input_len is None else input_len,
            output_len=output_len, ks=ks, batches=batches, dtype=dtype, kv_dtype=kv_dtype, mem_fraction=mem_fraction,
            reserve_gb=reserve_gb), terminal(json_out))

    return plan
