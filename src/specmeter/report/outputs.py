"""Outputs by kind, behind one interface: each reads a stored run (RunData) and writes what it shows.
They render stored results and stored decisions and recompute nothing. Kinds import lazily, so a console
report never loads matplotlib."""

from __future__ import annotations

from abc import ABC, abstractmethod
from pathlib import Path
from typing import ClassVar

from specmeter.common.registry import Registry
from specmeter.rundir.run_data import RunData

# kind -> "module:class"; a new output is one line here and one class.
OUTPUTS: Registry[type[Output]] = Registry("output", {
    "console": "specmeter.report.console:ConsoleOutput",
    "json": "specmeter.report.json_output:JsonOutput",
    "csv": "specmeter.report.csv_output:CsvOutput",
    "plots": "specmeter.report.plots:PlotsOutput",
    "html": "specmeter.report.html:HtmlOutput",
    "profiles": "specmeter.report.simulator_profiles:ProfilesOutput",
})


class Output(ABC):
    """Writes one run to `dest` (a file or a directory, by kind; None: the terminal where that makes sense)."""

    kind: ClassVar[str]

    def __init__(self, dest: Path | None = None) -> None:
        self.dest = dest

    @abstractmethod
    def write(self, run: RunData) -> list[Path]:
        """Render the run; return the files written (none for the terminal)."""

    def told(self, written: list[Path]) -> list[str]:
        """What the terminal says of the files written: each one's path (an output of many files may say it in one
        line)."""
        return [f"wrote [cyan]{path}[/]" for path in written]


def output(kind: str, dest: Path | None = None) -> Output:
    """The output of this kind, writing to `dest`."""
    cls = OUTPUTS.get(kind)
    assert cls.kind == kind
    return cls(dest)
