"""Where a workflow speaks. Tables and the one JSON document go to stdout; notes, progress and paths go to
stderr when the user asked for JSON (stdout is then for machines, `json.load` must read it whole)."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass

from rich.console import Console

from specmeter.schemas.progress import Reporter


@dataclass(frozen=True)
class Terminal:
    """The consoles the CLI made, whether it asked for JSON, and how to show a plan's progress."""

    out: Console
    err: Console
    # A fresh progress display per execution, drawn on the console it is given (the CLI: rich bars).
    progress: Callable[[Console], AbstractContextManager[Reporter]]
    json_out: bool = False
    # -q: -1 (the answer and errors only), 0: the default screen, -v: 1 (every table and per-point note).
    verbosity: int = 0

    @property
    def human(self) -> Console:
        """The console for lines a person reads: stdout, or stderr while stdout carries JSON."""
        return self.err if self.json_out else self.out

    def emit(self, document: str) -> None:
        """The command's one JSON document, to stdout as is (no wrapping, no markup)."""
        self.out.file.write(document if document.endswith("\n") else document + "\n")
