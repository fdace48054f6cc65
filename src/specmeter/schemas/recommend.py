"""What `specmeter recommend` decides from a sweep: a K per engine batch size for each drafter, the ready
vLLM dynamic-SD config, the static K for engines without dynamic SD, and the evidence behind each range.

Written to recommendation.json in the run directory; `specmeter verify` reads it back.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

from specmeter.config import SpecConfig

Objective = Literal["throughput", "tpot", "goodput"]
Basis = Literal["measured", "interpolated", "below_measured", "unmeasured"]


class SLO(BaseModel):
    """Per-request service-level objective: a request counts toward goodput when it meets every bound given."""

    ttft_ms: float | None = Field(default=None, gt=0)
    tpot_ms: float | None = Field(default=None, gt=0)
    e2e_ms: float | None = Field(default=None, gt=0)

    def label(self) -> str:
        return ", ".join(f"{k} <= {v:g}" for k, v in self.model_dump(exclude_none=True).items())


class Score(BaseModel):
    """One contender's objective at one point: a speedup over the baseline (throughput, tpot) or goodput in
    requests/s; [low, high] is the interval the choice reads (see analysis.choice.decision_bounds)."""

    config_id: str
    k: int
    value: float | None
    low: float | None = None
    high: float | None = None


class Segment(BaseModel):
    """A stretch of batch sizes and where its K comes from: a measured point, interpolation between two,
    below the smallest measured batch, or beyond the largest (unmeasured: speculation off, nothing claimed)."""

    start: int = Field(ge=1)
    end: int = Field(ge=1)
    k: int = Field(ge=0)
    basis: Basis
    point_ids: list[str] = Field(default_factory=list, description="The measured points it rests on.")
    engine_batch: list[float] = Field(default_factory=list, description="Their measured engine batch sizes.")
    scores: list[Score] = Field(default_factory=list, description="Measured: every contender at the point.")
    chosen: str | None = Field(default=None, description="Measured: the configuration chosen at the point.")
    reason: str


class KRange(BaseModel):
    """One entry of the emitted table: consecutive segments with the same K, merged."""

    start: int = Field(ge=1)
    end: int = Field(ge=1)
    k: int = Field(ge=0)
    bases: list[Basis] = Field(description="Where the K of its batch sizes comes from.")

    @property
    def entry(self) -> list[int]:
        return [self.start, self.end, self.k]


class DrafterRecommendation(BaseModel):
    """The recommendation for one drafter (method + draft model + its options) of the sweep."""

    drafter: str = Field(description="Human label, e.g. 'draft_model demo-draft'.")
    candidates: list[str] = Field(description="The sweep's static configurations of this drafter.")
    ranges: list[KRange]
    segments: list[Segment]
    spec: SpecConfig | None = Field(description="The dynamic config as specmeter runs it; None when "
                                    "speculation pays nowhere.")
    speculative_config: dict[str, Any] | None = Field(description="vLLM --speculative-config JSON, ready to paste.")
    static_k: int = Field(ge=0, description="K to use where dynamic SD is unavailable (0: leave speculation off).")
    static_config_id: str | None
    static_speculative_config: dict[str, Any] | None
    static_reason: str
    score: float | None = Field(description="Geometric mean over measured points of the objective the table "
                                "gets (ranks drafters).")


class Recommendation(BaseModel):
    """Every drafter's table, the best first."""

    source_run: str
    objective: Objective
    slo: SLO | None = None
    max_num_seqs: int = Field(ge=1)
    max_num_seqs_source: str
    drafters: list[DrafterRecommendation]
    notes: list[str] = Field(default_factory=list)

    @property
    def best(self) -> DrafterRecommendation | None:
        return self.drafters[0] if self.drafters else None
