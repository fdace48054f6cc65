"""How a load point is split over client processes: how many, each one's share of the slots, and which
planned conversations each sends (load/workers.py runs them)."""

from __future__ import annotations

import math
import os

from specmeter.config.models import LoadPoint, LoadSpec

# Automatic client processes (LoadSpec.client_processes unset): a point with at least this many slots is
# split, one process per STREAMS_PER_PROCESS slots, up to the usable cores. One Python process keeps a few
# hundred streams' timestamps honest; at 768 or 1024 paced streams its event loop falls behind (measured
# with benchmarks/client_overhead.py: on 2 cores, 2 processes halve the TTFT error at 768 streams).
AUTO_PROCESSES_FROM = 512
STREAMS_PER_PROCESS = 256


def split_slots(slots: int | None, processes: int) -> list[int | None]:
    """Each client process's share of a point's slots: as even as can be (None: no limit, for each)."""
    if slots is None:
        return [None] * processes
    assert 1 <= processes <= slots
    return [slots // processes + (i < slots % processes) for i in range(processes)]


def owner(index: int, slots: int | None, processes: int) -> int:
    """Which client process sends the `index`-th planned conversation: slot s of the point belongs to process
    s % processes (so process i holds split_slots' i-th share), and conversations go round the slots, so each
    process gets conversations in proportion to its slots and the first `slots` of them start at once."""
    return (index % (slots or processes)) % processes


def client_processes(point: LoadPoint, load: LoadSpec, warmup: bool = False) -> int:
    """How many client processes send this point: `load.client_processes`, or automatically one per
    STREAMS_PER_PROCESS slots from AUTO_PROCESSES_FROM slots on, up to the usable cores; never more than
    the point's slots, and 1 for warm-up (a few requests, excluded from results)."""
    slots = point.slots
    if warmup:
        return 1
    wanted = load.client_processes
    if wanted is None:
        if slots is None or slots < AUTO_PROCESSES_FROM:
            return 1
        wanted = min(usable_cores(), math.ceil(slots / STREAMS_PER_PROCESS))
    return max(1, min(wanted, slots or wanted))


def usable_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1
