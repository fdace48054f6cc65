"""Console output: the report's tables and notes drawn with rich, as a person reads them in a terminal.

What is drawn follows a verbosity: -q (QUIET) the answer alone; the default the answer first, then where
speculation pays and its acceptance, with per-point notes said once for all the points they hold at; -v
(VERBOSE) the answer with its evidence, then every table and every per-point note. The HTML page and the CSV
files always hold everything."""

from __future__ import annotations

from pathlib import Path

from rich.console import Console, Group
from rich.table import Table
from rich.text import Text

from specmeter.analysis.families import drafter_label
from specmeter.report.collapse import collapse
from specmeter.report.decisions import crossover_lines
from specmeter.report.drafters import drafter_table
from specmeter.report.grid import Grid, Note
from specmeter.report.host import host_line
from specmeter.report.outputs import Output
from specmeter.report.phases import phase_table
from specmeter.report.recommendation import Line, deploy_lines, evidence_table, heading, round_lines
from specmeter.report.tables import notes, pays_table, sd_table, summary_tables
from specmeter.rundir.answer import Answer, Round
from specmeter.rundir.run_data import RunData
from specmeter.schemas.planner import Calibration
from specmeter.schemas.recommend import Recommendation
from specmeter.schemas.results import RunSummary

QUIET, DEFAULT, VERBOSE = -1, 0, 1


def to_rich(grid: Grid) -> Table:
    t = Table(title=grid.title, title_justify="left")
    for col in grid.columns:
        t.add_column(col.name, justify=col.align, no_wrap=not col.wrap, overflow="fold")
    for i, row in enumerate(grid.rows):
        if i in grid.sections and i > 0:
            t.add_section()
        t.add_row(*row)
    return t


def print_notes(items: list[Note], console: Console) -> None:
    """Notes, warnings in yellow."""
    for note in items:
        console.print(Text("• " + note.text, style="yellow" if note.warn else "dim"))


def print_tables(grids: list[Grid], items: list[Note], console: Console) -> None:
    """Tables, then the notes under them."""
    console.print(Group(*[to_rich(t) for t in grids]))
    print_notes(items, console)


def render(summary: RunSummary, console: Console | None = None, *, verbosity: int = DEFAULT,
           calibration: Calibration | None = None) -> None:
    """One run's tables and notes: -v all of them; the default where speculation pays (with the crossovers),
    its acceptance and, with two drafters or more, the drafters side by side (their cost per step from
    `calibration`), a phase-shift workload's phases, the notes collapsed; -q the speedups alone (acceptance where
    there is no baseline)."""
    console = console or Console()
    if verbosity >= VERBOSE:
        print_tables(summary_tables(summary, calibration), notes(summary), console)
        return
    pays, acceptance = pays_table(summary), sd_table(summary)
    if verbosity <= QUIET:
        headline = pays or acceptance
        if headline is not None:
            console.print(to_rich(headline))
        return
    host = host_line(summary)
    if host is not None and host[1]:  # a busy machine qualifies every number below: said before them
        console.print(Text("• " + host[0], style="yellow"), soft_wrap=True)
    if pays is not None:
        console.print(to_rich(pays))
        for line in crossover_lines(summary):
            console.print(Text(line), soft_wrap=True)
    if acceptance is not None:
        console.print(to_rich(acceptance))
    if len({drafter_label(c.spec) for c in summary.plan.configs if c.spec.enabled and not c.spec.synthetic}) > 1:
        drafters = drafter_table(summary, calibration)
        if drafters is not None:
            console.print(to_rich(drafters))
    if (phases := phase_table(summary)) is not None:  # a phase-shift workload is run for this table
        console.print(to_rich(phases))
    said = host[0] if host is not None and host[1] else None
    print_notes(collapse([n for n in notes(summary) if n.text != said]), console)


def render_recommendation(rec: Recommendation, console: Console, *, verbosity: int = DEFAULT,
                          title: str = "The answer") -> None:
    """The answer: what to deploy (the best drafter's table, its round and verification, the configs to copy);
    -v adds the alternatives, the notes, and the evidence tables behind every range."""
    assert rec.best is not None  # recommend() refuses a run with nothing to recommend
    verbose = verbosity >= VERBOSE
    at = "" if rec.input_len is None else f"At {rec.input_len} input tokens: "
    console.print(Text(f"{title}: {at}{heading(rec)}", style="bold"), soft_wrap=True)
    _deploy_lines(rec, console, verbose)
    for part in rec.per_input_len[1:]:  # an input-length axis: each other length's own table
        console.print(Text(f"At {part.input_len} input tokens: {heading(part)}", style="bold"), soft_wrap=True)
        _deploy_lines(part, console, verbose)
        if verbose:
            console.print(Group(*[to_rich(evidence_table(part, d)) for d in part.drafters]))
    if verbose:
        console.print(Group(*[to_rich(evidence_table(rec, d)) for d in rec.drafters]))


def render_rounds(answer: Answer, console: Console, shown: Round | None = None) -> None:
    """Which round the shown table is, and the run's other rounds as history."""
    _print_lines(round_lines(answer, shown), console)


def _deploy_lines(rec: Recommendation, console: Console, full: bool) -> None:
    _print_lines(deploy_lines(rec, full=full), console)


def _print_lines(lines: list[Line], console: Console) -> None:
    for line in lines:
        style = "dim" if line.dim else ("green" if line.config else "bold") if line.emphasis else ""
        console.print(Text(line.text, style=style), soft_wrap=True)


class ConsoleOutput(Output):
    """The terminal: the run's answer (its stored recommendation) first, then its tables and notes, then its
    verification when stored, as much of each as the verbosity asks for."""

    kind = "console"

    def __init__(self, dest: Path | None = None, console: Console | None = None, verbosity: int = DEFAULT) -> None:
        super().__init__(dest)
        self.console = console or Console()
        self.verbosity = verbosity

    def write(self, run: RunData) -> list[Path]:
        self._write(run, "The answer")
        return []

    def _write(self, run: RunData, title: str) -> None:
        rec = run.recommendation
        answered = rec is not None and rec.best is not None
        if rec is not None and answered:
            render_recommendation(rec, self.console, verbosity=self.verbosity, title=title)
            if run.answer is not None and self.verbosity > QUIET:
                render_rounds(run.answer, self.console)
        if self.verbosity <= QUIET:
            if not answered:  # no recommendation: the run's headline speedups are its answer
                render(run.summary, self.console, verbosity=self.verbosity)
            return
        render(run.summary, self.console, verbosity=self.verbosity, calibration=run.calibration)
        verification = run.verification
        if verification is None:
            return
        if self.verbosity >= VERBOSE:
            self.console.print(Text(f"Verification run {verification.run_dir.name}", style="bold"))
            self._write(verification, "The table it verified")
        elif said := collapse(notes(verification.summary)):  # its verdict is the answer's status line; what a
            # person must see of it besides is in its notes
            self.console.print(Text(f"Verification run {verification.run_dir.name}:", style="bold"))
            print_notes(said, self.console)
