"""A draft length K the sweep did not run, proposed by the step-cost model where it predicts that K beats the K
the sweep chose, and what its head-to-head measurement said there.

The proposal plan stores them (`Plan.proposed`: predicted, not yet measured); the answer decided on the sweep and
the proposals pooled carries them again with each contest's outcome (`Recommendation.proposed`).
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from specmeter.schemas.analysis import HeadToHead

ProposalOutcome = Literal["won", "lost", "tied", "unsettled"]


class Contest(BaseModel):
    """One measured stretch of the sweep's table a proposed K could win: the K chosen there and what the model
    predicts for both, at the engine batch the points ran."""

    point_ids: list[str] = Field(description="The measured points of the stretch (one, unless several points ran at "
                                 "the same engine batch).")
    batch: float = Field(description="The engine batch measured there, which both predictions are made at.")
    incumbent: str = Field(description="The configuration the sweep chose there (the baseline: speculation off).")
    incumbent_k: int = Field(ge=0)
    predicted: float = Field(description="The proposed K's predicted speedup over speculation off.")
    predicted_incumbent: float = Field(description="The incumbent's, by the same model; for speculation off, on the "
                                       "model's scale through `anchor`.")
    anchor: str | None = Field(default=None, description="Where speculation off was chosen: the drafter's measured K "
                               "that puts it on the model's scale (its predicted speedup over what it measured).")
    outcome: ProposalOutcome | None = Field(default=None, description="won: the walk on the pooled evidence chose "
                                            "it there; lost: a comparison settled against it; tied: the one that "
                                            "ended it was a tie (at most the indifference zone better), so the "
                                            "cheaper was kept; unsettled: it could not tell (None: not decided yet).")
    evidence: list[HeadToHead] = Field(default_factory=list, description="The head-to-head comparisons of the "
                                       "proposed K that the decision there read.")

    @property
    def edge(self) -> float:
        """The predicted speedup over the incumbent's, model against model."""
        return self.predicted / self.predicted_incumbent


class ProposedK(BaseModel):
    """One proposed configuration: the drafter's spec with this K, and the stretches it could win."""

    config_id: str
    drafter: str = Field(description="The drafter's label, as its recommendation names it.")
    k: int = Field(ge=1)
    contests: list[Contest]
    run: str | None = Field(default=None, description="The run directory that measured it, relative to the "
                            "sweep's (None: not measured yet).")

    @property
    def edge(self) -> float:
        """The largest predicted edge over its contests: what proposals are ranked by."""
        return max(c.edge for c in self.contests)
