"""What `specmeter vocab` finds (vocab.json): how much of the target's own output a pruned draft vocabulary
covers, the acceptance ceiling that implies per drafted position, and, beside a drafted run, the share of its
measured rejections the vocabulary alone forces."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

VOCAB_SCHEMA_VERSION = 1


class Estimate(BaseModel):
    """A share with its 95% interval (expanded percentile bootstrap over conversations; None: too few)."""

    value: float | None
    low: float | None = None
    high: float | None = None


class VocabMapInfo(BaseModel):
    name: str = Field(description="e.g. 'd2t', 'top 256'.")
    kind: Literal["d2t", "t2d", "ids", "top"]
    size: int = Field(description="Target token ids in the draft vocabulary.")
    source: str = Field(description="The file the map was read from, or the corpus it was built from.")
    corpus_tokens: int | None = Field(default=None, description="--top: tokens counted in the corpus.")
    in_sample: bool = Field(default=False, description="--top: the corpus holds the very outputs measured here "
                            "(a circular, optimistic map).")
    notes: list[str] = Field(default_factory=list)


class VocabCoverage(BaseModel):
    """One category (or 'all') of the baseline's outputs under one draft vocabulary."""

    category: str
    conversations: int
    requests: int
    tokens: int = Field(description="Output tokens of the baseline counted.")
    coverage: Estimate = Field(description="Share of the output tokens inside the draft vocabulary.")
    ceiling: list[Estimate] = Field(description="Per drafted position i at K = len(ceiling): the share of steps a "
                                    "perfect drafter restricted to the vocabulary accepts it in (drafting the "
                                    "target's own tokens up to the first outside it), unconditional like a_i.")
    al_ceiling: Estimate = Field(description="1 + the sum of the per-position ceilings: the perfect drafter's "
                                 "AL, which no drafter restricted to the vocabulary exceeds.")


class PositionShare(BaseModel):
    position: int
    measured: float | None = Field(description="The drafted run's a_i (steps that accepted position i / steps "
                                   "that drafted it).")
    ceiling: float | None
    explained: float | None = Field(description="(1 - ceiling) / (1 - measured): of the measured rejection rate "
                                    "at this position, the part even a perfect drafter with the vocabulary has.")


class DraftedShare(BaseModel):
    category: str
    steps: int | None
    positions: list[PositionShare]
    al_measured: float | None
    al_ceiling: float | None = Field(description="1 + the sum of the ceilings over the configuration's K positions.")
    al_explained: float | None = Field(description="(K + 1 - al_ceiling) / (K + 1 - al_measured): of the tokens "
                                       "per step lost to rejection, the share the vocabulary alone forces.")


class DraftedComparison(BaseModel):
    """One drafted configuration's measured acceptance against one vocabulary's ceiling."""

    run: str
    config_id: str
    label: str
    k: int
    source: Literal["per_request", "counters"] = Field(description="per_request: the requests' own SD stats "
                                                       "(categories too); counters: the run's, overall only.")
    overall: DraftedShare
    categories: list[DraftedShare] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)


class MapAnalysis(BaseModel):
    map: VocabMapInfo
    overall: VocabCoverage
    categories: list[VocabCoverage]
    drafted: list[DraftedComparison] = Field(default_factory=list)


class VocabReport(BaseModel):
    schema_version: int = VOCAB_SCHEMA_VERSION
    run: str
    baseline_id: str
    target_vocab_size: int | None
    k: int = Field(description="The K of the maps' ceilings (each drafted configuration is judged at its own K).")
    conversations: int
    requests: int
    tokens: int
    deduplicated: bool = Field(description="At temperature 0 each (conversation, turn) is counted once: every "
                               "point and repeat gave the same request.")
    maps: list[MapAnalysis]
    notes: list[str] = Field(default_factory=list)
