"""What analysis decides, stored in the run summary so every report shows the same verdicts.

Reports render these; they never recompute them.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field


class Ratio(BaseModel):
    """A ratio (speedup) with its 95% interval and, with repeats, its spread across repeats."""

    value: float | None = Field(description="Point estimate over all repeats pooled (or the one run).")
    ci95_low: float | None = None
    ci95_high: float | None = None
    repeat_values: list[float] = Field(default_factory=list, description="One estimate per repeat.")
    median: float | None = Field(default=None, description="Median of repeat_values (repeats >= 2).")
    mad: float | None = Field(default=None, description="Median absolute deviation of repeat_values (raw, "
                              "not scaled by 1.4826).")


class Speedup(BaseModel):
    """A candidate against the baseline at one load point, on the same requests (paired by request)."""

    config_id: str
    baseline_id: str
    point_id: str
    output_throughput: Ratio = Field(description="Candidate output tok/s / baseline output tok/s.")
    tpot: Ratio = Field(description="Baseline mean TPOT / candidate mean TPOT (> 1: candidate faster).")
    ttft: Ratio = Field(description="Baseline mean TTFT / candidate mean TTFT.")
    e2e: Ratio = Field(description="Baseline mean E2E / candidate mean E2E.")
    paired_requests: int = Field(description="Requests both sides completed, the unit the bootstrap resamples.")
    same_work: bool = Field(description="Both sides completed the same requests.")
    note: str | None = None

    decided_on: Literal["output_throughput", "tpot"] = Field(
        default="output_throughput", description="The ratio the verdict reads: throughput under closed-loop "
        "concurrency; TPOT at a request rate, where both sides deliver the offered rate.")
    verdict: Literal["pays", "slows", "unclear"] | None = Field(
        default=None, description="From the interval of `decided_on`, never from the point estimate alone.")


class Crossover(BaseModel):
    """Where a candidate's throughput speedup falls below 1 as load grows."""

    config_id: str
    axis: Literal["concurrency", "rate"]
    status: Literal["crosses", "always_pays", "never_pays", "unclear"] = Field(
        description="crosses: the speedup falls below 1 between two measured loads; always_pays / never_pays: "
        "above / below 1 at every measured load; unclear: it goes up and down, or too few points.")
    load: float | None = Field(default=None, description="Interpolated load where the speedup is 1.")
    low: float | None = Field(default=None, description="Lower end of the load interval for the crossover.")
    high: float | None = Field(default=None, description="Upper end (None: beyond the largest measured load).")
    note: str = ""


class PointChoice(BaseModel):
    """The configuration to run at one load point. Ties (overlapping intervals) go to the smaller K."""

    point_id: str
    best_config_id: str = Field(description="The chosen configuration (the baseline when nothing clearly wins).")
    best_k: int = Field(description="Its K (0 for the baseline).")
    leader_config_id: str = Field(description="The configuration with the highest point estimate.")
    tied_with: list[str] = Field(default_factory=list, description="Configurations whose interval overlaps "
                                 "the leader's.")
    reason: str


class DraftedCheck(BaseModel):
    """Did the engine follow the dynamic table? Read from vLLM's per-request `per_step_drafted`: the K drafted
    at each verify step. Steps that drafted nothing (K = 0) are not reported by the engine; they are counted
    as the decode steps left over: output tokens - 1 - (accepted + 1) per reported step."""

    point_id: str
    engine_batch: float | None = Field(description="The running batch the engine reported at the point.")
    expected_k: int | None = Field(description="The table's K at that batch size.")
    allowed_k: list[int] = Field(default_factory=list, description="Every K the table gives batch sizes 1 up to "
                                 "the largest the engine ran at the point (ramp-up and drain pass through them).")
    drafted: dict[int, int] = Field(default_factory=dict, description="K drafted -> verify steps.")
    steps: int = 0
    modal_k: int | None = None
    share_expected: float | None = Field(default=None, description="Share of steps that drafted expected_k.")
    share_unexpected: float | None = Field(default=None, description="Share of steps drafting a K outside "
                                           "allowed_k.")
    followed: bool | None = Field(default=None, description="The most drafted K is the table's K at the batch "
                                  "the engine ran (None: the engine gave no per-step stats).")
    note: str = ""


class VerifyPoint(BaseModel):
    """The recommended dynamic config at one point, against the baseline and the best static config there."""

    point_id: str
    config_id: str
    static_id: str | None = Field(description="The sweep's best static configuration at this point.")
    vs_baseline: Speedup | None
    vs_static: Speedup | None = Field(description="Dynamic over the best static (> 1: the dynamic config wins).")
    drafted: DraftedCheck
