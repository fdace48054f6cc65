"""A per-request service-level objective: the bounds a request must meet to count toward goodput (requests per
second that met every bound given). Read from `load.slo` (per-point goodput beside throughput) and from `--slo`
(recommend's goodput objective). Below config/models.py, so a load spec can carry one."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, model_validator


class SLO(BaseModel):
    """Per-request service-level objective: a request counts toward goodput when it meets every bound given."""

    model_config = ConfigDict(extra="forbid")

    ttft_ms: float | None = Field(default=None, gt=0)
    tpot_ms: float | None = Field(default=None, gt=0)
    e2e_ms: float | None = Field(default=None, gt=0)

    @model_validator(mode="after")
    def _some_bound(self) -> SLO:
        if self.ttft_ms is None and self.tpot_ms is None and self.e2e_ms is None:
            raise ValueError("an SLO needs at least one bound: ttft_ms, tpot_ms or e2e_ms (e.g. ttft_ms: 500)")
        return self

    def label(self) -> str:
        return ", ".join(f"{k} <= {v:g}" for k, v in self.model_dump(exclude_none=True).items())
