"""Closed loop: N workers, each starting its next conversation the moment its previous one ends."""

from __future__ import annotations

from collections.abc import Sequence

from specmeter.config.models import REQUESTS_PER_SLOT_FLOOR, ConcurrencyPoint, LoadSpec
from specmeter.data.model import Conversation
from specmeter.load.kinds.base import LoadKind
from specmeter.load.stops import DurationFloor, PointProgress, StopCondition
from specmeter.load.strategies import Planned, Strategy, cycled, gather
from specmeter.load.traffic import Traffic
from specmeter.metrics.steady import closed_loop_window
from specmeter.schemas.records import RequestRecord


class ClosedLoop(Strategy):
    """N workers; each starts its next conversation the moment its previous one ends. With duration_s,
    the workload is cycled until that long has passed and the point has its request floor."""

    def __init__(self, point: ConcurrencyPoint, load: LoadSpec) -> None:
        self.point, self.load = point, load
        self.concurrency = point.concurrency
        self.duration_s = load.duration_s

    @property
    def slots(self) -> int:
        return self.concurrency

    def share(self, slots: int | None) -> ClosedLoop:
        assert slots is not None and slots >= 1
        return ClosedLoop(self.point.model_copy(update={"concurrency": slots}), self.load)

    def stops(self) -> list[StopCondition[PointProgress]]:
        if self.duration_s is None:
            return []
        return [DurationFloor(self.duration_s, REQUESTS_PER_SLOT_FLOOR * self.concurrency)]

    def plan(self, conversations: Sequence[Conversation], seed: str) -> Planned:
        source = cycled(conversations) if self.duration_s is not None else iter(conversations)
        return ((c, None) for c in source)

    async def drive(self, traffic: Traffic, planned: Planned) -> None:
        queue = iter(planned)

        async def worker() -> None:
            for conv, _ in queue:
                await traffic.conversation(conv)
                if traffic.stopped is not None:  # the duration floor: this worker starts no more
                    return

        await gather([worker() for _ in range(self.concurrency)])


class ClosedLoopKind(LoadKind[ConcurrencyPoint]):
    """Concurrency points. Under a fixed number of requests in flight, what speculation changes is how much
    the server delivers: verdicts read output throughput."""

    name = "concurrency"
    point_model = ConcurrencyPoint
    axis = "concurrency"
    headline_metric = "output_throughput"
    steady_basis = "all slots busy"

    def strategy(self, load: LoadSpec) -> ClosedLoop:
        return ClosedLoop(self.point, load)

    def conversations_wanted(self, load: LoadSpec) -> int:
        return 0  # with duration_s the strategy cycles on for the time

    def steady_window(self, measured: Sequence[RequestRecord]) -> tuple[float, float] | None:
        spans = [(r.start_s, end) for r in measured if (end := r.end_s) is not None]
        slots = min(self.point.concurrency, len({r.conversation_id for r in measured}))
        return closed_loop_window(spans, slots) if slots else None

    def axis_value(self) -> int:
        return self.point.concurrency

    def batch_stand_in(self) -> tuple[float, str]:
        return float(self.point.concurrency), f"its client concurrency ({self.point.concurrency}) stands in for it"
