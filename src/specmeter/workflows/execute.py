"""Execute one plan into its run directory, show what it measured, and write the run's page beside it."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path

from specmeter import __version__
from specmeter.common.errors import InputError, RunIncomplete
from specmeter.engines.probe import resolve_endpoints
from specmeter.execution.runner import Execution, execute
from specmeter.execution.servers import ServerPool
from specmeter.report.console import ConsoleOutput, render
from specmeter.report.html import HtmlOutput
from specmeter.rundir.run_data import load_run
from specmeter.rundir.store import SUMMARY, RunStore, load_summary
from specmeter.schemas.results import RunSummary
from specmeter.workflows.terminal import Terminal


def write_page(run_dir: Path, term: Terminal) -> None:
    """The run's one-file HTML report beside summary.json (written again when a recommendation or a
    verification joins the run)."""
    try:
        (path,) = HtmlOutput().write(load_run(run_dir))
    except Exception as exc:  # the page is a by-product: the measurements are on disk and the exit code is theirs
        term.note.print(f"[yellow]report.html not written ({exc.__class__.__name__}: {exc}); "
                       f"`specmeter report {run_dir} --html FILE` tries again[/]")
        return
    term.human.print(f"report: [cyan]{path}[/]")


def measure(ex: Execution, run_dir: Path, term: Terminal, pool: ServerPool | None = None, *,
            show: bool = True) -> RunSummary:
    """Run the plan into `run_dir`, show its tables (none under --json: the caller prints the document; none
    unless `show`: the workflow shows the whole run directory when it ends), write its page; the summary comes
    back finished or not."""
    # Before the run directory exists: an endpoint that does not answer leaves nothing behind.
    ex = replace(ex, plan=resolve_endpoints(ex.plan, ex.api_key))
    store = RunStore(run_dir)
    if not term.json_out:
        term.human.print(f"[bold]specmeter[/] {__version__}: run directory [cyan]{run_dir}[/]")
    with term.reporting() as reporter:
        summary = execute(ex, store, reporter, pool)
    if show and not term.json_out:
        render(summary, term.answer, verbosity=term.verbosity)
    write_page(run_dir, term)
    if not term.json_out:
        term.human.print(f"results: [cyan]{run_dir}[/] (summary.json, requests.jsonl, server logs)")
    return summary


@contextmanager
def showing(run_dir: Path, term: Terminal) -> Iterator[None]:
    """When the workflow ends, also early (what finished), its run directory on the console as `specmeter report`
    shows it: the answer first, then what carries it."""
    def show() -> None:
        if not term.json_out and (run_dir / SUMMARY).exists():
            ConsoleOutput(console=term.answer, verbosity=term.verbosity).write(load_run(run_dir))

    try:
        yield
    except InputError:  # refused before anything ran: its one line is the whole answer
        raise
    except BaseException:
        show()
        raise
    show()


def measure_and_keep(ex: Execution, run_dir: Path, term: Terminal, keep: Callable[[RunSummary], None],
                     pool: ServerPool | None = None, *, show: bool = True) -> RunSummary:
    """`measure`, then the summary to `keep` (also that of a run stopped mid-way by Ctrl-C, the error rate or a
    dead server: what finished, as stored), then the 'incomplete' exit code of a run that did not finish."""
    try:
        summary = measure(ex, run_dir, term, pool, show=show)
    except RunIncomplete:
        keep(load_summary(run_dir))  # execute saved it before it raised
        raise
    keep(summary)
    if summary.status != "complete":
        raise RunIncomplete(f"{summary.incomplete_reason}; what finished is in {run_dir}; "
                            f"`specmeter resume {run_dir}` runs what is missing")
    return summary


def measure_one(ex: Execution, run_dir: Path, term: Terminal, pool: ServerPool | None = None, *,
                show: bool = True) -> RunSummary:
    """A command that runs one plan: under --json its summary is the document."""

    def keep(summary: RunSummary) -> None:
        if term.json_out:
            term.emit(summary.model_dump_json(indent=2))

    return measure_and_keep(ex, run_dir, term, keep, pool, show=show)
