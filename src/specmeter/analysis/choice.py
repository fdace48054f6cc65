"""The configuration to run at one load point, decided head to head.

Each configuration's interval against the baseline is not a test between two candidates: both share the
baseline's noise, so two such intervals overlap long after the candidates themselves are told apart (on the
demo, K = 2 1.55x [1.46, 1.63] and K = 4 1.67x [1.56, 1.79] overlapped while K = 4 beat K = 2 by 1.08x
[1.04, 1.13] on the same requests). So contenders are compared with each other, paired on the requests both
ran, and walked from the cheapest to the costliest: the baseline (K = 0) first, then by K, then by what the
drafter costs per step. A costlier configuration replaces the current choice only when its head-to-head
interval lies wholly above 1 + min gain; otherwise the cheaper one stays (less draft compute, less wasted
verification). So speculation is on only where the winner beats the baseline by that same rule. A tie (the
interval straddles 1 + min gain but ends inside the plan's indifference zone: the costlier at most, e.g., 3% better)
keeps the cheaper too: it is within that much of the better, and the evidence says how close.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from specmeter.config.models import SpecMethod
from specmeter.schemas.analysis import HeadToHead, PointChoice
from specmeter.schemas.plan import PlannedConfig

# What a drafter costs per step, cheapest first: lookup drafters run no model; MTP heads and EAGLE heads are
# small; a separate draft model costs the most. Breaks ties between configurations with the same K.
DRAFTER_COST = {SpecMethod.none: 0, SpecMethod.ngram: 1, SpecMethod.suffix: 1, SpecMethod.mtp: 2,
                SpecMethod.eagle: 3, SpecMethod.eagle3: 3, SpecMethod.draft_model: 4}

Duel = Callable[[str, str], HeadToHead]  # (challenger id, incumbent id) -> the paired comparison


@dataclass(frozen=True)
class Contender:
    """One configuration at a point. `value`: its objective against the baseline (1 for the baseline), shown
    to say who led; the choice itself reads only head-to-head comparisons."""

    config_id: str
    k: int
    value: float | None
    cost: tuple[int, int, int] = (0, 0, 0)

    @classmethod
    def of(cls, config_id: str, k: int, method: SpecMethod, value: float | None, order: int = 0) -> Contender:
        return cls(config_id, k, value, (k, DRAFTER_COST[method], order))


def contenders(base_id: str, candidates: Sequence[tuple[PlannedConfig, float | None]],
               base_value: float = 1.0) -> list[Contender]:
    """The baseline (K = 0) and each candidate with its value, in the order given (which breaks cost ties)."""
    return [Contender.of(base_id, 0, SpecMethod.none, base_value),
            *(Contender.of(c.id, c.k, c.spec.method, value, i) for i, (c, value) in enumerate(candidates))]


def choose(point_id: str, contenders: Sequence[Contender], duel: Duel, *, min_gain: float) -> PointChoice:
    """Walk the contenders from the cheapest: each replaces the current choice only when it beats it head to
    head by more than `min_gain` (a tie keeps the current one). Contenders without a value (nothing measured)
    are left out."""
    valued = sorted((c for c in contenders if c.value is not None), key=lambda c: c.cost)
    if not valued:
        raise ValueError(f"no contender at {point_id} has a value")
    best = valued[0]
    evidence: list[HeadToHead] = []
    for challenger in valued[1:]:
        h2h = duel(challenger.config_id, best.config_id)
        evidence.append(h2h)
        if h2h.outcome == "beats":
            best = challenger
    leader = max(valued, key=lambda c: c.value or 0.0)
    return PointChoice(point_id=point_id, best_config_id=best.config_id, best_k=best.k,
                       leader_config_id=leader.config_id, reason=_reason(valued[0], best, evidence),
                       evidence=evidence, min_gain=min_gain)


def _reason(first: Contender, best: Contender, evidence: Sequence[HeadToHead]) -> str:
    if not evidence:
        return f"{best.config_id} is the only contender measured."
    won = [h for h in evidence if h.outcome == "beats"]
    if best is first:
        return (f"nothing beats {first.config_id} head to head by more than the minimum gain, so "
                f"{'speculation stays off' if best.k == 0 else 'the cheapest stays'}: "
                + "; ".join(h.summary() for h in evidence) + ".")
    lost = [h for h in evidence if h.outcome != "beats" and h.against == best.config_id]
    why = f"{best.config_id} is chosen: " + "; ".join(h.summary() for h in won)
    if lost:
        why += "; then " + "; ".join(h.summary() for h in lost)
    return why + "."
