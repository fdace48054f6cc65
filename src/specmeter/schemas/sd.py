"""The engine-neutral speculative-decoding record (every adapter fills it, every SD metric reads it)
and the run-level SD summary of one load point.

Definitions: shared/REFERENCE.md section 1.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from pydantic import BaseModel, Field, computed_field, model_validator

Source = Literal["counters", "per_request"]


class SDCounts(BaseModel):
    """Raw speculative-decoding counts over some set of steps (a run, a category, one request).

    A step is one verification in which the engine drafted k >= 1 tokens and accepted a in [0, k];
    steps with nothing drafted are not steps (vLLM does not count them either).
    """

    source: Source
    num_steps: int | None = Field(
        ge=0, description="Verification steps that drafted at least one token; None when the engine does not "
                          "count them (llama.cpp per request): AL and per-position rates are then unknown."
    )
    num_draft_tokens: int = Field(ge=0)
    num_accepted_tokens: int = Field(ge=0)
    accepted_per_pos: list[int] = Field(
        default_factory=list, description="Steps that accepted position i (i.e. >= i+1 tokens)."
    )
    drafted_per_pos: list[int] | None = Field(
        default=None, description="Steps that drafted position i; None when the engine does not say."
    )
    histogram: list[int] | None = Field(
        default=None, description="Steps with exactly j accepted tokens, index j; None if unknown."
    )
    tree: bool = Field(
        default=False, description="The steps drafted a token tree (the configuration's spec says so): drafted "
        "tokens count tree nodes, accepted ones one path through it, and accepted_per_pos[d] counts the steps whose "
        "path reached depth d + 1. Per-position chain rates do not apply; per-depth rates do."
    )

    @model_validator(mode="after")
    def _consistent(self) -> SDCounts:
        if self.num_accepted_tokens > self.num_draft_tokens:
            raise ValueError(
                f"accepted tokens ({self.num_accepted_tokens}) exceed drafted tokens ({self.num_draft_tokens})"
            )
        if any(v < 0 for v in self.accepted_per_pos):
            raise ValueError("per-position accepted counts must be >= 0")
        return self

    # ---- derived metrics -------------------------------------------------------------------------
    @computed_field  # type: ignore[prop-decorator]
    @property
    def acceptance_length(self) -> float | None:
        """AL = 1 + accepted / steps (includes the target's bonus token)."""
        if not self.num_steps:
            return None
        return 1.0 + self.num_accepted_tokens / self.num_steps

    @computed_field  # type: ignore[prop-decorator]
    @property
    def acceptance_rate(self) -> float | None:
        """AR = accepted / drafted. Falls mechanically with K: read it beside AL. For a tree: accepted over the tree
        nodes verified, which falls with the tree's width."""
        if self.num_draft_tokens == 0:
            return None
        return self.num_accepted_tokens / self.num_draft_tokens

    @computed_field  # type: ignore[prop-decorator]
    @property
    def mean_draft_length(self) -> float | None:
        """Mean tokens drafted per step (K for fixed K; lower under dynamic K or n-gram misses)."""
        if not self.num_steps:
            return None
        return self.num_draft_tokens / self.num_steps

    @computed_field  # type: ignore[prop-decorator]
    @property
    def per_position_rate(self) -> list[float]:
        """a_i = P(step accepts >= i+1 tokens).

        Denominator: steps that drafted position i when the engine says so (unbiased under dynamic K),
        otherwise all steps (vLLM's definition, biased low for positions some steps never drafted).
        Empty for a tree, which drafts many candidates per position: see `per_depth_rate`.
        """
        if not self.num_steps or self.tree:
            return []
        out: list[float] = []
        for i, acc in enumerate(self.accepted_per_pos):
            denom = self.num_steps
            if self.drafted_per_pos is not None and i < len(self.drafted_per_pos):
                denom = self.drafted_per_pos[i]
            out.append(acc / denom if denom else 0.0)
        return out

    @computed_field  # type: ignore[prop-decorator]
    @property
    def conditional_rate(self) -> list[float]:
        """c_i = a_i / a_(i-1), a_(-1) = 1: P(accept position i | all before accepted). Empty for a tree."""
        return conditional_rates(self.per_position_rate)

    @computed_field  # type: ignore[prop-decorator]
    @property
    def per_depth_rate(self) -> list[float] | None:
        """Trees only: P(a step's accepted path reaches depth d + 1), over every step (each step's tree spans
        every depth it was grown to); None for a chain, and empty where the engine counts no depths."""
        if not self.tree:
            return None
        if not self.num_steps:
            return []
        return [acc / self.num_steps for acc in self.accepted_per_pos]

    @computed_field  # type: ignore[prop-decorator]
    @property
    def histogram_fraction(self) -> list[float] | None:
        """h_j = fraction of steps with exactly j accepted tokens."""
        if self.histogram is None:
            return None
        total = sum(self.histogram)
        if total == 0:
            return None
        return [c / total for c in self.histogram]

def conditional_rates(per_position: Sequence[float]) -> list[float]:
    """Turn unconditional per-position rates into conditional ones (0 where the previous is 0)."""
    out: list[float] = []
    prev = 1.0
    for rate in per_position:
        out.append(rate / prev if prev > 0 else 0.0)
        prev = rate
    return out


class SyntheticPosition(BaseModel):
    """One drafted position of a synthetic-acceptance run: the rate set, the rate expected once the steps that
    drafted fewer positions are accounted for, and the rate measured, all per step over every step."""

    position: int
    set_rate: float = Field(description="P(a step that drafts this position accepts it), as set (unconditional).")
    drafted_share: float = Field(description="Share of the steps that drafted this position (1: every step did).")
    expected: float = Field(description="set_rate x drafted_share: the share of all steps expected to accept it.")
    measured: float = Field(description="Steps that accepted it / all steps, as the engine counted them.")
    se: float = Field(description="Sampling error of measured: sqrt(expected (1 - expected) / steps).")
    z: float | None = Field(description="(measured - expected) / se; None where se is 0 (then only equality fits).")


class SyntheticCheck(BaseModel):
    """Synthetic acceptance measured against what was set: a ground truth the engine's numbers must meet."""

    ceiling: bool = Field(description="Every draft set to be accepted (AL = K + 1).")
    set_al: float = Field(description="1 + the sum of the set rates.")
    steps: int
    drafted: int = Field(description="Draft tokens the engine counted.")
    expected_drafted: float = Field(description="Draft tokens expected from the drafted shares (K per step where "
                                    "no step drafted fewer).")
    drafted_basis: Literal["engine", "output_cap", "every_step_k"] = Field(
        description="Where the drafted shares come from: the engine's drafted-per-position counts; the engine's "
        "rule that a draft fits the request's remaining output (expected over the requests' lengths); or K on "
        "every step.")
    positions: list[SyntheticPosition]
    expected_al: float = Field(description="1 + the sum of the expected per-position shares.")
    measured_al: float
    al_se: float
    al_z: float | None
    z_limit: float = Field(description="|z| above this is outside sampling error (99% over all positions and AL).")
    all_accepted: bool | None = Field(default=None, description="Ceiling only: the engine accepted every token it "
                                      "drafted, so every step that drafted K emitted K + 1.")
    within: bool | None = Field(description="Every position and AL within sampling error (None: cannot say).")
    note: str | None = None


class SDSummary(BaseModel):
    """SD of one load point: counter deltas, per-request sums, whether they agree, and which is the
    headline (`reference`)."""

    available: bool
    reason: str | None = None
    counters: SDCounts | None = None
    counters_invalid_reason: str | None = None
    per_request: SDCounts | None = None
    per_request_mean_al: float | None = None
    requests_with_stats: int = 0
    agree: bool | None = None
    agreement: str | None = None
    foreign_traffic: str | None = None
    reference: Literal["counters", "per_request"] | None = None
    stalled: bool = Field(default=False, description="Speculation was configured but nothing was drafted while "
                                                     "requests completed: it never started, or stopped.")
    not_available: dict[str, str] = Field(default_factory=dict,
                                          description="Numbers this engine does not give exactly, and why.")
    synthetic: SyntheticCheck | None = Field(default=None, description="Synthetic acceptance only: measured "
                                             "against set.")

    @property
    def headline(self) -> SDCounts | None:
        if self.reference == "counters":
            return self.counters
        if self.reference == "per_request":
            return self.per_request
        return None
