"""Servers that did not run wholly on their GPU: a model partly on the CPU measures the split, not the GPU, and a
speedup against a baseline placed differently compares placements as much as speculation."""

from __future__ import annotations

from specmeter.schemas.offload import GpuOffload, LayerOffload
from specmeter.schemas.results import RunSummary


def _layers(offload: LayerOffload) -> str:
    return f"{offload.offloaded}/{offload.layers}"


def _own(config_id: str, offload: GpuOffload) -> list[str]:
    out = []
    for role, found in (("target", offload.target), ("draft model", offload.draft)):
        if found is not None and not found.full:
            out.append(f"{config_id}: its server placed {_layers(found)} layers of the {role} on the GPU; the rest "
                       "ran on the CPU, so its speed is not the GPU's (another server held GPU memory, or the engine "
                       "args limit -ngl / --spec-draft-ngl)")
    if offload.target is None:
        out.append(f"{config_id}: its server's log does not say how many layers it placed on the GPU (llama-server "
                   "logs it at -lv 4, which specmeter passes unless the engine args set the verbosity)")
    return out


def offload_warnings(summary: RunSummary) -> list[str]:
    """One line per server with a GPU that kept layers on the CPU, or whose log does not say; and per configuration
    whose target was placed otherwise than its baseline's. On no GPU nothing is flagged: nothing was offloaded."""
    out: list[str] = []
    for result in summary.configs:
        if result.gpu_offload is not None and result.gpu_offload.devices:
            out += _own(result.config_id, result.gpu_offload)
    for config in summary.plan.configs:
        base = summary.plan.baseline_for(config)
        mine = summary.config(config.id)
        theirs = summary.config(base.id) if base is not None else None
        if base is None or mine is None or theirs is None:
            continue
        a, b = (r.gpu_offload.target if r.gpu_offload is not None else None for r in (mine, theirs))
        if a is not None and b is not None and a.offloaded != b.offloaded:
            out.append(f"{config.id}: its server placed {_layers(a)} target layers on the GPU, its baseline "
                       f"{base.id}'s {_layers(b)}: its speedup compares two placements, not only speculation")
    return out
