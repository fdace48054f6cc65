"""The protocol every load kind implements: one object per kind of load point, bound to one point.

A kind owns everything that differs between kinds of load: its point model (parsed from plans in config/models.py, the
bottom layer), the strategy that sends its points, where its steady window lies, the metric its verdicts read
(how plots label it is the report's: report/load_labels.py). Code above load asks the point's kind (`kind_of`,
this package) instead of switching on the point's type.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import ClassVar, Generic, Literal, TypeVar

from pydantic import BaseModel

from specmeter.config.models import LoadSpec
from specmeter.load.strategies import Strategy
from specmeter.metrics.steady import steady_state
from specmeter.schemas.metrics import SteadyState
from specmeter.schemas.records import RequestRecord

P = TypeVar("P", bound=BaseModel)
Axis = Literal["concurrency", "rate"]  # the load axes results are stored under (schemas: Crossover.axis)
HeadlineMetric = Literal["output_throughput", "tpot"]  # what a verdict may read (schemas: Speedup.decided_on)


class LoadKind(ABC, Generic[P]):
    """One kind of load point (closed loop, open loop, ...), bound to one of its points."""

    name: ClassVar[str]  # the point model's `kind` tag in a plan: the registry's key
    point_model: ClassVar[type[BaseModel]]
    axis: ClassVar[Axis]
    headline_metric: ClassVar[HeadlineMetric]
    steady_basis: ClassVar[str]  # what opens and closes its steady window, in words

    def __init__(self, point: P) -> None:
        self.point = point

    @abstractmethod
    def strategy(self, load: LoadSpec) -> Strategy:
        """What sends the point."""

    @abstractmethod
    def conversations_wanted(self, load: LoadSpec) -> int:
        """Conversations the point needs beyond one pass of the workload and its slots' request floor (0: none)."""

    @abstractmethod
    def steady_window(self, measured: Sequence[RequestRecord]) -> tuple[float, float] | None:
        """(start, end) of the point's steady part, from its measured requests; None when it never got steady."""

    def steady_state(self, records: Sequence[RequestRecord], wall_s: float) -> SteadyState | None:
        """The point's figures over its steady window (warm-up left out); None when the load never got steady."""
        measured = [r for r in records if not r.warmup]
        return steady_state(measured, self.steady_window(measured), self.steady_basis, wall_s)

    @abstractmethod
    def axis_value(self) -> int | float:
        """Its value on its load axis, as a table writes it."""

    @abstractmethod
    def batch_stand_in(self) -> tuple[float | None, str]:
        """What stands in for the engine's running batch at the point when no gauge recorded it (None: nothing
        does), and how a note says so."""
