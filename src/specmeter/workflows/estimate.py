"""`specmeter estimate --hardware NAME ...`: before renting a GPU, a roofline estimate of what speculative decoding
would do there, from datasheet numbers, the models' config.json and an acceptance profile. The request
(config/prediction.py) becomes the estimate's inputs here; the numbers come from predict/roofline.py."""

from __future__ import annotations

from typing import cast, get_args

from specmeter.common.errors import InputError
from specmeter.config.prediction import Prediction
from specmeter.predict.acceptance import AcceptanceProfile
from specmeter.predict.hardware import GB, custom, preset
from specmeter.predict.model_shape import detect_method, read_shape
from specmeter.predict.profiles import parse_acceptance
from specmeter.predict.roofline import estimate
from specmeter.report.estimate import render_estimate
from specmeter.schemas.estimate import Dtype, Efficiency, Estimate, EstimateInputs, Method, ModelShape
from specmeter.workflows.terminal import Terminal

DTYPES = {"bfloat16": "bf16", "float16": "fp16", "half": "fp16", "fp8": "fp8"}


def _dtype(flag: str, value: str) -> Dtype:
    if value not in get_args(Dtype):
        raise InputError(f"{flag} {value!r}: choose one of {', '.join(get_args(Dtype))}")
    return cast(Dtype, value)


def _serving_dtype(given: str | None, target: ModelShape) -> tuple[Dtype, str | None]:
    """--dtype, else the one the target's config holds (a float32 checkpoint is served in 16 bits)."""
    if given is not None:
        return _dtype("--dtype", given), None
    if target.dtype in DTYPES:
        return cast(Dtype, DTYPES[target.dtype]), None
    return "bf16", f"the target's config holds {target.dtype or 'no dtype'}: estimated as served in bf16 (--dtype)"


def _method(request: Prediction) -> Method:
    if request.method is not None and request.method not in get_args(Method):
        raise InputError(f"--method {request.method!r}: choose one of {', '.join(get_args(Method))}")
    method = cast(Method | None, request.method)
    if request.draft_config is None:
        if method != "ngram":
            raise InputError("give --draft-config (a draft model's or EAGLE head's config.json), or --method ngram "
                             "for drafting without a model")
        return method
    if method == "ngram":
        raise InputError("--method ngram drafts from the context, with no model: leave out --draft-config")
    return method or detect_method(request.draft_config)


def build(request: Prediction) -> tuple[EstimateInputs, AcceptanceProfile, list[str]]:
    """The estimate's inputs from the request, the acceptance profile, and notes on what was assumed."""
    numbers = (request.gpu_bandwidth_tbs, request.gpu_tflops, request.gpu_memory_gb)  # --gpu's
    if request.hardware is None and all(n is None for n in numbers):
        raise InputError("estimate needs a GPU: --hardware NAME (a preset, e.g. h100) or --gpu "
                         "bandwidth=TB/s,tflops=TFLOP/s,memory=GB for one of your own")
    if request.target_config is None:
        raise InputError("--target-config: give the target model's config.json (or its directory)")
    target = read_shape(request.target_config, "target")
    method = _method(request)
    draft = None
    if request.draft_config is not None:
        draft = read_shape(request.draft_config, "draft model", method, target)
    dtype, note = _serving_dtype(request.dtype, target)
    kv_dtype = _dtype("--kv-dtype", request.kv_dtype) if request.kv_dtype else ("fp16" if dtype == "fp16" else "bf16")
    base = preset(request.hardware) if request.hardware else None
    hw = custom(request.hardware, base, bandwidth_tbs=request.gpu_bandwidth_tbs, tflops=request.gpu_tflops,
                memory_gb=request.gpu_memory_gb, dtype=dtype)
    profile = parse_acceptance(request.acceptance, max(request.ks, default=1))
    inputs = EstimateInputs(
        hardware=hw, target=target, draft=draft, method=method, tp=request.tp,
        draft_tp=request.draft_tp if request.draft_tp is not None else request.tp, input_len=request.input_len,
        output_len=request.output_len, context_tokens=request.input_len + request.output_len / 2.0, dtype=dtype,
        kv_dtype=kv_dtype, acceptance=profile.source, acceptance_rates=list(profile.per_position),
        efficiency=Efficiency(memory=request.mem_efficiency, compute=request.compute_efficiency,
                              overhead_s=request.overhead_ms / 1000.0),
        mem_fraction=request.mem_fraction, reserve_bytes=request.reserve_gb * GB)
    return inputs, profile, [note] if note else []


def estimate_before_run(request: Prediction, term: Terminal) -> Estimate:
    """The command: build the inputs, estimate, and print the tables (or the one JSON document)."""
    inputs, profile, notes = build(request)
    result = estimate(inputs, profile, request.ks, request.batches)
    result = result.model_copy(update={"notes": notes + result.notes})
    if term.json_out:
        term.emit(result.model_dump_json(indent=2))
    else:
        render_estimate(result, term.out)
    return result
