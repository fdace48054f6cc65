"""Where a workflow speaks. Tables and the one JSON document go to stdout; notes, progress and paths go to
stderr when the user asked for JSON (stdout is then for machines, `json.load` must read it whole).

How much is said follows `verbosity`: -q (-1) the answer and errors only, the default (0) the answer and the
few tables that carry it, -v (1) every table and every per-point note as well."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass

from rich.console import Console

from specmeter.report.console import DEFAULT, QUIET, VERBOSE
from specmeter.schemas.progress import Reporter

# What a level does not show is printed here: nowhere.
_SILENT = Console(quiet=True)


@dataclass(frozen=True)
class Terminal:
    """The consoles the CLI made, whether it asked for JSON, how to show a plan's progress, and how much to say."""

    out: Console
    err: Console
    # A fresh progress display per execution, drawn on the console it is given (the CLI: rich bars).
    progress: Callable[[Console], AbstractContextManager[Reporter]]
    json_out: bool = False
    # -q: -1 (the answer and errors only), 0: the default screen, -v: 1 (every table and per-point note).
    verbosity: int = DEFAULT

    @property
    def quiet(self) -> bool:
        return self.verbosity <= QUIET

    @property
    def verbose(self) -> bool:
        return self.verbosity >= VERBOSE

    @property
    def human(self) -> Console:
        """The console for lines a person reads (paths, what a step did): stdout, or stderr while stdout carries
        JSON; silent under -q, which prints the answer alone."""
        if self.quiet:
            return _SILENT
        return self.err if self.json_out else self.out

    @property
    def detail(self) -> Console:
        """`human`, but only under -v: what the default screen leaves to the report's files."""
        return self.human if self.verbose else _SILENT

    @property
    def note(self) -> Console:
        """stderr for notes and warnings that do not stop the command; silent under -q (errors are raised, and
        the CLI prints them at every level)."""
        return _SILENT if self.quiet else self.err

    @property
    def answer(self) -> Console:
        """The console the answer goes to at every level: stdout (nothing while stdout carries JSON, where the
        document is the answer)."""
        return _SILENT if self.json_out else self.out

    def reporting(self) -> AbstractContextManager[Reporter]:
        """The progress display of one execution: the CLI's on `human`, none under -q."""
        return nullcontext(Reporter()) if self.quiet else self.progress(self.human)

    def emit(self, document: str) -> None:
        """The command's one JSON document, to stdout as is (no wrapping, no markup)."""
        self.out.file.write(document if document.endswith("\n") else document + "\n")
