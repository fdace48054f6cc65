"""One load point: the conversations it sends, and sending them, in this process or split over client
processes (load/workers.py), whichever its size asks for (load/split.py)."""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence

from specmeter.config.models import REQUESTS_PER_SLOT_FLOOR, LoadPoint, LoadSpec
from specmeter.data.model import Conversation
from specmeter.data.phases import phase_runs
from specmeter.load.kinds import kind_of
from specmeter.load.replicas import Replicas
from specmeter.load.split import client_processes
from specmeter.load.stops import ErrorRateLimit, PointProgress, StopCondition
from specmeter.load.strategies import cycled, planned_todo
from specmeter.load.traffic import OnRecord, PointKey, PointTraffic, Traffic
from specmeter.load.turns import Seat, takes_turns
from specmeter.load.workers import run_point_in_processes


def count_requests(conversations: Sequence[Conversation]) -> int:
    return sum(len(c.turns) for c in conversations)


def point_conversations(conversations: Sequence[Conversation], point: LoadPoint,
                        load: LoadSpec) -> list[Conversation]:
    """The conversations one point sends: the workload, cycled until the point has at least
    REQUESTS_PER_SLOT_FLOOR x N requests (N: its slots) and as many conversations as its kind wants (with
    duration_s, `rate x duration` at a rate point). Repeated passes get ids `<id>#<pass>`. Deterministic, so
    every configuration gets exactly this list, and resume finds the same ids. A phase-shift workload is cycled in
    whole passes within each phase (every phase repeated as often), so its phases stay in order."""
    floor = REQUESTS_PER_SLOT_FLOOR * (point.slots or 0)
    want_convs = kind_of(point).conversations_wanted(load)
    if any(c.phase is not None for c in conversations):
        passes = max(1, math.ceil(floor / max(1, count_requests(conversations))))
        return [conv for run in phase_runs(conversations) for conv in itertools.islice(cycled(run), passes * len(run))]
    out: list[Conversation] = []
    requests = 0
    for n, conv in enumerate(cycled(conversations)):
        if n >= len(conversations) and requests >= floor and len(out) >= want_convs:
            break
        out.append(conv)
        requests += len(conv.turns)
    return out


async def run_point(
    client: Replicas,
    point: LoadPoint,
    conversations: Sequence[Conversation],
    load: LoadSpec,
    model: str,
    key: PointKey,
    on_record: OnRecord,
    warmup: bool = False,
    skip: set[str] | None = None,
    stops: Sequence[StopCondition[PointProgress]] = (),
    seat: Seat | None = None,
) -> PointTraffic:
    """Offer `conversations` at `point`. `skip` holds ids already fully measured (resume): the others
    keep the send times they were planned with, so a resumed point offers the same schedule. `stops`: the
    caller's stop conditions (a dead server), checked before the error-rate limit on every finished request.
    With more than one client process (`client_processes`), load/workers.py sends them and `on_record` still
    gets every finished request here, as it finishes. `seat`: the point takes turns with other servers' points
    (load/turns.py; a closed loop, one process); it leaves the turns when this returns, however it ends."""
    point_stops = [*stops, ErrorRateLimit(load.max_error_rate)]
    processes = client_processes(point, load, warmup)
    try:
        if seat is not None and (processes > 1 or not takes_turns(point)):
            raise ValueError(f"point {point.id}: only a closed-loop point sent from one process takes turns with "
                             "other servers")
        if processes > 1:
            return await run_point_in_processes(processes, client, point, conversations, load, model, key,
                                                on_record, warmup=warmup, skip=skip, stops=point_stops)
        strategy = kind_of(point).strategy(load)
        todo = planned_todo(strategy, point, conversations, load, skip)
        traffic = Traffic(client, load, model, key, on_record, warmup, [*point_stops, *strategy.stops()],
                          seat=seat)
        try:
            await strategy.drive(traffic, todo)
        finally:
            traffic.result.wall_s = traffic.elapsed()
        return traffic.result
    finally:
        if seat is not None:
            await seat.leave()
