"""How plots label each kind of load point (load/kinds registers the kinds; what they look like on a page is the
report's): the axis label, which points share a panel and its title, and a point's label on a categorical axis.
A new kind of load is one entry here beside its module in load/kinds."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from specmeter.config.models import ConcurrencyPoint, LoadPoint, RatePoint, TracePoint


@dataclass(frozen=True)
class LoadLabels:
    """One kind's labels; each function takes a point of that kind."""

    xlabel: str
    panel_key: Callable[[LoadPoint], str]  # points with the same key share one plot panel (one load axis)
    panel_title: Callable[[LoadPoint], str]
    short_label: Callable[[LoadPoint], str]  # the point on a categorical axis ("c=4")


def _concurrency(p: LoadPoint) -> ConcurrencyPoint:
    assert isinstance(p, ConcurrencyPoint)
    return p


def _rate(p: LoadPoint) -> RatePoint:
    assert isinstance(p, RatePoint)
    return p


def _trace(p: LoadPoint) -> TracePoint:
    assert isinstance(p, TracePoint)
    return p


def _rate_title(p: LoadPoint) -> str:
    r = _rate(p)
    shape = {"poisson": "Poisson", "gamma": f"gamma b={r.burstiness:g}", "constant": "constant"}[r.arrival]
    cap = f", at most {r.max_concurrency} in flight" if r.max_concurrency else ""
    return f"open loop, {shape} arrivals{cap}"


LABELS: dict[str, LoadLabels] = {
    "concurrency": LoadLabels(
        xlabel="concurrency (requests in flight)", panel_key=lambda p: "concurrency",
        panel_title=lambda p: "closed loop", short_label=lambda p: f"c={_concurrency(p).concurrency}"),
    "rate": LoadLabels(
        xlabel="request rate (req/s)",
        panel_key=lambda p: f"rate {_rate(p).arrival} {_rate(p).burstiness:g} {_rate(p).max_concurrency or ''}",
        panel_title=_rate_title, short_label=lambda p: f"{_rate(p).rate:g} req/s"),
    "trace": LoadLabels(
        xlabel="trace time scale (x the trace's own rate)", panel_key=lambda p: "trace",
        panel_title=lambda p: "trace replay", short_label=lambda p: f"{_trace(p).scale:g}x"),
}


def labels(point: LoadPoint) -> LoadLabels:
    return LABELS[point.kind]
