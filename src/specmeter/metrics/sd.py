"""The engine-neutral speculative-decoding record and the metric math over it.

Every engine adapter fills one `SDCounts` (from counter deltas or summed per-request stats); every SD
metric in the project is computed here from it and nowhere else. Definitions: shared/REFERENCE.md §1.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Literal

from pydantic import BaseModel, Field, computed_field, model_validator

Source = Literal["counters", "per_request"]


class SDCounts(BaseModel):
    """Raw speculative-decoding counts over some set of steps (a run, a category, one request).

    A step is one verification in which the engine drafted k >= 1 tokens and accepted a in [0, k];
    steps with nothing drafted are not steps (vLLM does not count them either).
    """

    source: Source
    num_steps: int = Field(ge=0, description="Verification steps that drafted at least one token.")
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
        if self.num_steps == 0:
            return None
        return 1.0 + self.num_accepted_tokens / self.num_steps

    @computed_field  # type: ignore[prop-decorator]
    @property
    def acceptance_rate(self) -> float | None:
        """AR = accepted / drafted. Falls mechanically with K: read it beside AL."""
        if self.num_draft_tokens == 0:
            return None
        return self.num_accepted_tokens / self.num_draft_tokens

    @computed_field  # type: ignore[prop-decorator]
    @property
    def mean_draft_length(self) -> float | None:
        """Mean tokens drafted per step (K for fixed K; lower under dynamic K or n-gram misses)."""
        if self.num_steps == 0:
            return None
        return self.num_draft_tokens / self.num_steps

    @computed_field  # type: ignore[prop-decorator]
    @property
    def per_position_rate(self) -> list[float]:
        """a_i = P(step accepts >= i+1 tokens).

        Denominator: steps that drafted position i when the engine says so (unbiased under dynamic K),
        otherwise all steps (vLLM's definition, biased low for positions some steps never drafted).
        """
        if self.num_steps == 0:
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
        """c_i = a_i / a_(i-1), a_(-1) = 1: P(accept position i | all before accepted)."""
        return conditional_rates(self.per_position_rate)

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

    def __add__(self, other: SDCounts) -> SDCounts:
        return sum_counts([self, other], source=self.source)


def conditional_rates(per_position: Sequence[float]) -> list[float]:
    """Turn unconditional per-position rates into conditional ones (0 where the previous is 0)."""
    out: list[float] = []
    prev = 1.0
    for rate in per_position:
        out.append(rate / prev if prev > 0 else 0.0)
        prev = rate
    return out


def _add_lists(a: list[int] | None, b: list[int] | None) -> list[int] | None:
    if a is None or b is None:
        return None
    n = max(len(a), len(b))
    return [(a[i] if i < len(a) else 0) + (b[i] if i < len(b) else 0) for i in range(n)]


def sum_counts(items: Iterable[SDCounts], source: Source = "per_request") -> SDCounts:
    """Pool counts over steps (the step-weighted aggregate). Optional lists stay None if any is."""
    steps = drafted = accepted = 0
    per_pos: list[int] | None = []
    drafted_pos: list[int] | None = []
    hist: list[int] | None = []
    for it in items:
        steps += it.num_steps
        drafted += it.num_draft_tokens
        accepted += it.num_accepted_tokens
        per_pos = _add_lists(per_pos, it.accepted_per_pos)
        drafted_pos = _add_lists(drafted_pos, it.drafted_per_pos)
        hist = _add_lists(hist, it.histogram)
    return SDCounts(
        source=source,
        num_steps=steps,
        num_draft_tokens=drafted,
        num_accepted_tokens=accepted,
        accepted_per_pos=per_pos or [],
        drafted_per_pos=drafted_pos if drafted_pos else None,
        histogram=hist if hist else None,
    )


def counts_from_steps(per_step_accepted: Sequence[int], per_step_drafted: Sequence[int]) -> SDCounts:
    """Exact counts from one request's per-step lists (vLLM `detailed` per-request stats).

    Steps that drafted nothing are skipped: they are not speculative steps.
    """
    if len(per_step_accepted) != len(per_step_drafted):
        raise ValueError(
            f"per_step_accepted has {len(per_step_accepted)} entries but per_step_drafted has "
            f"{len(per_step_drafted)}"
        )
    width = max((k for k in per_step_drafted), default=0)
    acc_pos = [0] * width
    dr_pos = [0] * width
    hist = [0] * (width + 1)
    steps = drafted = accepted = 0
    for a, k in zip(per_step_accepted, per_step_drafted):
        if k <= 0:
            continue
        if not 0 <= a <= k:
            raise ValueError(f"a step accepted {a} of {k} drafted tokens")
        steps += 1
        drafted += k
        accepted += a
        hist[a] += 1
        for i in range(k):
            dr_pos[i] += 1
        for i in range(a):
            acc_pos[i] += 1
    return SDCounts(
        source="per_request",
        num_steps=steps,
        num_draft_tokens=drafted,
        num_accepted_tokens=accepted,
        accepted_per_pos=acc_pos,
        drafted_per_pos=dr_pos,
        histogram=hist,
    )


def expected_acceptance_length(alpha: float, k: int) -> float:
    """Expected AL for iid per-token acceptance alpha and draft length k (Leviathan et al., eq. 1)."""
    if alpha == 1.0:
        return float(k + 1)
    return (1.0 - alpha ** (k + 1)) / (1.0 - alpha)


def expected_speedup(alpha: float, k: int, cost_ratio: float) -> float:
    """Expected walltime speedup in the memory-bound regime; cost_ratio = draft step / target step."""
    return expected_acceptance_length(alpha, k) / (k * cost_ratio + 1.0)
