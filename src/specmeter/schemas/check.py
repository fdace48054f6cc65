"""What `specmeter check RUN --against REF_RUN` decides: per configuration and load point both runs measured, the
change in acceptance length and in speedup from the reference run to this one, each with an interval, and whether
it dropped by more than its bound with confidence (a regression). Reports render this; CI reads it (--json)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from specmeter.schemas.analysis import Ratio
from specmeter.schemas.compare import ComparedRun

CheckOutcome = Literal["regressed", "held", "unsettled"]
CheckedWhat = Literal["acceptance_length", "speedup"]


class CheckedMetric(BaseModel):
    """One metric of one configuration at one point: this run against the reference run."""

    point: str = Field(description="The load point, as a person reads it (concurrency 16).")
    point_id: str
    reference_point_id: str
    config_id: str
    reference_config_id: str
    metric: CheckedWhat
    decided_on: Literal["output_throughput", "tpot"] | None = Field(
        default=None, description="speedup: the ratio each run's verdict reads (throughput under concurrency, TPOT "
        "at a request rate).")
    reference: float | None = Field(description="The reference run's AL or speedup.")
    value: float | None = Field(description="This run's AL or speedup.")
    change: Ratio = Field(description="This run's value / the reference's (< 1: it dropped), with its interval.")
    low: float | None = Field(description="Lower bound the outcome reads: the interval, widened by the spread "
                              "across repeats where either run has them (speedup).")
    high: float | None
    bound: float = Field(description="1 - the largest drop allowed: a change whose whole interval lies below it "
                         "regressed.")
    basis: str = Field(description="How the interval was made: a bootstrap over the requests both runs completed, "
                       "or (without per-request steps) the engine's counters.")
    paired_requests: int = Field(default=0, description="Requests the paired bootstrap resampled (0: counters).")
    outcome: CheckOutcome = Field(description="regressed: the whole interval below `bound`; held: the whole "
                                  "interval at or above it; unsettled: it straddles the bound, or no interval.")
    note: str | None = None

    def line(self) -> str:
        """One line: which metric, configuration and point, from what to what, and the bound."""
        what = "AL" if self.metric == "acceptance_length" else "speedup"
        ref = "-" if self.reference is None else f"{self.reference:.2f}"
        val = "-" if self.value is None else f"{self.value:.2f}"
        change = "-" if self.change.value is None else f"{self.change.value:.3f}x"
        bounds = "" if self.low is None or self.high is None else f" [{self.low:.3f}, {self.high:.3f}]"
        return (f"{what} of {self.config_id} at {self.point}: {ref} -> {val} ({change}{bounds}, allowed down to "
                f"{self.bound:.3f})")


class RegressionCheck(BaseModel):
    """Every decision of one check."""

    run: ComparedRun = Field(description="The run checked.")
    reference: ComparedRun = Field(description="The run it is checked against.")
    max_al_drop: float = Field(description="The largest drop in AL allowed, as a fraction (0.02: 2%).")
    max_speedup_drop: float = Field(description="The largest drop in speedup allowed, as a fraction.")
    confidence: float = 0.95
    checks: list[CheckedMetric] = Field(default_factory=list)
    regressions: list[str] = Field(default_factory=list, description="One line per regressed metric.")
    unmatched: list[str] = Field(default_factory=list, description="Points and configurations only one run has: "
                                 "not checked.")
    warnings: list[str] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)

    @property
    def regressed(self) -> bool:
        return bool(self.regressions)
