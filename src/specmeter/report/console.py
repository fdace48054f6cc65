"""Console output: the report's tables and notes drawn with rich, as a person reads them in a terminal."""

from __future__ import annotations

from pathlib import Path

from rich.console import Console, Group
from rich.table import Table
from rich.text import Text

from specmeter.report.grid import Grid, Note
from specmeter.report.outputs import Output
from specmeter.report.recommendation import Line, deploy_lines, evidence_table, heading, round_lines
from specmeter.report.tables import notes, summary_tables
from specmeter.rundir.answer import Answer, Round
from specmeter.rundir.run_data import RunData
from specmeter.schemas.recommend import Recommendation
from specmeter.schemas.results import RunSummary


def to_rich(grid: Grid) -> Table:
    t = Table(title=grid.title, title_justify="left")
    for col in grid.columns:
        t.add_column(col.name, justify=col.align, no_wrap=not col.wrap, overflow="fold")
    for i, row in enumerate(grid.rows):
        if i in grid.sections and i > 0:
            t.add_section()
        t.add_row(*row)
    return t


def print_tables(grids: list[Grid], items: list[Note], console: Console) -> None:
    """Tables, then the notes under them (warnings in yellow)."""
    console.print(Group(*[to_rich(t) for t in grids]))
    for note in items:
        console.print(Text("• " + note.text, style="yellow" if note.warn else "dim"))


def render(summary: RunSummary, console: Console | None = None) -> None:
    print_tables(summary_tables(summary), notes(summary), console or Console())


def render_recommendation(rec: Recommendation, console: Console, *, final: bool = False) -> None:
    """The evidence tables, then what to deploy; `final`: the answer a verification loop ended on, whose
    evidence was shown already, so only its heading and what to deploy."""
    assert rec.best is not None  # recommend() refuses a run with nothing to recommend
    if final:
        console.print(Text(f"The answer: {heading(rec)}", style="bold"))
    else:
        for part in rec.per_input_len[1:]:  # an input-length axis: the other lengths' evidence first
            console.print(Group(Text(f"At {part.input_len} input tokens: {heading(part)}", style="bold"),
                                *[to_rich(evidence_table(part, d)) for d in part.drafters]))
        at = "" if rec.input_len is None else f"At {rec.input_len} input tokens: "
        console.print(Group(Text(at + heading(rec), style="bold"),
                            *[to_rich(evidence_table(rec, d)) for d in rec.drafters]))
    _print_lines(deploy_lines(rec), console)


def render_rounds(answer: Answer, console: Console, shown: Round | None = None) -> None:
    """Which round the shown table is, and the run's other rounds as history."""
    _print_lines(round_lines(answer, shown), console)


def _print_lines(lines: list[Line], console: Console) -> None:
    for line in lines:
        style = "dim" if line.dim else ("green" if line.config else "bold") if line.emphasis else ""
        console.print(Text(line.text, style=style), soft_wrap=True)


class ConsoleOutput(Output):
    """The terminal: the run's tables and notes, then its recommendation and verification when stored."""

    kind = "console"

    def __init__(self, dest: Path | None = None, console: Console | None = None) -> None:
        super().__init__(dest)
        self.console = console or Console()

    def write(self, run: RunData) -> list[Path]:
        render(run.summary, self.console)
        if run.answer is not None and run.recommendation is not None and run.recommendation.best is not None:
            render_recommendation(run.recommendation, self.console)
            render_rounds(run.answer, self.console)
        if run.verification is not None:
            self.write(run.verification)
        return []
