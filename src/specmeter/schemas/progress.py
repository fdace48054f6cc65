"""The progress events a run emits as it goes, to whoever draws them: the runner calls them, the report layer
draws them, and neither imports the other."""

from __future__ import annotations

from specmeter.config.models import LoadPoint
from specmeter.schemas.plan import Plan, PlannedConfig
from specmeter.schemas.records import RequestRecord
from specmeter.schemas.results import PointResult


class Reporter:
    """Progress sink. This base is silent (tests, --json); the CLI's RichReporter (report/progress.py) draws bars."""

    def plan_start(self, plan: Plan, total_requests: int | None) -> None: ...
    def plan_grown(self, plan: Plan, remaining_requests: int | None) -> None: ...  # a load search added points
    def server_starting(self, server: str, line: str) -> None: ...  # a long start: what it is doing, live
    def server_started(self, server: str) -> None: ...  # its start ended, serving or not
    def server_ready(self, server: str, seconds: float) -> None: ...
    def point_start(self, config: PlannedConfig, point: LoadPoint, repeat: int, total: int | None) -> None: ...
    def request_done(self, record: RequestRecord) -> None: ...
    def point_done(self, config: PlannedConfig, result: PointResult) -> None: ...
    def note(self, message: str) -> None: ...
