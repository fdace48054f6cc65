"""What the K table buys on a trace's traffic (analysis/trace_answer.py): each batch size's speedup weighed by the
baseline's time at it, on summaries and tables built by hand."""

from __future__ import annotations

import numpy as np
import pytest

from specmeter.analysis.decide import analyze
from specmeter.analysis.recommend import recommend
from specmeter.analysis.trace_answer import trace_gain, trace_gains, weighted_gain
from specmeter.config.models import EngineSpec, LoadSpec, SpecConfig
from specmeter.plans.run import BASELINE
from specmeter.schemas.metrics import Distribution, LatencySummary, RunningBatch
from specmeter.schemas.plan import Plan, PlannedConfig, Role, WorkloadSelection
from specmeter.schemas.recommend import DrafterRecommendation, KRange, Score, Segment
from specmeter.schemas.records import RequestRecord
from specmeter.schemas.results import ConfigResult, PointResult, RunSummary
from specmeter.schemas.sd import SDSummary

K2, K4 = "draft_model-k2", "draft_model-k4"


def spec(k: int) -> SpecConfig:
    return SpecConfig.model_validate({"method": "draft_model", "num_speculative_tokens": k,
                                      "draft_model": "models/demo-draft"})


def latency() -> LatencySummary:
    d = Distribution(count=10)
    return LatencySummary(num_requests=10, num_ok=10, wall_s=10.0, output_tokens=1000, prompt_tokens=100,
                          output_tokens_per_s=100.0, requests_per_s=1.0, ttft_s=d, tpot_s=d, inter_chunk_s=d,
                          itl_per_token_s=d, e2e_s=d, queued_s=d, tokens_per_chunk=1.0)


def point(pid: str, histogram: dict[int, int] | None, repeat: int = 0) -> PointResult:
    batch = None if histogram is None else RunningBatch(
        gauge="vllm:num_requests_running", interval_s=0.25, samples=sum(histogram.values()), histogram=histogram,
        mean=sum(b * n for b, n in histogram.items()) / max(1, sum(histogram.values())), max=max(histogram, default=0))
    return PointResult(point_id=pid, repeat=repeat, latency=latency(), sd=SDSummary(available=False),
                       running_batch=batch)


def trace_summary(histograms: dict[str, list[dict[int, int] | None]], scales: tuple[float, ...] = (1.0,),
                  ) -> RunSummary:
    """A trace replay whose baseline sampled `histograms[point]` (one per repeat); the candidates measured nothing."""
    engine = EngineSpec(model="models/demo-target", max_num_seqs=16)
    configs = [PlannedConfig(id=BASELINE, role=Role.baseline, spec=SpecConfig(), engine=engine, server=BASELINE),
               *(PlannedConfig(id=cid, role=Role.candidate, spec=spec(k), engine=engine, server=cid)
                 for cid, k in ((K2, 2), (K4, 4)))]
    plan = Plan(kind="sweep", configs=configs, load=LoadSpec(trace_scale=list(scales)),
                workload=WorkloadSelection(dataset="sample"))
    base = ConfigResult(config_id=BASELINE, role=Role.baseline, spec_label="off",
                        points=[point(pid, h, r) for pid, per in histograms.items() for r, h in enumerate(per)])
    return RunSummary(specmeter_version="0", created_utc="2026-01-01T00:00:00Z", status="complete", plan=plan,
                      configs=[base])


def scores(chosen: str, k: int, value: float, low: float, high: float) -> list[Score]:
    return [Score(config_id=BASELINE, k=0, value=1.0, low=1.0, high=1.0),
            Score(config_id=chosen, k=k, value=value, low=low, high=high)]


def table() -> DrafterRecommendation:
    """K=4 measured at batch 1 (1.6x [1.5, 1.7]), K=2 measured at 4 (1.2x [1.1, 1.3]) with batch 2-3 interpolated
    between them, K=0 measured at 8 and not measured beyond."""
    segments = [
        Segment(start=1, end=1, k=4, basis="measured", scores=scores(K4, 4, 1.6, 1.5, 1.7), chosen=K4, reason=""),
        Segment(start=2, end=2, k=4, basis="interpolated", reason=""),
        Segment(start=3, end=3, k=2, basis="interpolated", reason=""),
        Segment(start=4, end=4, k=2, basis="measured", scores=scores(K2, 2, 1.2, 1.1, 1.3), chosen=K2, reason=""),
        Segment(start=5, end=7, k=2, basis="interpolated", reason=""),
        Segment(start=8, end=10, k=0, basis="measured", scores=scores(K2, 2, 0.9, 0.8, 1.0), chosen=BASELINE,
                reason=""),
        Segment(start=11, end=16, k=0, basis="unmeasured", reason=""),
    ]
    ranges = [KRange(start=1, end=2, k=4, bases=["measured"]), KRange(start=3, end=7, k=2, bases=["measured"]),
              KRange(start=8, end=16, k=0, bases=["measured"])]
    return DrafterRecommendation(drafter="draft_model demo-draft", candidates=[K2, K4], ranges=ranges,
                                 segments=segments, spec=None, static_k=2, static_config_id=K2, static_reason="",
                                 score=None)


