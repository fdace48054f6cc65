"""A plan's launched servers placed: what each needs (from its configuration), and each configuration's engine
with its placement written in: CUDA_VISIBLE_DEVICES (with CUDA_DEVICE_ORDER=PCI_BUS_ID, so ids are nvidia-smi's)
and the memory fraction, which every engine's launcher renders as its own flag."""

from __future__ import annotations

from collections.abc import Sequence

from specmeter.common.errors import InputError
from specmeter.config.models import EngineSpec
from specmeter.engines.registry import get_engine
from specmeter.placement.place import ServerNeed, place
from specmeter.placement.weights import weights_bytes
from specmeter.schemas.placement import Gpu, Placement
from specmeter.schemas.plan import PlannedConfig

PLACED_ENV = ("CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER")


def check_engine(engine: EngineSpec, where: str) -> None:
    """Refuse what placement sets given another way, where it could not see it."""
    if engine.kind is None:
        return
    for arg in engine.extra_args:
        flag = arg.split("=", 1)[0]
        if flag in get_engine(engine.kind).launcher.placement_flags:
            raise InputError(f"{where}: extra_args sets {flag}, which placement sets; give engine.tensor_parallel_size "
                             "or engine.memory_fraction instead")
    for key in PLACED_ENV:
        if key in engine.env:
            raise InputError(f"{where}: env sets {key}, which placement sets per server; give the GPUs with --gpus "
                             "or the sweep file's gpus instead")


def server_needs(configs: Sequence[PlannedConfig]) -> list[ServerNeed]:
    """One need per launched server (configurations sharing a server count once; attached ones run elsewhere)."""
    needs: dict[str, ServerNeed] = {}
    for c in configs:
        if not c.engine.launch or c.server in needs:
            continue
        target, draft = weights_bytes(c.engine.model), weights_bytes(c.spec.draft_model)
        known = target is not None and (draft is not None or not c.spec.draft_model)
        needs[c.server] = ServerNeed(
            server=c.server,
            # vLLM runs the draft on the target's GPUs: the server spans the wider of the two.
            tensor_parallel_size=max(c.engine.tensor_parallel_size or 1, c.spec.draft_tensor_parallel_size or 1),
            weights_bytes=(target or 0) + (draft or 0) if known else None,
            memory_fraction=c.engine.memory_fraction)
    return list(needs.values())


def place_configs(configs: Sequence[PlannedConfig], gpus: Sequence[Gpu], source: str, *,
                  interleave: bool) -> Placement:
    """The placement of the configurations' launched servers on `gpus` (none: a CPU run, nothing placed)."""
    if gpus:
        for c in configs:
            if c.engine.launch:
                check_engine(c.engine, f"configuration {c.id}")
    return place(server_needs(configs), gpus, interleave=interleave, source=source)


def placed(configs: Sequence[PlannedConfig], placement: Placement) -> list[PlannedConfig]:
    """The configurations with each launched server's GPUs and, where its engine takes one, memory fraction in
    its engine."""
    out: list[PlannedConfig] = []
    for c in configs:
        where = placement.server(c.server)
        if where is None:
            out.append(c)
            continue
        env = {**c.engine.env, "CUDA_VISIBLE_DEVICES": ",".join(where.gpus), "CUDA_DEVICE_ORDER": "PCI_BUS_ID"}
        update: dict[str, object] = {"env": env}
        if c.engine.kind is None or get_engine(c.engine.kind).launcher.memory_fraction:
            update["memory_fraction"] = where.memory_fraction
        engine = c.engine.model_copy(update=update)
        out.append(c.model_copy(update={"engine": engine}))
    return out
