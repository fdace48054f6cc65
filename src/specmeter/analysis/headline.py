"""What a point's decisions read: the metric (throughput under concurrency, TPOT at a request rate) and the
confidence (95%, or what a sequential design's stopping look spent)."""

from __future__ import annotations

from specmeter.schemas.analysis import Metric, Ratio, Speedup
from specmeter.schemas.results import RunSummary


def headline(speedup: Speedup, axis: str) -> Ratio:
    """The ratio decisions use: output throughput under closed-loop concurrency; at a request rate the
    throughput is the offered rate on both sides (while the server keeps up), so TPOT decides there."""
    return speedup.output_throughput if axis == "concurrency" else speedup.tpot


def headline_metric(axis: str) -> Metric:
    """The metric decisions read at a point of this axis (see `headline`)."""
    return "output_throughput" if axis == "concurrency" else "tpot"


def decision_confidence(summary: RunSummary, point_id: str) -> float:
    """The confidence a point's decisions are read at: 95%, unless a sequential design stopped there at a look
    that had spent less alpha (see analysis.sequential)."""
    sampled = summary.sampled(point_id)
    return sampled.confidence if sampled is not None else 0.95
