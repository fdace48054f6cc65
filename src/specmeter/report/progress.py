"""Rich progress bars for a run: one bar per load level, a line per phase and server start."""

from __future__ import annotations

from types import TracebackType

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from specmeter.load.records import RequestRecord
from specmeter.results import LevelResult
from specmeter.runner import Reporter


class RichReporter(Reporter):
    def __init__(self, console: Console) -> None:
        self.console = console
        self.progress = Progress(
            TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
            TextColumn("{task.fields[errors]} errors"), TimeElapsedColumn(),
            console=console, transient=False,
        )
        self._task: int | None = None
        self._errors = 0

    def __enter__(self) -> RichReporter:
        self.progress.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.progress.stop()

    def phase_start(self, name: str, label: str) -> None:
        self.progress.console.print(f"[bold]phase {name}[/] (speculation {label})")

    def server_ready(self, name: str, seconds: float) -> None:
        self.progress.console.print(f"  server ready in {seconds:.0f} s")

    def level_start(self, phase: str, concurrency: int, total: int) -> None:
        self._errors = 0
        self._task = self.progress.add_task(f"  {phase} @ concurrency {concurrency}", total=total, errors=0)

    def request_done(self, record: RequestRecord) -> None:
        if record.warmup or self._task is None:
            return
        if not record.ok:
            self._errors += 1
        self.progress.update(self._task, advance=1, errors=self._errors)

    def level_done(self, phase: str, level: LevelResult) -> None:
        self._task = None

    def note(self, message: str) -> None:
        self.progress.console.print(message)
