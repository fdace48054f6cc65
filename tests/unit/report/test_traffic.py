"""The traffic's tables (report/traffic.py) and the trace's answer line (report/recommendation.py), on results
built by hand."""

from __future__ import annotations

import pytest

from specmeter.config.models import EngineSpec, LoadSpec, SpecConfig
from specmeter.plans.run import BASELINE
from specmeter.report.recommendation import deploy_lines, trace_text
from specmeter.report.traffic import batch_bins, batch_time_table, batch_time_text, length_table
from specmeter.schemas.metrics import (
    CategorySD,
    Distribution,
    LatencySummary,
    LengthBreakdown,
    LengthBucket,
    RunningBatch,
)
from specmeter.schemas.plan import Plan, PlannedConfig, Role, WorkloadSelection
from specmeter.schemas.recommend import BatchShare, DrafterRecommendation, KRange, Recommendation, TraceGain
from specmeter.schemas.results import ConfigResult, PointResult, RunSummary
from specmeter.schemas.sd import SDCounts, SDSummary


def latency() -> LatencySummary:
    d = Distribution(count=1)
    return LatencySummary(num_requests=1, num_ok=1, wall_s=1.0, output_tokens=10, prompt_tokens=10,
                          output_tokens_per_s=10.0, requests_per_s=1.0, ttft_s=d, tpot_s=d, inter_chunk_s=d,
                          itl_per_token_s=d, e2e_s=d, queued_s=d, tokens_per_chunk=1.0)


def bucket(low: int, high: int | None, steps: int, accepted: int) -> LengthBucket:
    c = SDCounts(source="per_request", num_steps=steps, num_draft_tokens=steps * 2, num_accepted_tokens=accepted)
    return LengthBucket(low=low, high=high, acceptance=CategorySD(
        category=f"{low}-{high}", requests=3, counts=c, al_step_weighted=c.acceptance_length, al_request_mean=None,
        acceptance_rate=c.acceptance_rate, per_position_rate=[], conditional_rate=[]))


def summary(load: LoadSpec, histogram: dict[int, int], lengths: LengthBreakdown | None = None) -> RunSummary:
    engine = EngineSpec(model="m")
    plan = Plan(kind="sweep", configs=[PlannedConfig(id=BASELINE, role=Role.baseline, spec=SpecConfig(),
                                                     engine=engine, server=BASELINE)],
                load=load, workload=WorkloadSelection(dataset="sample"))
    points = [PointResult(point_id=p.id, latency=latency(), sd=SDSummary(available=False), lengths=lengths,
                          running_batch=RunningBatch(gauge="g", interval_s=0.5, samples=sum(histogram.values()),
                                                     histogram=histogram)) for p in plan.points]
    return RunSummary(specmeter_version="0", created_utc="2026-01-01T00:00:00Z", status="complete", plan=plan,
                      configs=[ConfigResult(config_id=BASELINE, role=Role.baseline, spec_label="off", points=points)])


def test_batch_sizes_fall_in_power_of_two_bins_whose_shares_sum_to_one() -> None:
    bins = dict(batch_bins({0: 10, 1: 40, 2: 20, 3: 10, 4: 5, 7: 5, 8: 10}))
    assert bins == pytest.approx({"idle": 0.1, "1": 0.4, "2-3": 0.3, "4-7": 0.1, "8-15": 0.1})
    assert list(bins) == ["idle", "1", "2-3", "4-7", "8-15"]
    assert batch_time_text({1: 1, 2: 3}) == "1: 25%, 2-3: 75%"


def test_time_at_batch_shows_where_the_load_sets_the_batch_only() -> None:
    trace = batch_time_table(summary(LoadSpec(trace_scale=[1, 2]), {1: 3, 2: 1}))
    assert trace is not None and [row[1] for row in trace.rows] == ["trace at 1x", "trace at 2x"]
    assert batch_time_table(summary(LoadSpec(concurrency=[4]), {4: 10})) is None


def test_acceptance_per_input_length_shows_from_two_buckets() -> None:
    two = LengthBreakdown(buckets=[bucket(0, 256, 10, 10), bucket(257, 512, 10, 5)])
    t = length_table(summary(LoadSpec(trace_scale=[1]), {1: 1}, two))
    assert t is not None and [row[2] for row in t.rows] == ["0-256", "257-512"]
    one = LengthBreakdown(buckets=[bucket(0, 256, 10, 10)])
    assert length_table(summary(LoadSpec(trace_scale=[1]), {1: 1}, one)) is None


def recommendation(gains: list[TraceGain]) -> Recommendation:
    drafter = DrafterRecommendation(drafter="draft_model d", candidates=["k2"],
                                    ranges=[KRange(start=1, end=8, k=2, bases=["measured"])], segments=[], spec=None,
                                    static_k=2, static_config_id="k2", static_reason="", score=None)
    return Recommendation(source_run="r", objective="throughput", max_num_seqs=8, max_num_seqs_source="given",
                          drafters=[drafter], on_trace=gains)


def test_the_trace_answer_is_one_line_with_the_time_the_gain_and_its_bounds() -> None:
    g = TraceGain(point_id="t1x", weighed_by=BASELINE, samples=10, idle_share=0.2, gain=1.23, low=1.15, high=1.31,
                  measured_share=1.0, time=[BatchShare(start=1, end=3, k=2, share=0.7),
                                            BatchShare(start=4, end=8, k=0, share=0.3)])
    text = trace_text(g)
    assert text.startswith("On this trace at t1x (time at batch 1-3 (K=2): 70%, 4-8 (K=0): 30%; idle 20% not counted)")
    assert "buys 1.23x [1.15, 1.31] over no speculation" in text and "\n" not in text
    lines = [line.text for line in deploy_lines(recommendation([g]), full=False)]
    assert any(line.strip() == text for line in lines)


def test_without_samples_the_trace_answer_says_so_in_one_line() -> None:
    g = TraceGain(point_id="t1x", weighed_by=BASELINE, reason="baseline's running batch was not sampled at t1x")
    assert trace_text(g) == "On this trace at t1x: baseline's running batch was not sampled at t1x"
    assert [line for line in deploy_lines(recommendation([g])) if "On this trace" in line.text]
