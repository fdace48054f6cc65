"""The configuration to run at one load point.

The highest point estimate is not enough: if another configuration's interval overlaps the leader's, the data
cannot tell them apart, and the cheaper one (smaller K: less draft compute, less wasted verification) should
win. The baseline enters as K = 0 with a speedup of exactly 1, so speculation is only turned on where its
interval clears 1. Values within 1% of the leader also tie, as in vLLM's tune_speculative_k.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from specmeter.schemas.analysis import PointChoice

TIE_FRACTION = 0.01


@dataclass(frozen=True)
class Contender:
    """One configuration's throughput speedup at a load point (the baseline: k 0, value = low = high = 1.0)."""

    config_id: str
    k: int
    value: float | None
    low: float | None
    high: float | None


def choose(point_id: str, contenders: Sequence[Contender]) -> PointChoice:
    """Leader by point estimate; among the leader and its ties, the smallest K (then the highest value)."""
    valued = [c for c in contenders if c.value is not None]
    if not valued:
        raise ValueError(f"no contender at {point_id} has a speedup value")
    leader = max(valued, key=_value)
    tied = [(c, why) for c in valued if c is not leader and (why := _tie_reason(c, leader))]
    pool = [leader, *(c for c, _ in tied)]
    smallest_k = min(c.k for c in pool)
    best = max((c for c in pool if c.k == smallest_k), key=_value)
    return PointChoice(
        point_id=point_id,
        best_config_id=best.config_id,
        best_k=best.k,
        leader_config_id=leader.config_id,
        tied_with=[c.config_id for c, _ in tied],
        reason=_reason(leader, best, tied),
    )


def _value(c: Contender) -> float:
    assert c.value is not None  # callers pass only contenders that have a value
    return c.value


def _tie_reason(c: Contender, leader: Contender) -> str:
    """Why `c` ties with the leader ("" when it does not)."""
    if _value(c) >= _value(leader) - TIE_FRACTION * abs(_value(leader)):
        return "within 1%"
    return "interval overlaps" if _overlaps(c, leader) else ""


def _overlaps(a: Contender, b: Contender) -> bool:
    """A missing interval overlaps nothing: without one there is no evidence of a tie."""
    if a.low is None or a.high is None or b.low is None or b.high is None:
        return False
    return a.low <= b.high and b.low <= a.high


def _reason(leader: Contender, best: Contender, tied: Sequence[tuple[Contender, str]]) -> str:
    head = f"{leader.config_id} leads ({_fmt(leader)})"
    if not tied:
        return f"{head} with nothing tied, so it is chosen{': speculation stays off' if best.k == 0 else ''}."
    ties = f"{', '.join(f'{c.config_id} ({why})' for c, why in tied)} {'ties' if len(tied) == 1 else 'tie'} with it"
    if best is leader:
        return f"{head}; {ties}, but none has a smaller K, so the leader is chosen."
    if best.k == 0:
        return f"{head}; {ties}; a tie with the baseline keeps speculation off."
    return f"{head}; {ties}; the smaller K wins the tie: {best.config_id} ({_fmt(best)})."


def _fmt(c: Contender) -> str:
    if c.low is None or c.high is None:
        return f"{_value(c):.2f}x, no interval"
    return f"{_value(c):.2f}x [{c.low:.2f}, {c.high:.2f}]"
