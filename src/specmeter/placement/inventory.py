"""The GPUs a run may use: `--gpus` (or the sweep file's `gpus`), else CUDA_VISIBLE_DEVICES, else every GPU
nvidia-smi lists; none found is a CPU run, where placement changes nothing.

Ids are nvidia-smi's indices (PCI bus order), or UUIDs / MIG ids as given; each server then gets its own
CUDA_VISIBLE_DEVICES with CUDA_DEVICE_ORDER=PCI_BUS_ID, so an index means the same GPU to nvidia-smi and to CUDA.
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable, Mapping, Sequence

from specmeter.common.errors import InputError
from specmeter.schemas.placement import Gpu

SMI_QUERY = ("nvidia-smi", "--query-gpu=index,name,memory.total", "--format=csv,noheader,nounits")


def parse_nvidia_smi(text: str) -> list[Gpu]:
    """GPUs from `nvidia-smi --query-gpu=index,name,memory.total --format=csv,noheader,nounits` lines such as
    `0, NVIDIA H100 80GB HBM3, 81559` (memory in MiB; `[N/A]` where a MIG or vGPU setup hides it)."""
    gpus: list[Gpu] = []
    for line in text.splitlines():
        if not line.strip():
            continue
        parts = [part.strip() for part in line.split(",")]
        index, middle, memory = parts[0], parts[1:-1], parts[-1]
        if not index.isdigit() or not middle:
            raise InputError(f"nvidia-smi printed {line.strip()!r}, not 'index, name, memory'; check the driver with "
                             "`nvidia-smi`, or give the GPUs with --gpus")
        gpus.append(Gpu(id=index, name=", ".join(middle), memory_mib=int(memory) if memory.isdigit() else None))
    return gpus


def parse_gpu_ids(text: str, where: str) -> list[str]:
    """`0,1,3` (or UUIDs) as ids; `where` names the option in the error."""
    ids = [part.strip() for part in text.split(",")]
    if not text.strip() or any(not i for i in ids):
        raise InputError(f"{where} {text!r}: give GPU ids separated by commas, e.g. 0,1")
    dupes = sorted({i for i in ids if ids.count(i) > 1})
    if dupes:
        raise InputError(f"{where}: GPU {dupes[0]} is listed twice; list each GPU once")
    return ids


def visible_devices(value: str) -> list[str]:
    """CUDA_VISIBLE_DEVICES as CUDA reads it: empty or -1 hides every GPU; ids up to the first invalid one."""
    ids: list[str] = []
    for part in (p.strip() for p in value.split(",")):
        if not part or part.startswith("-"):
            break  # CUDA ignores this id and every one after it
        ids.append(part)
    return ids


def run_nvidia_smi() -> str | None:
    """nvidia-smi's GPU list, or None where there is no NVIDIA driver."""
    try:
        done = subprocess.run(SMI_QUERY, capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout if done.returncode == 0 else None


def detect_gpus(requested: Sequence[str] | None, requested_by: str, environ: Mapping[str, str],
                smi: Callable[[], str | None] | None = None) -> tuple[list[Gpu], str]:
    """The GPUs a run may use and where they came from. Names and memory come from nvidia-smi where it runs."""
    text = (smi or run_nvidia_smi)()
    found = parse_nvidia_smi(text) if text else []
    by_id = {g.id: g for g in found}
    if requested is not None:
        ids, source = list(requested), requested_by
    elif "CUDA_VISIBLE_DEVICES" in environ:
        ids, source = visible_devices(environ["CUDA_VISIBLE_DEVICES"]), "CUDA_VISIBLE_DEVICES"
    else:
        return found, "nvidia-smi" if found else "none found"
    unknown = [i for i in ids if i not in by_id and not i.startswith(("GPU-", "MIG-"))]
    if found and unknown:
        raise InputError(f"{source}: GPU {unknown[0]} is not one nvidia-smi lists ({', '.join(by_id)}); give ids "
                         "from that list")
    return [by_id.get(i, Gpu(id=i)) for i in ids], source
