"""Trace replay: a production trace's requests sent on the trace's own arrival times, divided by the point's time
scale, whatever the server's speed.

The conversations are the trace's (data/traces/content.py: one per row, in arrival order, each carrying its
arrival as metadata["arrival_s"]), so every configuration and the baseline are offered the identical schedule and
content, as an open loop's seeded arrivals are; like an open loop's points, a trace's never take turns a wave at a
time. How late each request went out against the trace (its schedule error) is in every record (start_s against
scheduled_s) and summarized per point (metrics/schedule.py).
"""

from __future__ import annotations

from collections.abc import Sequence

from specmeter.common.errors import InputError
from specmeter.config.models import LoadSpec, TracePoint
from specmeter.data.model import Conversation
from specmeter.load.kinds.base import LoadKind
from specmeter.load.strategies import Planned, Strategy, send_on_schedule
from specmeter.load.traffic import Traffic
from specmeter.metrics.steady import open_loop_window
from specmeter.schemas.records import RequestRecord


class TraceReplay(Strategy):
    """Each conversation starts at its trace arrival divided by the scale, on the point's clock."""

    def __init__(self, point: TracePoint, load: LoadSpec) -> None:
        self.point, self.load = point, load

    @property
    def slots(self) -> None:
        return None  # the trace decides how many are in flight, not a cap

    def share(self, slots: int | None) -> TraceReplay:
        return TraceReplay(self.point, self.load)

    def plan(self, conversations: Sequence[Conversation], seed: str) -> Planned:
        """The trace's own schedule: no seed, nothing drawn."""
        times = []
        for conv in conversations:
            arrival = conv.metadata.get("arrival_s")
            if not isinstance(arrival, (int, float)):
                raise InputError(f"trace point {self.point.id}: conversation {conv.id} has no trace arrival; a trace "
                                 "point replays workload.trace's requests")
            times.append(arrival / self.point.scale)
        return zip(conversations, times)

    async def drive(self, traffic: Traffic, planned: Planned) -> None:
        await send_on_schedule(traffic, planned, slot=None)


class TraceKind(LoadKind[TracePoint]):
    """Trace replay points. Like an open loop's, both sides of a comparison are offered the same arrivals, so
    while the server keeps up throughput cannot tell them apart: verdicts read TPOT."""

    name = "trace"
    point_model = TracePoint
    axis = "rate"
    headline_metric = "tpot"
    steady_basis = "arrivals running"

    def strategy(self, load: LoadSpec) -> TraceReplay:
        return TraceReplay(self.point, load)

    def conversations_wanted(self, load: LoadSpec) -> int:
        return 0  # the trace's window is the point: sent once, never cycled

    def steady_window(self, measured: Sequence[RequestRecord]) -> tuple[float, float] | None:
        return open_loop_window([r.scheduled_s for r in measured if r.scheduled_s is not None])

    def axis_value(self) -> float:
        return self.point.scale

    def batch_stand_in(self) -> tuple[None, str]:
        return None, "a trace's arrivals do not give it, so this point is left out of the table"
