"""Where the servers ran: each launched server's GPUs, tensor parallel and memory share, as `sweep --dry-run`
prints it before anything starts and the report shows it after, and the notes that say how it was decided."""

from __future__ import annotations

from collections.abc import Sequence

from specmeter.engines.registry import get_engine
from specmeter.report.grid import Grid, Note, grid
from specmeter.schemas.placement import Gpu, Placement
from specmeter.schemas.plan import PlannedConfig

MODES = {
    "disjoint": "every server on GPUs of its own, all up together",
    "shared": "servers share GPUs, all up together, each with the same memory fraction",
    "sequential": "one server at a time, each alone on its GPUs",
}


def gpu_text(gpu: Gpu) -> str:
    memory = "" if gpu.memory_mib is None else f", {gpu.memory_mib / 1024:.0f} GiB"
    return f"{gpu.id} ({gpu.name or 'name unknown'}{memory})"


def placement_heading(placement: Placement) -> str:
    if placement.mode == "cpu":
        return "CPU: no GPU found (nvidia-smi, CUDA_VISIBLE_DEVICES); servers run as configured, nothing is placed"
    gpus = "; ".join(gpu_text(g) for g in placement.gpus)
    return f"GPUs from {placement.source}: {gpus}"


def placement_table(configs: Sequence[PlannedConfig], placement: Placement) -> Grid | None:
    """One row per server (launched or attached); None on a CPU run, where nothing was placed."""
    if placement.mode == "cpu":
        return None
    per_gpu = f", up to {placement.servers_per_gpu} per GPU" if placement.servers_per_gpu > 1 else ""
    t = grid(f"Placement: {MODES[placement.mode]}{per_gpu}",
             ("server", "speculation", "GPUs", "TP", "memory fraction", "weights per GPU"),
             left={"server", "speculation", "GPUs"})
    seen: set[str] = set()
    for c in configs:
        if c.server in seen:
            continue
        seen.add(c.server)
        where = placement.server(c.server)
        if where is None:
            t.add_row(c.server, c.label, f"attached: {c.engine.endpoint}", "-", "-", "-")
            continue
        fraction = "engine default" if where.memory_fraction is None else f"{where.memory_fraction:.2f}"
        weights = "unknown" if where.weights_gib is None else f"{where.weights_gib:.2f} GiB"
        t.add_row(c.server, c.label, ",".join(where.gpus), str(where.tensor_parallel_size), fraction, weights)
    return t


def placement_notes(placement: Placement, engine_kind: str | None) -> list[Note]:
    """How the placement was decided, and what it leaves to the engine."""
    out = [Note(placement_heading(placement))]
    if placement.warning:
        out.append(Note(placement.warning, warn=True))
    engine_note = get_engine(engine_kind).launcher.shared_gpu_note if engine_kind is not None else None
    if placement.mode == "shared" and engine_note is not None:
        out.append(Note(engine_note.text, warn=engine_note.warn))
    return out
