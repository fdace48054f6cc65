"""`specmeter plan --hardware NAME ...` (no run directory): before renting a GPU, a roofline estimate of what
speculative decoding would do there, from datasheet numbers, the models' config.json and an acceptance
profile. The flags become the estimate's inputs here; the numbers come from predict/roofline.py."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast, get_args

from specmeter.common.errors import InputError
from specmeter.predict.acceptance import AcceptanceProfile
from specmeter.predict.hardware import GB, custom, preset
from specmeter.predict.model_shape import detect_method, read_shape
from specmeter.predict.predict import DEFAULT_BATCHES, DEFAULT_KS
from specmeter.predict.profiles import parse_acceptance
from specmeter.predict.roofline import estimate
from specmeter.report.estimate import render_estimate
from specmeter.schemas.estimate import Dtype, Efficiency, Estimate, EstimateInputs, Method, ModelShape
from specmeter.workflows.terminal import Terminal

DTYPES = {"bfloat16": "bf16", "float16": "fp16", "half": "fp16", "fp8": "fp8"}


@dataclass(frozen=True)
class EstimateRequest:
    """The flags of `specmeter plan` without a run directory. Defaults: 0.8 of memory bandwidth and 0.6 of dense
    tensor throughput reached, 0.3 ms per forward pass beyond them, 90% of each GPU's memory for the engine
    (vLLM's gpu_memory_utilization) of which 2 GiB are kept for activations and CUDA graphs."""

    target_config: Path | None
    acceptance: str | None
    hardware: str | None = None
    gpu_bandwidth_tbs: float | None = None
    gpu_tflops: float | None = None
    gpu_memory_gb: float | None = None
    draft_config: Path | None = None
    method: str | None = None
    tp: int = 1
    draft_tp: int | None = None
    input_len: int = 1024
    output_len: int = 256
    ks: Sequence[int] = DEFAULT_KS
    batches: Sequence[int] = DEFAULT_BATCHES
    dtype: str | None = None
    kv_dtype: str | None = None
    mem_fraction: float = 0.9
    reserve_gb: float = 2.0
    mem_efficiency: float = 0.8
    compute_efficiency: float = 0.6
    overhead_ms: float = 0.3

    @classmethod
    def from_flags(cls, run_dir: Path | None, gpu: str | None, efficiency: str | None,
                   **flags: Any) -> EstimateRequest:
        """The command's flags: `--gpu bandwidth=..,tflops=..,memory=..` and `--efficiency memory=..,compute=..,
        overhead_ms=..` as numbers; a run directory is for predictions from a run, not beside --hardware."""
        if run_dir is not None:
            raise InputError(f"{run_dir}: RUN_DIR predicts from a run's measurements, --hardware and --gpu estimate "
                             "before any run: give one or the other")
        if flags.get("hardware") is None and gpu is None:
            raise InputError("give RUN_DIR (predictions from a run) or --hardware NAME (an estimate before any run; "
                             "--gpu bandwidth=..,tflops=..,memory=.. for a GPU of your own)")
        return cls(**flags, **_numbers("--gpu", gpu, GPU_KEYS), **_numbers("--efficiency", efficiency, EFFICIENCY_KEYS))


GPU_KEYS = {"bandwidth": "gpu_bandwidth_tbs", "tflops": "gpu_tflops", "memory": "gpu_memory_gb"}
EFFICIENCY_KEYS = {"memory": "mem_efficiency", "compute": "compute_efficiency", "overhead_ms": "overhead_ms"}


def _numbers(flag: str, text: str | None, keys: dict[str, str]) -> dict[str, Any]:
    """KEY=NUMBER pairs (`memory=0.8,compute=0.6`) as the request's fields they name."""
    out: dict[str, Any] = {}
    for item in (text or "").split(","):
        if not item.strip():
            continue
        key, _sep, value = item.partition("=")
        if key.strip() not in keys:
            raise InputError(f"{flag} {text!r}: give KEY=NUMBER pairs with keys {', '.join(keys)}")
        try:
            out[keys[key.strip()]] = float(value)
        except ValueError:
            raise InputError(f"{flag} {text!r}: {key.strip()} takes a number, not {value!r}") from None
    return out


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


def _method(request: EstimateRequest) -> Method:
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


def build(request: EstimateRequest) -> tuple[EstimateInputs, AcceptanceProfile, list[str]]:
    """The estimate's inputs from the flags, the acceptance profile, and notes on what was assumed."""
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
    for flag, value, high in (("--mem-fraction", request.mem_fraction, 1.0),
                              ("--mem-efficiency", request.mem_efficiency, 1.0),
                              ("--compute-efficiency", request.compute_efficiency, 1.0)):
        if not 0.0 < value <= high:
            raise InputError(f"{flag} {value}: give a fraction in (0, 1]")
    if request.tp < 1 or (request.draft_tp is not None and request.draft_tp < 1):
        raise InputError("--tp and --draft-tp: give a number of GPUs, 1 or more")
    if request.input_len < 0 or request.output_len < 1:
        raise InputError("--input-len and --output-len: tokens per sequence (input >= 0, output >= 1)")
    if request.reserve_gb < 0 or request.overhead_ms < 0:
        raise InputError("--reserve-gb and --overhead-ms: give 0 or more")
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


def estimate_before_run(request: EstimateRequest, term: Terminal) -> Estimate:
    """The command: build the inputs, estimate, and print the tables (or the one JSON document)."""
    inputs, profile, notes = build(request)
    result = estimate(inputs, profile, request.ks, request.batches)
    result = result.model_copy(update={"notes": notes + result.notes})
    if term.json_out:
        term.emit(result.model_dump_json(indent=2))
    else:
        render_estimate(result, term.out)
    return result
