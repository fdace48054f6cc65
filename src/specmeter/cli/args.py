"""What every command of the command line reads the same way: the consoles and the Terminal it speaks through
(with the verbosity -q/-v set), the command line as a run directory records it, and the note an
old form of a command prints. Below every other cli module, so each can use it."""

from __future__ import annotations

import sys
from contextvars import ContextVar
from pathlib import Path

from rich.console import Console

from specmeter.common.redact import redact_argv
from specmeter.config.output import Printing
from specmeter.report.progress import RichReporter
from specmeter.workflows.terminal import Terminal

# --json and -q/-v of the command running (settings.speaking sets them), for the Terminal it makes.
PRINTING: ContextVar[Printing | None] = ContextVar("printing", default=None)

# Logs and CI are not terminals: give tables room instead of rich's 80-column default.
console = Console(width=None if sys.stdout.isatty() else 150)
err_console = Console(stderr=True, width=None if sys.stderr.isatty() else 150)


def terminal() -> Terminal:
    """The Terminal a command speaks through: JSON or tables, at the verbosity its -q/-v asked for."""
    printing = PRINTING.get() or Printing()
    return Terminal(out=console, err=err_console, json_out=printing.json_out, progress=RichReporter,
                    verbosity=printing.verbosity)


def note(old: str, new: str) -> None:
    """One line on stderr: an old form still works for one release, and what replaces it."""
    err_console.print(f"note: '{old}' is now '{new}'", highlight=False, markup=False, soft_wrap=True)


def resume_run(run_dir: Path, api_key: str | None) -> None:
    """`specmeter resume RUN` (and the old `run --resume`, `sweep --resume`)."""
    from specmeter.workflows import resume as workflow

    workflow.resume(run_dir, api_key, terminal())


def command_line() -> list[str]:
    """The command line as the run directory records it (secrets masked)."""
    return ["specmeter", *redact_argv(sys.argv[1:])]
