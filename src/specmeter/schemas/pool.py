"""What `specmeter compare --pool` decides from several runs of one plan: per cell the runs' estimates and one pooled
interval and verdict (analysis.pool), and one answer table whose every measured range says how many runs chose
its K."""

from __future__ import annotations

from pydantic import BaseModel, Field

from specmeter.schemas.analysis import Ratio, Verdict
from specmeter.schemas.recommend import Recommendation


class RunCell(BaseModel):
    """One run's speedup at one cell, as that run decided it."""

    run: str
    value: float | None
    low: float | None = None
    high: float | None = None
    verdict: Verdict | None = None


class PooledCell(BaseModel):
    """One configuration at one point over every run that measured it."""

    config_id: str
    point_id: str
    metric: str = Field(description="The ratio the verdicts read: output_throughput or tpot.")
    runs: list[RunCell]
    pooled: Ratio = Field(description="The runs pooled (random effects over runs); its interval holds every run's "
                          "estimate.")
    verdict: Verdict | None
    verdicts_agree: bool = Field(description="Every run reached the same verdict.")
    intervals_overlap: bool | None = Field(description="The runs' own intervals share a value (None: under two "
                                           "intervals); False: the runs disagree beyond what each one's says.")
    left_out: list[str] = Field(default_factory=list, description="Runs whose cell other work disturbed, left out "
                                "because other runs measured it clean.")

    @property
    def spread(self) -> tuple[float, float] | None:
        values = [r.value for r in self.runs if r.value is not None]
        return (min(values), max(values)) if values else None


class RangeHeld(BaseModel):
    """A measured stretch of the pooled table (the batches one point decides) against each run's own choice there."""

    start: int
    end: int
    k: int
    point_ids: list[str]
    chosen_by: list[int | None] = Field(description="The K each run chose at the point (None: it did not decide "
                                        "there).")
    held: str = Field(description="In words: held in every run, or which runs chose otherwise and whether the "
                      "pooled evidence calls the two a tie.")


class Pooled(BaseModel):
    """The pooled verdicts and, where the runs recommend anything, the one answer."""

    runs: list[str]
    cells: list[PooledCell]
    recommendation: Recommendation | None = None
    held: list[RangeHeld] = Field(default_factory=list)
    no_answer: str | None = Field(default=None, description="Why the pooled runs give no table.")
