"""What `specmeter compare` decides across stored runs (e.g. vLLM against llama.cpp on one workload): which
points and configurations line up, each run's own numbers and speedup, and each run against the first (the
reference) with paired intervals. Reports render this and recompute nothing."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from specmeter.schemas.analysis import Ratio, Speedup
from specmeter.schemas.plan import Role


class ComparedRun(BaseModel):
    """One run of the comparison, in the order given (the first is the reference)."""

    name: str = Field(description="Its directory name (with the parent's when two runs share a name).")
    run_dir: str
    engine_version: str | None
    label: str = Field(description="name (engine): how every table names the run.")
    plan_kind: str
    status: str
    created_utc: str
    target: str | None = Field(default=None, description="Content hash of the target's weights, when stored.")


class WorkloadDifference(BaseModel):
    """One setting that makes a run's requests or outputs differ from the reference's."""

    run: str = Field(description="Name of the run that differs.")
    field: str = Field(description="e.g. workload.dataset, load.max_tokens.")
    reference: str = Field(description="The reference run's value (as JSON).")
    value: str = Field(description="This run's value (as JSON).")


class ComparedPoint(BaseModel):
    """A load point present in every run, matched by its load (same concurrency, or same request rate)."""

    axis: Literal["concurrency", "rate"]
    load: float
    label: str
    point_ids: list[str] = Field(description="The point's id in each run, in run order.")


class RunDifference(BaseModel):
    """One run's configuration against the reference run's counterpart at the same point: different servers,
    same requests, paired by request across runs on (conversation_id, turn, repeat)."""

    reference_config_id: str
    output_throughput: Ratio = Field(description="This run's output tok/s / the reference's (> 1: this run "
                                     "faster). Value from the stored point totals; interval from a paired "
                                     "bootstrap of per-request stream rates, scaled to the value.")
    tpot: Ratio = Field(description="Reference mean TPOT / this run's mean TPOT over the matched requests "
                        "(> 1: this run faster), paired-bootstrap interval.")
    paired_requests: int = Field(description="Requests both runs completed, the unit the bootstrap resamples.")
    note: str | None = None


class RunEntry(BaseModel):
    """One run's configuration at one compared point, with its numbers copied or pooled from that run."""

    run: str
    config_id: str
    spec_label: str
    point_id: str
    output_tokens_per_s: float | None = Field(description="Output tokens / wall time, pooled over repeats.")
    tpot_mean_s: float | None = Field(description="Mean per-request TPOT, pooled over repeats.")
    acceptance_length: float | None = Field(description="The headline AL, counts pooled over repeats.")
    speedup: Speedup | None = Field(default=None, description="The run's own speedup over its baseline at the "
                                    "point, copied from its stored analysis.")
    vs_reference: RunDifference | None = Field(default=None, description="Against the reference run (None for "
                                               "the reference itself, or when it has no counterpart).")


class ComparedConfig(BaseModel):
    """A configuration slot lined up across runs: the baselines together, candidates by id, by speculation
    label, or the only candidate of each run."""

    role: Role
    name: str = Field(description="The reference's configuration id (else the first run's that has one).")
    entries: list[RunEntry | None] = Field(description="One per run, in run order; None: not in that run.")


class PointComparison(BaseModel):
    point: ComparedPoint
    configs: list[ComparedConfig]


class RunComparison(BaseModel):
    """Every decision of a comparison of stored runs."""

    runs: list[ComparedRun] = Field(description="In the order given; the first is the reference.")
    same_workload: bool
    allowed_different_workloads: bool = False
    workload_differences: list[WorkloadDifference] = Field(default_factory=list)
    points: list[PointComparison] = Field(default_factory=list)
    unmatched_points: list[str] = Field(default_factory=list, description="Points not present in every run.")
    warnings: list[str] = Field(default_factory=list, description="What can make a difference wrong: other "
                                "weights, an incomplete run, other arrivals at a matched rate.")
    notes: list[str] = Field(default_factory=list, description="How the comparison was made.")

    @property
    def reference(self) -> ComparedRun:
        return self.runs[0]
