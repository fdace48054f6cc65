"""Rich progress: one bar for the whole plan (with an ETA), one bar per point, a line per server."""

from __future__ import annotations

from types import TracebackType

from rich.console import Console, RenderableType
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    ProgressColumn,
    Task,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.text import Text

from specmeter.config.models import LoadPoint
from specmeter.schemas.plan import Plan, PlannedConfig
from specmeter.schemas.progress import Reporter
from specmeter.schemas.records import RequestRecord
from specmeter.schemas.results import PointResult


class _Counted(ProgressColumn):
    """A column of requests (counts, errors, eta), left empty on a server's start line, which has none."""

    def __init__(self, inner: ProgressColumn) -> None:
        super().__init__()
        self.inner = inner

    def render(self, task: Task) -> RenderableType:
        return Text("") if task.fields.get("server_start") else self.inner.render(task)


class RichReporter(Reporter):
    def __init__(self, console: Console) -> None:
        self.console = console
        self.progress = Progress(
            TextColumn("{task.description}"), BarColumn(), _Counted(MofNCompleteColumn()),
            _Counted(TextColumn("{task.fields[errors]} errors")), TimeElapsedColumn(), _Counted(TextColumn("eta")),
            _Counted(TimeRemainingColumn()), console=console, transient=False,
        )
        self._plan_task: TaskID | None = None
        # Each point in progress: its bar and errors, by configuration (cells taking turns run at once).
        self._tasks: dict[str, TaskID] = {}
        self._errors: dict[str, int] = {}
        self._starts: dict[str, TaskID] = {}  # each long server start: its live line, by server

    def __enter__(self) -> RichReporter:
        self.progress.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.progress.stop()

    def plan_start(self, plan: Plan, total_requests: int | None) -> None:
        grid = f"{len(plan.configs)} configurations x {len(plan.points)} points"
        pairs = sum(plan.runs(c, p.id) for c in plan.configs for p in plan.points)
        if pairs < len(plan.configs) * len(plan.points):
            grid = f"{pairs} configuration-points ({len(plan.configs)} configurations, {len(plan.points)} points)"
        self._plan_task = self.progress.add_task(
            f"{plan.kind}: {grid}" + (f" x {plan.repeats} repeats" if plan.repeats > 1 else ""),
            total=total_requests, errors=0)

    def plan_grown(self, plan: Plan, remaining_requests: int | None) -> None:
        if self._plan_task is None:
            return
        done = next(t.completed for t in self.progress.tasks if t.id == self._plan_task)
        self.progress.update(self._plan_task, total=None if remaining_requests is None else done + remaining_requests,
                             description=f"{plan.kind}: {len(plan.configs)} configurations x {len(plan.points)} "
                             "points (load search)")

    def server_starting(self, server: str, line: str) -> None:
        if server not in self._starts:
            self._starts[server] = self.progress.add_task(line, total=None, errors=0, server_start=True)
        self.progress.update(self._starts[server], description=line)

    def server_started(self, server: str) -> None:
        task = self._starts.pop(server, None)
        if task is not None:
            self.progress.remove_task(task)

    def server_ready(self, server: str, seconds: float) -> None:
        self.progress.console.print(f"  server {server} ready in {seconds:.0f} s")

    def point_start(self, config: PlannedConfig, point: LoadPoint, repeat: int,
                    total: int | None) -> None:
        rep = f" #{repeat + 1}" if repeat else ""
        self._errors[config.id] = 0
        self._tasks[config.id] = self.progress.add_task(f"  {config.id} @ {point.label()}{rep}", total=total,
                                                        errors=0)

    def request_done(self, record: RequestRecord) -> None:
        task = self._tasks.get(record.config_id)
        if record.warmup or task is None:
            return
        if not record.ok:
            self._errors[record.config_id] += 1
        self.progress.update(task, advance=1, errors=self._errors[record.config_id])
        if self._plan_task is not None:
            self.progress.update(self._plan_task, advance=1)

    def point_done(self, config: PlannedConfig, result: PointResult) -> None:
        self._tasks.pop(config.id, None)

    def note(self, message: str) -> None:
        self.progress.console.print(message)
