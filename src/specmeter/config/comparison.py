"""How `compare` reads stored runs: side by side, as a regression check of one run against a reference (--check,
within the bounds), or as reruns of one plan pooled into one verdict (--pool)."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field, model_validator

from specmeter.common.errors import InputError
from specmeter.config import flag_text
from specmeter.config.flags import Flag, flagged
from specmeter.config.points import StrictModel

# What --pool refuses beside it (--plots, a report file's, is refused where the command holds both).
POOL_ALONE = "--pool takes runs of one plan, without --check, --allow-different-workloads or --plots"


class Bounds(StrictModel):
    """The largest drops a regression check allows, as fractions (0.02: 2%)."""

    max_al_drop: Annotated[float, Flag("--max-al-drop", text=flag_text.drop)] = Field(
        default=0.02, description="With --check: the largest drop in acceptance length allowed, a percentage (2%) "
        "or a fraction (0.02).")
    max_speedup_drop: Annotated[float, Flag("--max-speedup-drop", text=flag_text.drop)] = Field(
        default=0.03, description="With --check: the largest drop in speedup over each run's own baseline allowed.")


class Comparison(Bounds):
    """Which reading of the runs `compare` gives; the bounds apply to --check only."""

    allow_different_workloads: Annotated[bool, Flag("--allow-different-workloads")] = Field(
        default=False, description="Compare runs whose requests or sampling differ (their differences then mix "
        "engine and workload).")
    check: Annotated[bool, Flag("--check", negatable=False)] = Field(
        default=False, description="REF RUN: exit 5 where RUN's acceptance or speedup dropped below REF's by more "
        "than the bounds, with confidence (for CI).")
    pool: Annotated[bool, Flag("--pool", negatable=False)] = Field(
        default=False, description="Runs of one plan (another day, box or server start) as one verdict per "
        "configuration and point and one answer, each range saying whether it held in every run.")

    @model_validator(mode="after")
    def _one_reading(self) -> Comparison:
        if self.pool and (self.check or self.allow_different_workloads):
            raise InputError(POOL_ALONE)
        bounds = [flag.name for name, _info, flag in flagged(Bounds) if name in self.model_fields_set]
        if bounds and not self.check:
            raise InputError(f"{' and '.join(bounds)} bound --check: add --check (compare REF RUN --check)")
        return self
