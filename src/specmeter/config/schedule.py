"""How a plan runs its configurations at each load point: rounds fixed by repeats, and servers one at a time or
up together and alternating (a sweep file's top-level repeats and interleave; run's, the demo's and verify's
flags)."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from specmeter.config.flags import Flag
from specmeter.config.points import StrictModel


class Schedule(StrictModel):
    """A sweep file's repeats and interleave, and the flags of every command that runs a plan."""

    repeats: Annotated[int, Flag("--repeats", default_shown=False, parse_bounds=True)] = Field(
        default=1, ge=1, description="Fixed rounds of every point per configuration (default: run 1; sweep, verify, "
        "demo: the file's, else adaptive until the point's decisions settle or none is likely to end as a win; "
        "verify's one proof point, where every point is carried from the sweep: one).")
    interleave: Annotated[bool, Flag("--interleave")] = Field(
        default=False, description="Keep every server up together and alternate them at each point, a wave of "
        "requests at a time at concurrency points (needs memory for all).")
