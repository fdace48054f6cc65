"""Every option more than one command takes, declared once: one name, one type, one help text. A command sets
its own default where it differs. `with_verbosity` gives every command -q/--quiet and
-v/--verbose."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer

from specmeter.cli.args import VERBOSITY
from specmeter.common.errors import InputError

# ---- predictions --------------------------------------------------------------------------------------------
Exclude = Annotated[list[str] | None, typer.Option(help="Leave this configuration out of the fit and the acceptance profile (repeatable): its points are then predicted blind.")]

# ---- what a command prints and writes -----------------------------------------------------------------------
Json = Annotated[bool, typer.Option("--json", help="Print one JSON document to stdout instead of tables (notes go to stderr).")]
Plots = Annotated[Path | None, typer.Option(help="Write the plots (PNG and SVG) into this directory.")]
RunDir = Annotated[Path, typer.Argument(help="A run directory (of run, sweep or demo).")]
Quiet = Annotated[bool, typer.Option("-q", "--quiet", help="Print the answer and errors only.")]
Verbose = Annotated[bool, typer.Option("-v", "--verbose", help="Print every table and per-point note.")]


def verbosity(quiet: bool, verbose: bool) -> int:
    """Terminal.verbosity from -q/-v: -1, 0 or 1."""
    if quiet and verbose:
        raise InputError("-q/--quiet and -v/--verbose together: give one (-q: the answer and errors only; -v: every "
                         "table and note)")
    return -1 if quiet else 1 if verbose else 0


def with_verbosity(func: Callable[..., None]) -> Callable[..., None]:
    """The command with -q/--quiet and -v/--verbose added; the Terminal it makes (args.terminal) carries them."""
    params = list(inspect.signature(func, eval_str=True).parameters.values())  # strings under `from __future__`

    @functools.wraps(func)
    def command(*args: Any, quiet: bool = False, verbose: bool = False, **kwargs: Any) -> None:
        token = VERBOSITY.set(verbosity(quiet, verbose))
        try:
            func(*args, **kwargs)
        finally:
            VERBOSITY.reset(token)

    flags = [inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=False, annotation=kind)
             for name, kind in (("quiet", Quiet), ("verbose", Verbose))]
    command.__signature__ = inspect.Signature([*params, *flags])  # type: ignore[attr-defined]
    return command
