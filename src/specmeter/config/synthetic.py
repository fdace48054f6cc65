"""Synthetic acceptance: the engine accepts each drafted token at random with a set probability instead of
checking it against the target, so the acceptance is known in advance while every drafting and verification
cost stays real (outputs are not valid text: benchmarking only).

It is a measurement device, never a configuration to deploy: a ground truth for acceptance (the measured
per-position rates must come back as set, within sampling error), and a way to measure what speculation costs
apart from how good the drafter is; at AL = K + 1 (every draft accepted) it is the ceiling: the most any drafter
of that cost could give at that K on that engine and hardware.

Engines take either unconditional per-position rates or a target mean acceptance length, which each turns into
rates its own way (`rates_for`): llama.cpp solves for one per-step probability p (rates p, p^2, ...); vLLM 0.32
takes the minimum-variance schedule (1, ..., 1, fraction, 0, ...).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

LengthSchedule = Literal["geometric", "min_variance"]

# Engine extras that would switch synthetic acceptance on behind specmeter's back (llama.cpp's flags, vLLM's
# speculative-config fields): results would then never say the run is synthetic.
_SYNTHETIC_EXTRAS = ("spec_synth_rates", "spec_synth_len", "synthetic_acceptance_rates",
                     "synthetic_acceptance_length")
CEILING_NOTE = "100% acceptance"


class SyntheticAcceptance(BaseModel):
    """`{rates: [...]}` or `{length: L}`: what the engine accepts instead of verifying."""

    model_config = ConfigDict(extra="forbid")

    rates: list[float] | None = Field(
        default=None, description="Unconditional per-position acceptance: rates[i] = P(a step accepts at least "
        "i+1 drafted tokens); one per drafted position (K of them), each in [0, 1], non-increasing.")
    length: float | None = Field(
        default=None, description="Mean acceptance length AL to set, in [1, K+1] (the target's own token "
        "included); the engine turns it into per-position rates (K + 1: every draft accepted, the ceiling).")

    @model_validator(mode="after")
    def _one(self) -> SyntheticAcceptance:
        if (self.rates is None) == (self.length is None):
            raise ValueError("synthetic_acceptance takes exactly one of rates (one per drafted position) or length "
                             "(the mean acceptance length to set)")
        if self.rates is not None:
            if not self.rates:
                raise ValueError("synthetic_acceptance.rates is empty; give one rate per drafted position")
            for i, r in enumerate(self.rates):
                if not (math.isfinite(r) and 0.0 <= r <= 1.0):
                    raise ValueError(f"synthetic_acceptance.rates[{i}] = {r} is not a probability; give a value "
                                     "in [0, 1]")
                if i and r > self.rates[i - 1]:
                    raise ValueError(f"synthetic_acceptance.rates must not increase (rates[{i}] = {r} > rates[{i - 1}]"
                                     f" = {self.rates[i - 1]}): rates[i] is P(at least i+1 accepted)")
        elif self.length is not None and not (math.isfinite(self.length) and self.length >= 1.0):
            raise ValueError(f"synthetic_acceptance.length = {self.length} is below 1; an acceptance length counts "
                             "the target's own token, so give a value in [1, K+1]")
        return self

    def check_k(self, k: int) -> None:
        """What needs K: one rate per drafted position, a length of at most K + 1."""
        if self.rates is not None and len(self.rates) != k:
            raise ValueError(f"synthetic_acceptance.rates has {len(self.rates)} values but num_speculative_tokens is "
                             f"{k}: give one rate per drafted position")
        if self.length is not None and self.length > k + 1:
            raise ValueError(f"synthetic_acceptance.length = {self.length:g} exceeds K + 1 = {k + 1} (every draft "
                             f"accepted); give a value in [1, {k + 1}]")

    def rates_for(self, k: int, schedule: LengthSchedule = "geometric") -> list[float]:
        """The unconditional per-position rates the engine uses at K = `k`."""
        if self.rates is not None:
            return list(self.rates)
        assert self.length is not None
        if schedule == "min_variance":
            return min_variance_rates(self.length, k)
        return geometric_rates(self.length, k)

    def set_al(self, k: int) -> float:
        """The acceptance length set: 1 + the sum of the rates (a length is its own)."""
        return self.length if self.length is not None else 1.0 + sum(self.rates_for(k))

    def is_ceiling(self, k: int) -> bool:
        """Every drafted token accepted: AL = K + 1."""
        return all(r >= 1.0 for r in self.rates_for(k))

    def label(self, k: int) -> str:
        """'synthetic AL=3.4', or 'synthetic AL=5 ceiling' when every draft is accepted."""
        return f"synthetic AL={self.set_al(k):.3g}" + (" ceiling" if self.is_ceiling(k) else "")

    def id_part(self, k: int) -> str:
        """The part of a configuration id that tells it from the real drafter: 'synth-al3.4' or 'ceiling'."""
        return "ceiling" if self.is_ceiling(k) else f"synth-al{self.set_al(k):.3g}"


def geometric_rates(length: float, k: int) -> list[float]:
    """llama.cpp's solve (common_speculative_synth_rates_resolve): one probability p per position, rates p^(i+1),
    p found by 32 bisection steps so that p + p^2 + ... + p^K = length - 1."""
    if length >= k + 1:
        p = 1.0
    elif length <= 1.0:
        p = 0.0
    else:
        lo, hi = 0.0, 1.0
        for _ in range(32):
            mid = 0.5 * (lo + hi)
            total = sum(mid ** (j + 1) for j in range(k))
            lo, hi = (mid, hi) if total < length - 1.0 else (lo, mid)
        p = 0.5 * (lo + hi)
    return [p ** (i + 1) for i in range(k)]


def min_variance_rates(length: float, k: int) -> list[float]:
    """vLLM 0.32's schedule (SpeculativeConfig._acceptance_length_to_rates): whole positions always accepted,
    then the fraction, then never."""
    drafts = length - 1.0
    full = int(drafts)
    return ([1.0] * full + [drafts - full] + [0.0] * (k - full - 1))[:k]


def synthetic_extra(extra: Mapping[str, Any]) -> str | None:
    """The extra key that switches an engine's synthetic acceptance on, if any."""
    for key in _SYNTHETIC_EXTRAS:
        if key in extra:
            return key
    if extra.get("rejection_sample_method") == "synthetic":
        return "rejection_sample_method"
    return None
