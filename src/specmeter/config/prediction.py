"""What a prediction is asked for: the batch sizes and the acceptance (plan and estimate; the Ks are --k, config/
drafts.py), what plan fits on, and before any run the GPU, as a preset or datasheet numbers, the models' configs and
how the engine is set up (estimate). Each is a field with its flag; a value the estimate cannot use is refused in
one line."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Annotated, Any, ClassVar

from pydantic import Field, model_validator

from specmeter.common.errors import InputError
from specmeter.config import flag_text
from specmeter.config.flags import Flag
from specmeter.config.points import StrictModel

DEFAULT_KS = (1, 2, 3, 4, 6, 8)
DEFAULT_BATCHES = (1, 2, 4, 8, 16, 32, 64, 128, 256)
# The KEY=NUMBER pairs of --gpu and --efficiency, and the fields each key sets.
GPU_KEYS = {"bandwidth": "gpu_bandwidth_tbs", "tflops": "gpu_tflops", "memory": "gpu_memory_gb"}
EFFICIENCY_KEYS = {"memory": "mem_efficiency", "compute": "compute_efficiency", "overhead_ms": "overhead_ms"}


def _numbers(flag: str, text: str | None, keys: dict[str, str]) -> dict[str, Any]:
    """KEY=NUMBER pairs (`memory=0.8,compute=0.6`) as the fields they name."""
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


class Fit(StrictModel):
    """What `plan` fits its step-cost model on: the runs' measurements but those left out, or a stored fit."""

    exclude: Annotated[list[str], Flag("--exclude")] = Field(
        default_factory=list, description="Leave this configuration out of the fit and the acceptance profile "
        "(repeatable): its points are then predicted blind.")
    calibration: Annotated[Path | None, Flag("--calibration")] = Field(
        default=None, description="A calibration.json written by an earlier plan (e.g. of runs pooled) instead of "
        "fitting again.")


class PredictionShorthand(StrictModel):
    """Flags that set several fields of a prediction at once."""

    gpu: Annotated[str | None, Flag("--gpu")] = Field(
        default=None, description="A GPU of your own, or the preset's numbers replaced: bandwidth=TB/s,tflops=dense "
        "TFLOP/s at --dtype,memory=GB (datasheet GB, taken as GiB).")
    efficiency: Annotated[str | None, Flag("--efficiency")] = Field(
        default=None, description="What a step reaches of the peaks, and costs beyond them (defaults: memory=0.8,"
        "compute=0.6,overhead_ms=0.3 per forward pass).")


class Prediction(StrictModel):
    """A prediction's inputs. Defaults: 0.8 of memory bandwidth and 0.6 of dense tensor throughput reached, 0.3 ms
    per forward pass beyond them, 90% of each GPU's memory for the engine (vLLM's gpu_memory_utilization) of which
    2 GiB are kept for activations and CUDA graphs."""

    SHORTHAND: ClassVar[type[StrictModel]] = PredictionShorthand

    acceptance: Annotated[str | None, Flag("--acceptance")] = Field(
        default=None, description="Acceptance: a run directory (RUN or RUN:CONFIG_ID), an iid rate (0.7) or "
        "per-position rates (0.8,0.6,0.45); plan: instead of the run's own.")
    batches: Annotated[list[int], Flag("--batch", text=functools.partial(flag_text.sizes, example="1,8,64"))] = Field(
        default=list(DEFAULT_BATCHES), description="Engine batch sizes to predict, e.g. 1,8,64.")
    ks: list[int] = Field(default=list(DEFAULT_KS), description="Draft lengths to predict (--k).")
    hardware: Annotated[str | None, Flag("--hardware")] = Field(
        default=None, description="A GPU preset (h100-sxm, h200, b200, a100-80gb, l40s, mi300x; h100, a100, mi300 "
        "also work).")
    gpu_bandwidth_tbs: float | None = None
    gpu_tflops: float | None = None
    gpu_memory_gb: float | None = None
    target_config: Annotated[Path | None, Flag("--target-config")] = Field(
        default=None, description="The target's config.json (or its model directory).")
    draft_config: Annotated[Path | None, Flag("--draft-config")] = Field(
        default=None, description="The draft model's or EAGLE head's config.json (or directory); none for --method "
        "ngram.")
    method: Annotated[str | None, Flag("--method")] = Field(
        default=None, description="draft_model, eagle, eagle3 or ngram (default: from the draft's config).")
    tp: Annotated[int, Flag("--tp")] = Field(default=1, description="The target's tensor-parallel size (GPUs).")
    draft_tp: Annotated[int | None, Flag("--draft-tp")] = Field(
        default=None, description="The draft's tensor-parallel size (default: --tp).")
    input_len: int = Field(default=1024, description="Input tokens per sequence (--input-len).")
    output_len: Annotated[int, Flag("--output-len")] = Field(default=256, description="Output tokens per sequence.")
    dtype: str | None = Field(default=None, description="The weights' precision (--dtype).")
    kv_dtype: Annotated[str | None, Flag("--kv-dtype")] = Field(
        default=None, description="The KV cache in bf16, fp16 or fp8 (default: 16 bits).")
    mem_fraction: Annotated[float, Flag("--mem-fraction")] = Field(
        default=0.9, description="Of each GPU's memory, what the engine may use (vLLM's gpu_memory_utilization).")
    reserve_gb: Annotated[float, Flag("--reserve-gb")] = Field(
        default=2.0, description="GiB per GPU kept for activations, CUDA graphs and buffers.")
    mem_efficiency: float = 0.8
    compute_efficiency: float = 0.6
    overhead_ms: float = 0.3

    @model_validator(mode="before")
    @classmethod
    def _fold_shorthand(cls, data: Any) -> Any:
        if isinstance(data, dict) and ("gpu" in data or "efficiency" in data):
            data = {**data}
            data.update(_numbers("--gpu", data.pop("gpu", None), GPU_KEYS))
            data.update(_numbers("--efficiency", data.pop("efficiency", None), EFFICIENCY_KEYS))
        return data

    @model_validator(mode="after")
    def _usable(self) -> Prediction:
        for flag, value in (("--mem-fraction", self.mem_fraction), ("--mem-efficiency", self.mem_efficiency),
                            ("--compute-efficiency", self.compute_efficiency)):
            if not 0.0 < value <= 1.0:
                raise InputError(f"{flag} {value}: give a fraction in (0, 1]")
        if self.tp < 1 or (self.draft_tp is not None and self.draft_tp < 1):
            raise InputError("--tp and --draft-tp: give a number of GPUs, 1 or more")
        if self.input_len < 0 or self.output_len < 1:
            raise InputError("--input-len and --output-len: tokens per sequence (input >= 0, output >= 1)")
        if self.reserve_gb < 0 or self.overhead_ms < 0:
            raise InputError("--reserve-gb and --overhead-ms: give 0 or more")
        return self