def test_the_gain_is_the_baseline_time_over_the_time_each_batch_size_takes_at_its_speedup() -> None:
    # 20 samples idle, then 40 at batch 1, 20 at 2, 20 at 4, 10 at 6 and 10 at 12 (of 100 busy).
    summary = trace_summary({"t1x": [{0: 20, 1: 40, 2: 20, 4: 20, 6: 10, 12: 10}]})
    g = trace_gain(summary, "t1x", table(), BASELINE)
    # batch 2 runs batch 1's K=4 (interpolated), 6 runs batch 4's K=2; 12 drafts nothing.
    expected = 1 / (0.4 / 1.6 + 0.2 / 1.6 + 0.2 / 1.2 + 0.1 / 1.2 + 0.1 / 1.0)
    assert g.gain == pytest.approx(expected)
    assert g.low == pytest.approx(1 / (0.4 / 1.5 + 0.2 / 1.5 + 0.2 / 1.1 + 0.1 / 1.1 + 0.1 / 1.0))
    assert g.high == pytest.approx(1 / (0.4 / 1.7 + 0.2 / 1.7 + 0.2 / 1.3 + 0.1 / 1.3 + 0.1 / 1.0))
    assert g.low is not None and g.high is not None and g.low < g.gain < g.high
    assert g.idle_share == pytest.approx(20 / 120) and g.samples == 120
    assert g.measured_share == pytest.approx(0.4 + 0.2)  # batch 1 and 4; 12 is beyond the measured batches
    assert [(s.start, s.end, s.k) for s in g.time] == [(1, 2, 4), (3, 7, 2), (8, 16, 0)]
    assert [s.share for s in g.time] == pytest.approx([0.6, 0.3, 0.1])
    assert g.reason is None and g.weighed_by == BASELINE


def test_repeats_pool_their_samples_and_a_batch_beyond_the_table_runs_its_last_range() -> None:
    pooled = trace_gain(trace_summary({"t1x": [{1: 30}, {1: 10, 40: 40}]}), "t1x", table(), BASELINE)
    assert pooled.samples == 80
    assert pooled.gain == pytest.approx(1 / (0.5 / 1.6 + 0.5 / 1.0))


def test_the_harmonic_mean_sits_below_the_arithmetic_mean_of_the_same_weights() -> None:
    weights, speeds = {1: 0.5, 8: 0.5}, {1: 2.0, 8: 1.0}
    gain = weighted_gain(weights, speeds)
    assert gain == pytest.approx(4 / 3)
    assert gain is not None and gain < sum(w * speeds[b] for b, w in weights.items())
    assert weighted_gain(weights, {1: 2.0, 8: None}) is None


def test_without_samples_the_answer_is_one_line_saying_so() -> None:
    summary = trace_summary({"t1x": [None]})
    g = trace_gain(summary, "t1x", table(), BASELINE)
    assert g.gain is None and g.low is None and g.samples == 0
    assert g.reason is not None and "not sampled" in g.reason and "t1x" in g.reason and "\n" not in g.reason
    idle = trace_gain(trace_summary({"t1x": [{0: 5}]}), "t1x", table(), BASELINE)
    assert idle.gain is None and idle.idle_share == 1.0 and idle.reason is not None


def test_a_k_no_measured_point_ran_has_no_speedup() -> None:
    rec = table()
    rec.segments[1] = Segment(start=2, end=2, k=3, basis="predicted", reason="")
    g = trace_gain(trace_summary({"t1x": [{1: 5, 2: 5}]}), "t1x", rec, BASELINE)
    assert g.gain is None and g.reason is not None and "K=3" in g.reason


def test_only_trace_points_get_an_answer() -> None:
    summary = trace_summary({"t1x": [{1: 4}], "t2x": [{2: 4}]}, scales=(1.0, 2.0))
    assert [g.point_id for g in trace_gains(summary, table(), BASELINE)] == ["t1x", "t2x"]
    closed = summary.model_copy(update={"plan": summary.plan.model_copy(
        update={"load": LoadSpec(concurrency=[1, 4])})})
    assert trace_gains(closed, table(), BASELINE) == []


def _records(cid: str, pid: str, speedup: float) -> list[RequestRecord]:
    rng = np.random.default_rng(len(cid))
    hard = 1.0 + 0.5 * np.sin(np.arange(30))
    e2e = hard / speedup * (1 + 0.01 * rng.standard_normal(30))
    return [RequestRecord(config_id=cid, point_id=pid, conversation_id=f"q{i}", ok=True, ttft_s=0.01,
                          e2e_s=float(e2e[i]) + 0.01, output_tokens=100) for i in range(30)]


def test_a_trace_replay_recommendation_carries_its_answer_for_each_trace_point() -> None:
    summary = trace_summary({"t1x": [{0: 10, 1: 60, 2: 30}]})
    summary.configs += [ConfigResult(config_id=cid, role=Role.candidate, spec_label=cid,
                                     points=[point("t1x", {1: 70, 2: 30})]) for cid in (K2, K4)]
    records = [*_records(BASELINE, "t1x", 1.0), *_records(K2, "t1x", 1.3), *_records(K4, "t1x", 1.5)]
    summary.analysis = analyze(summary, records)
    rec = recommend(summary, records)
    assert rec.best is not None and [g.point_id for g in rec.on_trace] == ["t1x"]
    g = rec.on_trace[0]
    chosen = next(s for s in rec.best.segments if s.basis == "measured")
    score = next(s for s in chosen.scores if s.config_id == chosen.chosen)
    assert g.gain == pytest.approx(score.value)  # every busy sample ran the one measured stretch's K
    assert sum(s.share for s in g.time) == pytest.approx(1.0)
