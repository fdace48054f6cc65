"""What a load ramp stores in the run summary (load.stop_at_saturation): each step it judged, a point against the
next lower load measured on its axis, with every configuration's numbers, and where the ramp stopped going up, why,
and which higher loads it skipped. A resumed run reads these back and skips the same points; reports show them."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from specmeter.schemas.analysis import Ratio


class StepReading(BaseModel):
    """One configuration from the lower load to the higher one."""

    config_id: str
    throughput: Ratio = Field(description="Output tok/s at the higher load / at the lower one (point totals pooled "
                              "over repeats; interval from an independent bootstrap of each point's requests).")
    e2e_p50: Ratio = Field(description="Median E2E latency at the higher load / at the lower one.")
    throughput_low: float | None = Field(default=None, description="Lower bound the rule reads: the interval, "
                                         "widened by the spread across repeats.")
    throughput_high: float | None = None
    latency_low: float | None = None
    latency_high: float | None = None
    saturated: bool = Field(description="Throughput did not rise beyond min gain while latency rose beyond "
                            "latency_rise, here or at an earlier step of the ramp.")
    why: str


class RampStep(BaseModel):
    """One point of a ramp judged against the next lower load measured on its axis."""

    lower_point: str
    point_id: str
    lower: float
    load: float
    readings: list[StepReading] = Field(default_factory=list)
    saturated: bool = Field(description="Every configuration measured at both points has saturated (at this step "
                            "or an earlier one).")
    why: str


class AxisRamp(BaseModel):
    """One load axis of a ramp: the steps judged, in the order judged, and where it stopped going up."""

    axis: Literal["concurrency", "rate"]
    input_len: int | None = Field(default=None, description="The input length whose points this ramp climbs (an "
                                  "input-length axis ramps each length on its own; None: no such axis).")
    min_gain: float
    latency_rise: float
    steps: list[RampStep] = Field(default_factory=list)
    saturated_at: str | None = Field(default=None, description="The point where every configuration had saturated "
                                     "(None: the ramp never saturated).")
    load: float | None = Field(default=None, description="Its load: the axis's ceiling (a load search stays below).")
    skipped: list[str] = Field(default_factory=list, description="Higher points of the axis not measured.")
    why: str = ""

    def step(self, lower_point: str, point_id: str) -> RampStep | None:
        return next((s for s in self.steps if (s.lower_point, s.point_id) == (lower_point, point_id)), None)
