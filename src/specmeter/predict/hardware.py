"""GPU presets for the roofline estimate: memory bandwidth, dense tensor throughput and memory size per GPU.

Figures are the vendors' datasheets, per GPU, dense (2:4 structured sparsity doubles the headline numbers;
a decode step never runs sparse). FLOP/s and bytes/s are decimal (T = 1e12); memory is the datasheet's "GB",
which for these parts is binary (an H100 80GB holds 80 GiB of HBM3): 1 GB here = 2^30 bytes.

- H100 SXM5 80GB (NVIDIA H100 Tensor Core GPU datasheet): 3.35 TB/s HBM3, BF16 989 TFLOPS, FP8 1,979 TFLOPS
  (1,979 and 3,958 with sparsity), 80 GB.
- H200 SXM 141GB (NVIDIA H200 datasheet): 4.8 TB/s HBM3e, BF16 989, FP8 1,979 (the H100's compute), 141 GB.
- B200, HGX B200 (NVIDIA HGX B200 datasheet, per GPU at 1,000 W): 8 TB/s HBM3e, BF16 2,250, FP8 4,500
  (4,500 and 9,000 with sparsity), 180 GB.
- A100 SXM4 80GB (NVIDIA A100 datasheet): 2,039 GB/s HBM2e, BF16 312 (624 with sparsity), 80 GB. Ampere has
  no FP8 tensor cores.
- L40S (NVIDIA L40S datasheet): 864 GB/s GDDR6, BF16 362 (733 with sparsity), FP8 733 (1,466 with sparsity),
  48 GB.
- MI300X (AMD Instinct MI300X datasheet): 5.3 TB/s HBM3, BF16 1,307.4, FP8 2,614.9 (each doubled with
  sparsity), 192 GB.
"""

from __future__ import annotations

import re

from specmeter.common.errors import InputError
from specmeter.schemas.estimate import Dtype, Hardware

T = 1e12
GB = 2.0**30


def _gpu(name: str, bandwidth_tbs: float, bf16_tflops: float | None, fp8_tflops: float | None, memory_gb: float,
         source: str) -> Hardware:
    return Hardware(name=name, memory_bandwidth=bandwidth_tbs * T,
                    bf16_flops=None if bf16_tflops is None else bf16_tflops * T,
                    fp8_flops=None if fp8_tflops is None else fp8_tflops * T, memory_bytes=memory_gb * GB,
                    source=source)


PRESETS: dict[str, Hardware] = {
    "h100-sxm": _gpu("H100 SXM 80GB", 3.35, 989.0, 1979.0, 80, "NVIDIA H100 datasheet (SXM5), dense"),
    "h200": _gpu("H200 SXM 141GB", 4.8, 989.0, 1979.0, 141, "NVIDIA H200 datasheet (SXM), dense"),
    "b200": _gpu("B200 (HGX) 180GB", 8.0, 2250.0, 4500.0, 180, "NVIDIA HGX B200 datasheet, per GPU, dense"),
    "a100-80gb": _gpu("A100 SXM 80GB", 2.039, 312.0, None, 80, "NVIDIA A100 datasheet (SXM4 80GB), dense"),
    "l40s": _gpu("L40S 48GB", 0.864, 362.0, 733.0, 48, "NVIDIA L40S datasheet, dense"),
    "mi300x": _gpu("MI300X 192GB", 5.3, 1307.4, 2614.9, 192, "AMD Instinct MI300X datasheet, dense"),
}

ALIASES: dict[str, str] = {
    "h100": "h100-sxm", "h100-sxm5": "h100-sxm", "h100-80gb": "h100-sxm",
    "h200-sxm": "h200", "h200-141gb": "h200",
    "b200-hgx": "b200", "hgx-b200": "b200",
    "a100": "a100-80gb", "a100-sxm": "a100-80gb", "a100-sxm4": "a100-80gb", "a100-sxm-80gb": "a100-80gb",
    "l40s-48gb": "l40s",
    "mi300": "mi300x", "mi300x-192gb": "mi300x",
}


def _key(name: str) -> str:
    return re.sub(r"[\s_]+", "-", name.strip().lower())


def preset(name: str) -> Hardware:
    """A preset by name or alias (case, spaces and underscores do not matter: "H100 SXM" is h100-sxm)."""
    key = _key(name)
    key = ALIASES.get(key, key)
    if key not in PRESETS:
        raise InputError(f"--hardware {name!r}: no such preset; choose one of {', '.join(PRESETS)} (or describe "
                         "the GPU: --gpu bandwidth=TB/s,tflops=TFLOP/s,memory=GB)")
    return PRESETS[key]


def custom(name: str | None, base: Hardware | None, *, bandwidth_tbs: float | None, tflops: float | None,
           memory_gb: float | None, dtype: Dtype) -> Hardware:
    """A GPU from `--gpu bandwidth=..,tflops=..,memory=..`: a preset with some numbers replaced, or (no preset)
    one described by all three. `tflops` is the dense throughput at `dtype`."""
    given = {"bandwidth": bandwidth_tbs, "tflops": tflops, "memory": memory_gb}
    for key, value in given.items():
        if value is not None and value <= 0:
            raise InputError(f"--gpu {key}={value:g}: give a positive number")
    if base is None:
        missing = [key for key, value in given.items() if value is None]
        if missing:
            raise InputError(f"--gpu: a GPU of your own needs bandwidth (TB/s), tflops (dense, at --dtype) and "
                             f"memory (GB); missing {', '.join(missing)} (or name a preset: {', '.join(PRESETS)})")
        assert bandwidth_tbs is not None and tflops is not None and memory_gb is not None
        fp8 = tflops if dtype == "fp8" else None
        return _gpu(name or "custom GPU", bandwidth_tbs, None if fp8 else tflops, fp8, memory_gb,
                    f"--gpu bandwidth={bandwidth_tbs:g},tflops={tflops:g} (dense {dtype}),memory={memory_gb:g}")
    if all(value is None for value in given.values()):
        return base
    update: dict[str, object] = {"source": base.source + ", with --gpu " + ",".join(
        f"{key}={value:g}" for key, value in given.items() if value is not None)}
    if bandwidth_tbs is not None:
        update["memory_bandwidth"] = bandwidth_tbs * T
    if memory_gb is not None:
        update["memory_bytes"] = memory_gb * GB
    if tflops is not None:
        update["fp8_flops" if dtype == "fp8" else "bf16_flops"] = tflops * T
    return base.model_copy(update=update)


def peak_flops(hw: Hardware, dtype: Dtype) -> float:
    """Dense tensor FLOP/s at `dtype` (FP16 runs at the BF16 rate on every preset); FP8 where the GPU has none is
    refused."""
    if dtype != "fp8":
        if hw.bf16_flops is None:
            raise InputError(f"{hw.name}: no {dtype} throughput given; give --gpu tflops=.. with --dtype {dtype}")
        return hw.bf16_flops
    if hw.fp8_flops is None:
        if hw.bf16_flops is not None and hw.source.startswith("--gpu"):
            raise InputError(f"{hw.name}: no FP8 throughput given; give --gpu tflops=.. with --dtype fp8")
        raise InputError(f"{hw.name} has no FP8 tensor cores (Ampere and older): use --dtype bf16 there")
    return hw.fp8_flops


def dtype_bytes(dtype: Dtype) -> int:
    return 1 if dtype == "fp8" else 2
