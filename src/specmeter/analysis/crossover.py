"""Where speculative decoding stops paying as load grows.

SD spends spare compute; as batches fill, that spare compute disappears and the speedup falls below 1. The load
where that happens is what an operator needs (it is where a dynamic-K table should turn drafting down). Loads are
usually geometric (1, 4, 16, ...), so the crossing is interpolated linearly in log(load), and it is never placed
outside the measured loads: nothing was measured there.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Literal, NamedTuple

from specmeter.schemas.analysis import Crossover


class _Point(NamedTuple):
    load: float
    value: float
    low: float
    high: float


def find_crossover(
    config_id: str,
    axis: Literal["concurrency", "rate"],
    loads: Sequence[float],
    values: Sequence[float | None],
    lows: Sequence[float | None],
    highs: Sequence[float | None],
) -> Crossover:
    """Crossover of one candidate's throughput speedup from its values (and 95% bounds) per load.

    [low, high] is where the crossover plausibly lies: low is where the interval's lower bound first falls
    below 1 (the first load if it already is; None if it never does), high is where its upper bound last falls
    below 1 (None: it is still >= 1 at the largest load, so the crossover may lie beyond what was measured).
    A load without an interval lets its point estimate stand in for both bounds.
    """
    pts = _points(loads, values, lows, highs)
    if not pts:
        return Crossover(config_id=config_id, axis=axis, status="unclear",
                         note=f"{config_id}: no {axis} has a throughput speedup, so there is no crossover to find.")
    low, high = _first_drop(pts, [p.low for p in pts]), _last_drop(pts, [p.high for p in pts])
    changes = [i for i in range(len(pts) - 1) if (pts[i].value >= 1.0) != (pts[i + 1].value >= 1.0)]
    top = _fmt(pts[-1].load)
    if not changes:
        pays = pts[0].value >= 1.0
        status: Literal["always_pays", "never_pays"] = "always_pays" if pays else "never_pays"
        note = (f"{config_id}: throughput speedup is at least 1 at every measured {axis} up to {top}; "
                f"no crossover up to the largest measured load." if pays else
                f"{config_id}: throughput speedup is below 1 at every measured {axis} from {_fmt(pts[0].load)} "
                f"to {top}; it never pays here.")
        return Crossover(config_id=config_id, axis=axis, status=status, low=low, high=high, note=note)
    if len(changes) > 1 or pts[changes[0]].value < 1.0:
        return Crossover(config_id=config_id, axis=axis, status="unclear", low=low, high=high,
                         note=_unclear_note(config_id, pts, changes))
    i = changes[0]
    load = _interpolate(pts[i].load, pts[i].value, pts[i + 1].load, pts[i + 1].value)
    upper = _fmt(high) if high is not None else f"beyond the largest measured {axis} ({top})"
    note = (f"{config_id}: throughput speedup falls below 1 at {axis} ~{_fmt(load)} (between {_fmt(pts[i].load)} "
            f"and {_fmt(pts[i + 1].load)}); plausibly from {_fmt(low)} to {upper}.")
    return Crossover(config_id=config_id, axis=axis, status="crosses", load=load, low=low, high=high, note=note)


def _points(
    loads: Sequence[float],
    values: Sequence[float | None],
    lows: Sequence[float | None],
    highs: Sequence[float | None],
) -> list[_Point]:
    """Measured points sorted by load; loads without a speedup are skipped."""
    if not len(loads) == len(values) == len(lows) == len(highs):
        raise ValueError("loads, values, lows and highs must have the same length")
    if any(x <= 0 for x in loads):
        raise ValueError("loads must be positive (the crossover is interpolated in log(load))")
    return sorted(
        _Point(x, v, v if lo is None else lo, v if hi is None else hi)
        for x, v, lo, hi in zip(loads, values, lows, highs)
        if v is not None
    )


def _first_drop(pts: Sequence[_Point], series: Sequence[float]) -> float | None:
    """Load where `series` first falls below 1 (the first load if it starts below; None if it never does)."""
    if series[0] < 1.0:
        return pts[0].load
    for j in range(len(series) - 1):
        if series[j + 1] < 1.0:
            return _interpolate(pts[j].load, series[j], pts[j + 1].load, series[j + 1])
    return None


def _last_drop(pts: Sequence[_Point], series: Sequence[float]) -> float | None:
    """Load where `series` last falls below 1 (None if it is >= 1 at the largest load)."""
    if series[-1] >= 1.0:
        return None
    for j in range(len(series) - 2, -1, -1):
        if series[j] >= 1.0:
            return _interpolate(pts[j].load, series[j], pts[j + 1].load, series[j + 1])
    return pts[0].load


def _interpolate(x0: float, y0: float, x1: float, y1: float) -> float:
    """Load between x0 (y0 >= 1) and x1 (y1 < 1) where the line in log(load) through both points equals 1."""
    t = (y0 - 1.0) / (y0 - y1)
    return math.exp(math.log(x0) + t * (math.log(x1) - math.log(x0)))


def _unclear_note(config_id: str, pts: Sequence[_Point], changes: Sequence[int]) -> str:
    where = ", ".join(
        f"{'falls below' if pts[i].value >= 1.0 else 'rises above'} 1 "
        f"between {_fmt(pts[i].load)} and {_fmt(pts[i + 1].load)}"
        for i in changes
    )
    if len(changes) == 1:
        return (f"{config_id}: throughput speedup {where} as load grows, the opposite of the expected direction, "
                f"so no crossover is claimed.")
    return f"{config_id}: throughput speedup crosses 1 {len(changes)} times ({where}), so no single crossover."


def _fmt(x: float | None) -> str:
    return "?" if x is None else f"{x:.3g}"
