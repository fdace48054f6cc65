"""Open loop: conversations start on seeded arrival times at a request rate, whatever the server's speed."""

from __future__ import annotations

import asyncio
import math
from collections.abc import Sequence

from specmeter.config.models import LoadSpec, RatePoint
from specmeter.data.model import Conversation
from specmeter.load.arrivals import arrival_times
from specmeter.load.kinds.base import LoadKind
from specmeter.load.strategies import Planned, Strategy, send_on_schedule
from specmeter.load.traffic import Traffic
from specmeter.metrics.steady import open_loop_window
from specmeter.schemas.records import RequestRecord


class OpenLoop(Strategy):
    """Conversations start on seeded arrival times (the same for every configuration), whatever the
    server's speed; an optional cap bounds how many are in flight (the wait is recorded as queued_s)."""

    def __init__(self, point: RatePoint, load: LoadSpec) -> None:
        self.point, self.load = point, load

    @property
    def slots(self) -> int | None:
        return self.point.max_concurrency

    def share(self, slots: int | None) -> OpenLoop:
        return OpenLoop(self.point.model_copy(update={"max_concurrency": slots}), self.load)

    def plan(self, conversations: Sequence[Conversation], seed: str) -> Planned:
        p = self.point
        return zip(conversations, arrival_times(p.arrival, p.rate, len(conversations), seed, p.burstiness))

    async def drive(self, traffic: Traffic, planned: Planned) -> None:
        slot = asyncio.Semaphore(self.point.max_concurrency) if self.point.max_concurrency else None
        await send_on_schedule(traffic, planned, slot)


class OpenLoopKind(LoadKind[RatePoint]):
    """Request-rate points. While the server keeps up, both sides of a comparison deliver the offered rate, so
    throughput cannot tell them apart: verdicts read TPOT."""

    name = "rate"
    point_model = RatePoint
    axis = "rate"
    headline_metric = "tpot"
    steady_basis = "arrivals running"

    def strategy(self, load: LoadSpec) -> OpenLoop:
        return OpenLoop(self.point, load)

    def conversations_wanted(self, load: LoadSpec) -> int:
        """With duration_s: `rate x duration` conversations (the arrivals span about that long)."""
        return math.ceil(self.point.rate * load.duration_s) if load.duration_s is not None else 0

    def steady_window(self, measured: Sequence[RequestRecord]) -> tuple[float, float] | None:
        return open_loop_window([r.scheduled_s for r in measured if r.scheduled_s is not None])

    def axis_value(self) -> float:
        return self.point.rate

    def batch_stand_in(self) -> tuple[None, str]:
        return None, "a request rate does not give it, so this point is left out of the table"
