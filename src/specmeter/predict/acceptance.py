"""Acceptance profiles: what a drafter accepts per position, and the acceptance length (AL) it gives at any K.

A chain drafter's unconditional per-position rate a_i = P(a step accepts >= i + 1 tokens) does not depend on
K (drafting more tokens does not change whether the first ones are accepted), so one profile measured at K
gives AL(K') = 1 + a_0 + ... + a_(K'-1) for every K' <= K. A larger K's later positions were never measured:
they are extrapolated from the measured conditional rates c_i = a_i / a_(i-1) (the last one carried on), and
the interval then spans the smallest conditional rate measured to halfway between the largest and 1 (later
positions of a chain tend to be accepted more often, given the earlier ones), so it says how unsure that is.

For iid acceptance (every position accepted with probability a, given the ones before) a_i = a^(i+1) and
AL(K) = (1 - a^(K+1)) / (1 - a): the closed form of Leviathan et al.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from specmeter.schemas.sd import SDCounts, conditional_rates


def al_of(per_position: Sequence[float]) -> float:
    """AL from unconditional per-position rates: 1 + sum a_i (the expected count of accepted positions)."""
    return 1.0 + float(sum(per_position))


def accepted_variance(per_position: Sequence[float]) -> float:
    """Variance of the accepted count X of one step, from its unconditional per-position rates alone.

    X >= j + 1 implies X >= i + 1 for i < j, so E[X^2] = sum_ij P(X > i, X > j) = sum_ij a_max(i,j)."""
    rates = list(per_position)
    mean = sum(rates)
    second = sum(rates[max(i, j)] for i in range(len(rates)) for j in range(len(rates)))
    return max(0.0, second - mean * mean)


@dataclass(frozen=True)
class ALEstimate:
    """AL at one K, with the interval that sampling (and, past the measured positions, extrapolation) allows."""

    k: int
    al: float
    low: float
    high: float
    extrapolated: int = 0  # positions beyond the measured ones, whose rates were carried on


@dataclass(frozen=True)
class AcceptanceProfile:
    """Unconditional per-position acceptance rates and the evidence behind them.

    `steps[i]`: the verification steps position i was measured over (0 for a set profile, which has no
    sampling error). `design_effect`: how much wider than independent steps the spread really is (steps of one
    request are correlated; 1 when unknown)."""

    per_position: tuple[float, ...]
    steps: tuple[int, ...]
    source: str
    design_effect: float = 1.0
    category: str | None = None
    notes: tuple[str, ...] = field(default_factory=tuple)

    def __post_init__(self) -> None:
        if not self.per_position:
            raise ValueError(f"{self.source}: an acceptance profile needs at least one position's rate")
        if len(self.steps) != len(self.per_position):
            raise ValueError(f"{self.source}: {len(self.steps)} step counts for {len(self.per_position)} positions")
        if any(not 0.0 <= a <= 1.0 for a in self.per_position):
            raise ValueError(f"{self.source}: per-position rates must be in [0, 1], got {list(self.per_position)}")

    @classmethod
    def iid(cls, a: float, k: int, source: str | None = None) -> AcceptanceProfile:
        """An iid rate `a` as a profile over K positions (no sampling error: it is given, not measured)."""
        if not 0.0 <= a <= 1.0:
            raise ValueError(f"an acceptance rate is a probability in [0, 1], not {a}")
        return cls(per_position=tuple(a ** (i + 1) for i in range(k)), steps=(0,) * k,
                   source=source or f"iid acceptance rate {a:g}")

    @classmethod
    def given(cls, rates: Sequence[float], source: str | None = None) -> AcceptanceProfile:
        """Unconditional per-position rates given by a reader (non-increasing, as every chain's are)."""
        rates = [float(r) for r in rates]
        if any(b > a + 1e-12 for a, b in itertools.pairwise(rates)):
            raise ValueError(f"per-position rates are unconditional, so they cannot rise: {rates}")
        return cls(per_position=tuple(rates), steps=(0,) * len(rates),
                   source=source or "given rates " + ",".join(f"{r:g}" for r in rates))

    @classmethod
    def from_counts(cls, measured: Sequence[tuple[int, SDCounts]], source: str, *, category: str | None = None,
                    design_effect: float = 1.0) -> AcceptanceProfile | None:
        """Pool the SD counts of one drafter measured at any Ks, as (K, counts): position i's rate is its
        accepted count over the steps that drafted it (the engine's count where it gives one, else every step of
        a configuration whose K reaches i). None when no step was counted."""
        width = max((k for k, c in measured if c.num_steps), default=0)
        accepted, steps = [0] * width, [0] * width
        for k, c in measured:
            if not c.num_steps:
                continue
            for i in range(k):
                drafted = c.drafted_per_pos[i] if c.drafted_per_pos and i < len(c.drafted_per_pos) else c.num_steps
                steps[i] += drafted
                accepted[i] += c.accepted_per_pos[i] if i < len(c.accepted_per_pos) else 0
        if not width or not steps[0]:
            return None
        rates = [accepted[i] / steps[i] if steps[i] else 0.0 for i in range(width)]
        # Pooled from different K, a later position may read a hair above an earlier one: keep it a chain.
        for i in range(1, width):
            rates[i] = min(rates[i], rates[i - 1])
        return cls(per_position=tuple(rates), steps=tuple(steps), source=source, category=category,
                   design_effect=max(1.0, design_effect))

    @property
    def width(self) -> int:
        """Positions measured (or given)."""
        return len(self.per_position)

    @property
    def conditional(self) -> list[float]:
        return conditional_rates(self.per_position)

    def rates_for(self, k: int, carry: float | None = None) -> list[float]:
        """The per-position rates at K: measured ones, then the last conditional rate (or `carry`) carried on."""
        rates = list(self.per_position[:k])
        if k > self.width:
            cond = self.conditional
            c = cond[-1] if carry is None else carry
            prev = rates[-1]
            for _ in range(k - self.width):
                prev *= c
                rates.append(prev)
        return rates

    def al(self, k: int, z: float = 1.96) -> ALEstimate:
        """AL at K with an interval: sampling error on the measured positions (z standard errors, widened by
        the design effect), and past them the range of measured conditional rates carried on."""
        if k < 1:
            return ALEstimate(k=k, al=1.0, low=1.0, high=1.0)
        rates = self.rates_for(k)
        al = al_of(rates)
        measured = rates[: min(k, self.width)]
        n = min((s for s in self.steps[: len(measured)] if s > 0), default=0)
        se = math.sqrt(accepted_variance(measured) * self.design_effect / n) if n else 0.0
        low, high = al - z * se, al + z * se
        extra = max(0, k - self.width)
        if extra:
            # A chain's conditional rates tend to rise with depth (a draft on track stays on track), and one
            # or two measured rates say little of the trend: the upper end carries a rate halfway from the
            # largest measured one to 1, the lower end the smallest measured.
            cond = [c for c in self.conditional if c > 0] or [0.0]
            low_tail = self.rates_for(k, carry=min(cond))[self.width:]
            high_tail = self.rates_for(k, carry=(1.0 + max(cond)) / 2)[self.width:]
            tail = rates[self.width:]
            low -= sum(tail) - sum(low_tail)
            high += sum(high_tail) - sum(tail)
        return ALEstimate(k=k, al=al, low=max(1.0, low), high=min(float(k + 1), high), extrapolated=extra)
