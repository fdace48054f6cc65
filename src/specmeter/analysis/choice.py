"""The configuration to run at one load point.

The highest point estimate is not enough: if another configuration's interval overlaps the leader's, the data
cannot tell them apart, and the cheaper one (smaller K: less draft compute, less wasted verification) should
win. The baseline enters as K = 0 with a speedup of exactly 1, so speculation is only turned on where its
interval clears 1. Values within 1% of the leader also tie, as in vLLM's tune_speculative_k.

The interval a choice reads covers both kinds of doubt: the paired bootstrap interval (which requests
happened to be sent) and, with repeats, the spread between repeats (machine drift between runs, which a
single run's interval does not see), as median +- 1.4826 x MAD, the robust standard deviation
tune_speculative_k penalises by.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from specmeter.schemas.analysis import PointChoice, Ratio

TIE_FRACTION = 0.01
MAD_TO_SIGMA = 1.4826  # MAD of a normal sample x this = its standard deviation


@dataclass(frozen=True)
class Contender:
    """One configuration's throughput speedup at a load point (the baseline: k 0, value = low = high = 1.0)."""

    config_id: str
    k: int
    value: float | None
    low: float | None
    high: float | None

    @classmethod
    def of(cls, config_id: str, k: int, ratio: Ratio) -> Contender:
        low, high = decision_bounds(ratio)
        return cls(config_id, k, ratio.value, low, high)


def decision_bounds(ratio: Ratio) -> tuple[float | None, float | None]:
    """The bootstrap interval widened to the repeats' median +- 1.4826 x MAD (when there are repeats)."""
    low, high = ratio.ci95_low, ratio.ci95_high
    if ratio.median is None or ratio.mad is None:
        return low, high
    spread = MAD_TO_SIGMA * ratio.mad
    r_low, r_high = ratio.median - spread, ratio.median + spread
    return (r_low if low is None else min(low, r_low)), (r_high if high is None else max(high, r_high))


def choose(point_id: str, contenders: Sequence[Contender]) -> PointChoice:
    """The smallest K no other contender clearly beats (then the highest value among that K).

    A contender is clearly beaten when another's interval lies wholly above its own and it is not within 1%
    of the leader. So the leader is chosen only where its interval clears every smaller K's, and a K whose
    interval still reaches the baseline's 1.0 cannot turn speculation off where a smaller K clearly pays.
    """
    valued = [c for c in contenders if c.value is not None]
    if not valued:
        raise ValueError(f"no contender at {point_id} has a speedup value")
    leader = max(valued, key=_value)
    tied = [(c, why) for c in valued
            if c is not leader and not _beaten(c, valued, leader) and (why := _tie_reason(c, leader))]
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


def _bounds(c: Contender) -> tuple[float, float]:
    """A missing interval is the point estimate alone: without one there is no evidence of a tie."""
    if c.low is None or c.high is None:
        return _value(c), _value(c)
    return c.low, c.high


def _within(c: Contender, leader: Contender) -> bool:
    return _value(c) >= _value(leader) - TIE_FRACTION * abs(_value(leader))


def _beaten(c: Contender, others: Sequence[Contender], leader: Contender) -> bool:
    return not _within(c, leader) and any(_bounds(d)[0] > _bounds(c)[1] for d in others if d is not c)


def _tie_reason(c: Contender, leader: Contender) -> str:
    """Why `c`, not clearly beaten, ties with the leader."""
    return "within 1%" if _within(c, leader) else "interval overlaps"


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
