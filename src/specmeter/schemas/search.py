"""What a load search stores in the run summary: every point it chose, in order, with why; the brackets it left;
and why it stopped. A resumed sweep continues from these, and reports show them."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field


class Bracket(BaseModel):
    """Two adjacent measured loads between which something the sweep decides changes: a configuration's verdict
    against the baseline (where speculation stops paying), or the configuration chosen head to head (a best-K
    boundary)."""

    lo_point: str
    hi_point: str
    lo: float
    hi: float
    kinds: list[Literal["crossover", "best_k"]] = Field(description="crossover: a verdict changes; best_k: the "
                                                        "chosen configuration changes.")
    configs: list[str] = Field(default_factory=list, description="The configurations whose verdict changes.")
    chosen: list[str] = Field(default_factory=list, description="Where the choice changes: the configurations chosen "
                              "at the low and at the high end.")
    reasons: list[str] = Field(description="What changes, with the numbers at both ends.")
    open: bool = Field(default=False, description="Wider than the search's width with a load left to measure "
                       "inside: the search would measure there next.")

    @property
    def width(self) -> float:
        """High load over low load: how far apart the two ends are on a log scale."""
        return self.hi / self.lo

    @property
    def span(self) -> str:
        return f"{self.lo_point}..{self.hi_point}"


class SearchStep(BaseModel):
    """One point of a searched axis: a start point, or one the search chose, and why."""

    point_id: str
    load: float
    chosen_by: Literal["start", "model", "bisection", "edge"] = Field(
        description="start: measured first; model: where the step-cost model put the crossover or boundary (kept to "
        "the bracket's middle half); bisection: the bracket's geometric middle; edge: an end of the range, measured "
        "because nothing changed between the loads measured before.")
    bracket: Bracket | None = None
    predicted: float | None = Field(default=None, description="Where the model predicted the crossover or "
                                    "boundary inside the bracket (before clamping and rounding).")
    why: str


class CrossoverBracket(BaseModel):
    """Where one configuration's verdict turns from paying to slowing, between two measured loads."""

    config_id: str
    lo_point: str
    hi_point: str
    lo: float
    hi: float
    unclear_between: list[str] = Field(default_factory=list, description="Points between the two whose verdict is "
                                       "unclear (their interval straddles 1): the crossover lies within noise there.")

    @property
    def width(self) -> float:
        return self.hi / self.lo


class AxisSearch(BaseModel):
    """The search of one load axis."""

    axis: Literal["concurrency", "rate"]
    width: float
    max_points: int
    steps: list[SearchStep] = Field(default_factory=list, description="Every point of the axis, in the order "
                                    "measured.")
    brackets: list[Bracket] = Field(default_factory=list, description="After the last look: every bracket where "
                                    "something changes.")
    crossovers: list[CrossoverBracket] = Field(default_factory=list, description="After the last look: per "
                                               "configuration, the bracket its crossover lies in.")
    status: Literal["searching", "bracketed", "budget", "no_change"] = Field(
        default="searching", description="bracketed: every bracket is narrower than width (or holds no load left to "
        "measure); budget: max_points ran first; no_change: nothing changes between the measured loads.")
    why: str = ""

    def step(self, point_id: str) -> SearchStep | None:
        return next((s for s in self.steps if s.point_id == point_id), None)
