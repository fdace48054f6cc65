"""Where a measuring command (run, sweep, the demo) writes the new run directory it makes."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

from pydantic import Field

from specmeter.config.flags import Flag
from specmeter.config.points import StrictModel


class RunOutput(StrictModel):
    """The run directory's parent and, where given, its name."""

    out: Annotated[Path, Flag("--out")] = Field(
        default=Path("runs"), description="Directory that receives the new run directory.")
    name: Annotated[str | None, Flag("--name")] = Field(
        default=None, description="Run directory name (default: timestamp + label).")
