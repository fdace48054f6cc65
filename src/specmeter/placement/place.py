"""The placement rule, pure: which GPUs each launched server gets and what share of their memory.

Interleaved servers are all up together, so they either run apart or share with equal memory:
- disjoint: every server on GPUs of its own (a tensor-parallel server on an aligned block: TP 2 on 0-1 or 2-3),
  each with the engine's default memory share;
- shared: when there are too few GPUs, servers share them, at most `s` per GPU, and every server gets the same
  memory fraction, 0.9 / s rounded down to 0.01 (0.9 is vLLM's default for a GPU of its own), so that every
  server has the same memory for its KV cache by construction;
- sequential: when sharing leaves a server too little memory (its weights, read from disk, take more than half its
  share: little would be left for the KV cache), one server at a time (interleave off), with a warning that names
  what interleaving would need.
Without interleave every server runs alone, on the first GPUs it needs. Never more GPUs than given: a server that
needs more is refused. A memory fraction the user gave is kept when the servers on a GPU fit in 0.9 together,
and refused otherwise.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from specmeter.common.errors import InputError
from specmeter.schemas.placement import Gpu, Mode, Placement, ServerPlacement

GPU_SHARE = 0.9  # what the servers on one GPU may take together (vLLM's default for one server alone)
KV_ROOM = 0.5  # sharing works where a server's weights take at most this part of its share (the rest: KV cache)
GIB = 1 << 30


@dataclass(frozen=True)
class ServerNeed:
    """What one launched server needs: its GPUs (tensor parallel), its weights, the memory share asked for."""

    server: str
    tensor_parallel_size: int = 1
    weights_bytes: int | None = None  # target and draft together (None: not known)
    memory_fraction: float | None = None  # the user's (None: placement decides)


def place(needs: Sequence[ServerNeed], gpus: Sequence[Gpu], *, interleave: bool, source: str) -> Placement:
    """Where each server runs (module docstring: the rule)."""
    if not gpus:
        return Placement(mode="cpu", source=source)
    ids = [g.id for g in gpus]
    for need in needs:
        if need.tensor_parallel_size > len(gpus):
            raise InputError(f"server {need.server} needs {need.tensor_parallel_size} GPUs (tensor parallel) but "
                             f"{len(gpus)} are given ({', '.join(ids)}); lower tensor_parallel_size or give more "
                             "GPUs (--gpus)")
    asked = _asked_fraction(needs)
    if not interleave:
        return _sequential(needs, gpus, source, asked, warning=None)
    blocks, per_gpu = _pack(needs, len(gpus))
    if per_gpu == 1:
        return _placement("disjoint", needs, gpus, blocks, asked, source)
    share = math.floor(GPU_SHARE / per_gpu * 100) / 100
    if asked is not None and asked * per_gpu > GPU_SHARE + 1e-9:
        raise InputError(f"memory_fraction {asked} for {per_gpu} servers per GPU asks {asked * per_gpu:.2f} of each "
                         f"GPU; give at most {share} (or leave it out: placement gives {share}), more GPUs, or "
                         "interleave: false")
    fraction = asked if asked is not None else share
    placement = _placement("shared", needs, gpus, blocks, fraction, source, per_gpu=per_gpu)
    cramped = [s for s in placement.servers if _too_little(s, gpus)]
    if not cramped:
        return placement
    worst = cramped[0]
    assert worst.weights_gib is not None
    need_gpus = sum(n.tensor_parallel_size for n in needs)
    warning = (f"interleaving {len(needs)} servers{_tp_text(needs)} needs {need_gpus} GPUs to run them apart "
               f"({len(gpus)} given), or {per_gpu} servers per GPU at memory fraction {fraction} each, where "
               f"{worst.server}'s weights ({worst.weights_gib:.1f} GiB per GPU) leave too little for its KV cache; "
               "running one server at a time (interleave off)")
    return _sequential(needs, gpus, source, asked, warning=warning)


def _asked_fraction(needs: Sequence[ServerNeed]) -> float | None:
    asked = {n.memory_fraction for n in needs if n.memory_fraction is not None}
    if len(asked) > 1:
        raise InputError(f"servers ask different memory fractions ({', '.join(map(str, sorted(asked)))}): their KV "
                         "capacity would differ; give one memory_fraction for all, or leave it out")
    return next(iter(asked), None)


def _pack(needs: Sequence[ServerNeed], count: int) -> tuple[list[list[int]], int]:
    """Per server (in order) the positions of its GPUs, and the most servers on one GPU. The widest servers go
    first, each onto the aligned block of its width whose GPUs carry the fewest servers (the lowest block on a tie),
    so servers run apart wherever their widths fit and share evenly where they do not."""
    load = [0] * count
    chosen: dict[str, list[int]] = {}
    for need in sorted(needs, key=lambda n: -n.tensor_parallel_size):
        width = need.tensor_parallel_size
        blocks = [list(range(start, start + width)) for start in range(0, count - width + 1, width)]
        best = min(blocks, key=lambda b: (max(load[i] for i in b), sum(load[i] for i in b)))
        for i in best:
            load[i] += 1
        chosen[need.server] = best
    return [chosen[n.server] for n in needs], max(load, default=1)


def _placement(mode: Mode, needs: Sequence[ServerNeed], gpus: Sequence[Gpu], blocks: Sequence[Sequence[int]],
               fraction: float | None, source: str, *, per_gpu: int = 1, warning: str | None = None) -> Placement:
    servers = [ServerPlacement(server=n.server, gpus=[gpus[i].id for i in block],
                               tensor_parallel_size=n.tensor_parallel_size, memory_fraction=fraction,
                               weights_gib=None if n.weights_bytes is None
                               else n.weights_bytes / n.tensor_parallel_size / GIB)
               for n, block in zip(needs, blocks)]
    return Placement(mode=mode, source=source, gpus=list(gpus), servers=servers, servers_per_gpu=per_gpu,
                     warning=warning)


def _sequential(needs: Sequence[ServerNeed], gpus: Sequence[Gpu], source: str, asked: float | None,
                warning: str | None) -> Placement:
    """One server at a time, each alone on the first GPUs it needs."""
    blocks = [list(range(n.tensor_parallel_size)) for n in needs]
    return _placement("sequential", needs, gpus, blocks, asked, source, warning=warning)


def _too_little(server: ServerPlacement, gpus: Sequence[Gpu]) -> bool:
    """Whether the server's weights take more than KV_ROOM of its share of its smallest GPU (unknown: fits)."""
    memory = [g.memory_mib for g in gpus if g.id in server.gpus]
    if server.weights_gib is None or server.memory_fraction is None or not memory or None in memory:
        return False
    smallest_gib = min(m for m in memory if m is not None) / 1024
    return server.weights_gib > KV_ROOM * server.memory_fraction * smallest_gib


def _tp_text(needs: Sequence[ServerNeed]) -> str:
    sizes = sorted({n.tensor_parallel_size for n in needs})
    return f" at TP {'/'.join(map(str, sizes))}"
