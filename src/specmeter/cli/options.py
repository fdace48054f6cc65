"""Every option more than one command takes, declared once: one name, one type, one help text. A command sets
its own default where it differs."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

# ---- predictions --------------------------------------------------------------------------------------------
Exclude = Annotated[list[str] | None, typer.Option(help="Leave this configuration out of the fit and the acceptance profile (repeatable): its points are then predicted blind.")]

# ---- what a command prints and writes -----------------------------------------------------------------------
Plots = Annotated[Path | None, typer.Option(help="Write the plots (PNG and SVG) into this directory.")]
RunDir = Annotated[Path, typer.Argument(help="A run directory (of run, sweep or demo).")]
