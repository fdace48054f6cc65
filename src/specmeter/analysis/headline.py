"""What a point's decisions read: the metric its load kind names (throughput under concurrency, TPOT at a
request rate) and the confidence (95%, or what a sequential design's stopping look spent)."""

from __future__ import annotations

from specmeter.config.models import LoadPoint
from specmeter.load.kinds import kind_of
from specmeter.load.kinds.base import HeadlineMetric
from specmeter.schemas.analysis import Ratio, Speedup
from specmeter.schemas.results import RunSummary


def headline_metric(point: LoadPoint) -> HeadlineMetric:
    """The metric decisions read at this point: output throughput under closed-loop concurrency; at a request
    rate the throughput is the offered rate on both sides (while the server keeps up), so TPOT decides there."""
    return kind_of(point).headline_metric


def headline(speedup: Speedup, point: LoadPoint) -> Ratio:
    """The ratio decisions use at this point (see `headline_metric`)."""
    return speedup.output_throughput if headline_metric(point) == "output_throughput" else speedup.tpot


def decision_confidence(summary: RunSummary, point_id: str) -> float:
    """The confidence a point's decisions are read at: 95%, unless a sequential design stopped there at a look
    that had spent less alpha (see analysis.sequential)."""
    sampled = summary.sampled(point_id)
    return sampled.confidence if sampled is not None else 0.95
