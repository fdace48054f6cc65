"""The K-per-batch recommender (analysis/recommend.py) on sweeps built by hand."""

from __future__ import annotations

import itertools
import zlib
from typing import Any

import numpy as np
import pytest

from specmeter.analysis.decide import analyze
from specmeter.analysis.recommend import recommend as neutral_recommend
from specmeter.common.errors import InputError
from specmeter.config.models import EngineSpec, LoadSpec, SpecConfig, validate_dynamic_k
from specmeter.engines.deploy import with_deploy_configs
from specmeter.plans.run import BASELINE
from specmeter.schemas.analysis import Ratio
from specmeter.schemas.metrics import Distribution, LatencySummary, RunningBatch
from specmeter.schemas.plan import Plan, PlannedConfig, Role, WorkloadSelection
from specmeter.schemas.recommend import SLO, Recommendation
from specmeter.schemas.records import RequestRecord
from specmeter.schemas.results import ConfigResult, PointResult, RunSummary
from specmeter.schemas.sd import SDSummary

DRAFT = "models/demo-draft"
Interval = tuple[float, float, float]  # value, low, high


def spec(k: int, **kw: object) -> SpecConfig:
    return SpecConfig.model_validate({"method": "draft_model", "num_speculative_tokens": k, "draft_model": DRAFT,
                                      **kw})


def latency(wall: float = 10.0, tokens: int = 1000) -> LatencySummary:
    d = Distribution(count=10)
    return LatencySummary(num_requests=10, num_ok=10, wall_s=wall, output_tokens=tokens, prompt_tokens=100,
                          output_tokens_per_s=tokens / wall, requests_per_s=1.0, ttft_s=d, tpot_s=d, inter_chunk_s=d,
                          itl_per_token_s=d, e2e_s=d, queued_s=d, tokens_per_chunk=1.0)


def ratio(v: Interval) -> Ratio:
    return Ratio(value=v[0], ci95_low=v[1], ci95_high=v[2])


REQUESTS, TOKENS = 20, 100


def requests(cid: str, point: str, repeat: int, speedup: Interval, concurrency: int) -> list[RequestRecord]:
    """Requests of one configuration whose speedup over the baseline's is `speedup[0]`, with per-request noise
    that gives about the interval (low, high) against it. Request i is equally hard for every configuration
    (the shared part pairing removes); each configuration's own noise is independent of the others'."""
    value, low, high = speedup
    rng = np.random.default_rng(zlib.crc32(f"{cid} {point} {repeat}".encode()))
    noise = rng.standard_normal(REQUESTS)
    noise = (noise - noise.mean()) / noise.std()  # centred: the speedup over the point is exactly `value`
    hard = 1.0 + 0.5 * np.sin(np.arange(REQUESTS))
    sd = ((high - low) / 2 / 1.96) * np.sqrt(REQUESTS) / value
    e2e = hard if cid == BASELINE else hard / value + sd * hard.mean() / value * noise
    return [RequestRecord(config_id=cid, point_id=point, repeat=repeat, conversation_id=f"q{i}", ok=True,
                          ttft_s=0.05 * hard[i], e2e_s=max(float(e2e[i]), 0.06 * hard[i]), output_tokens=TOKENS)
            for i in range(REQUESTS)]


def sweep(speedups: dict[str, dict[str, Interval | list[Interval]]], batches: dict[str, float], *,
          ks: dict[str, int] | None = None, max_num_seqs: int | None = 64,
          extra_specs: dict[str, SpecConfig] | None = None,
          tops: dict[str, float] | None = None) -> tuple[RunSummary, list[RequestRecord]]:
    """A sweep and its requests: speedups[config][point] = (value, low, high) over the baseline (a list: one per
    repeat), the engine batch per point (its mean, and its max where `tops` gives one)."""
    ks = ks or {cid: int(cid.rsplit("k", 1)[1]) for cid in speedups}
    engine = EngineSpec(model="models/demo-target", max_num_seqs=max_num_seqs)
    specs = {cid: (extra_specs or {}).get(cid, spec(k)) for cid, k in ks.items()}
    configs = [PlannedConfig(id=BASELINE, role=Role.baseline, spec=SpecConfig(), engine=engine, server=BASELINE)]
    configs += [PlannedConfig(id=cid, role=Role.candidate, spec=s, engine=engine, server=cid)
                for cid, s in specs.items()]
    points = sorted(batches, key=lambda p: int(p[1:]))
    plan = Plan(kind="sweep", configs=configs, load=LoadSpec(concurrency=[int(p[1:]) for p in points]),
                workload=WorkloadSelection(dataset="sample"))
    rows: dict[str, dict[str, list[Interval]]] = {
        BASELINE: {p: [(1.0, 1.0, 1.0)] * max(len(v) if isinstance(v, list) else 1
                                           for per in speedups.values() for v in per.values()) for p in points}}
    rows.update({cid: {p: v if isinstance(v, list) else [v] for p, v in per.items()} for cid, per in speedups.items()})
    records: list[RequestRecord] = []

    def result(cid: str, role: Role) -> ConfigResult:
        res = ConfigResult(config_id=cid, role=role, spec_label=cid)
        for p, per_repeat in rows.get(cid, {}).items():
            for r, v in enumerate(per_repeat):
                recs = requests(cid, p, r, v, int(p[1:]))
                records.extend(recs)
                wall = sum(x.e2e_s or 0.0 for x in recs) / int(p[1:])
                res.points.append(PointResult(
                    point_id=p, repeat=r, latency=latency(wall, TOKENS * REQUESTS), sd=SDSummary(available=False),
                    running_batch=RunningBatch(gauge="vllm:num_requests_running", interval_s=0.25, samples=40,
                                               mean=batches[p], steady_mean=batches[p], max=(tops or {}).get(p))))
        return res

    results = [result(BASELINE, Role.baseline), *(result(cid, Role.candidate) for cid in specs)]
    summary = RunSummary(specmeter_version="0", created_utc="2026-01-01T00:00:00Z", status="complete", plan=plan,
                         configs=results)
    summary.analysis = analyze(summary, records)
    return summary, records


def recommend(summary: RunSummary, records: list[RequestRecord], **kw: Any) -> Recommendation:
    """As `specmeter recommend` writes it: rendered for vLLM, the engine these sweeps ran."""
    return with_deploy_configs(neutral_recommend(summary, records, **kw), "vllm")


CLEAR = {
    # K=4 clearly best at batch 1, K=2 at 4, nothing at 13.
    "draft_model-k2": {"c1": (1.30, 1.25, 1.35), "c4": (1.25, 1.20, 1.30), "c16": (0.95, 0.90, 1.00)},
    "draft_model-k4": {"c1": (1.60, 1.55, 1.65), "c4": (1.05, 1.00, 1.10), "c16": (0.85, 0.80, 0.90)},
}
BATCHES = {"c1": 1.0, "c4": 3.9, "c16": 13.2}


def test_ranges_start_at_1_reach_max_num_seqs_and_merge_equal_k() -> None:
    rec = recommend(*sweep(CLEAR, BATCHES))
    best = rec.best
    assert best is not None and best.speculative_config is not None
    table = best.speculative_config["num_speculative_tokens_per_batch_size"]
    assert table[0][0] == 1 and table[-1][1] == 64
    assert all(a[1] + 1 == b[0] for a, b in itertools.pairwise(table))  # contiguous
    assert all(a[2] != b[2] for a, b in itertools.pairwise(table))  # merged: neighbours differ in K
    lookup = {bs: k for start, end, k in table for bs in range(start, end + 1)}
    assert (lookup[1], lookup[4], lookup[13]) == (4, 2, 0)
    assert best.speculative_config["num_speculative_tokens"] == max(k for _, _, k in table)
    assert "disable_by_batch_size" not in str(best.speculative_config)
    assert any("disable_by_batch_size" in n and "K = 0" in n for n in rec.notes)
    # A K = 0 range still runs vLLM's drafter: the recommendation says so, and that verify measures it.
    assert any("drafter" in n and "verify" in n for n in rec.notes)


def test_emitted_json_passes_the_launcher_validator_and_vllms_own() -> None:
    best = recommend(*sweep(CLEAR, BATCHES)).best
    assert best is not None and best.speculative_config is not None
    again = SpecConfig.model_validate(best.speculative_config)
    assert again.num_speculative_tokens_per_batch_size is not None
    validate_dynamic_k(again.num_speculative_tokens_per_batch_size, again.k)
    utils = pytest.importorskip("vllm.v1.spec_decode.dynamic.utils")
    dense = utils.build_dynamic_sd_schedule_lookup(best.speculative_config["num_speculative_tokens_per_batch_size"],
                                                   64, best.speculative_config["num_speculative_tokens"])
    assert dense[1] == 4 and dense[64] == 0


def test_k_never_exceeds_the_measured_k_and_interpolation_is_marked() -> None:
    best = recommend(*sweep(CLEAR, BATCHES)).best
    assert best is not None
    assert all(0 <= r.k <= 4 for r in best.ranges)
    by_size = {bs: s for s in best.segments for bs in range(s.start, s.end + 1)}
    assert by_size[1].basis == by_size[4].basis == by_size[13].basis == "measured"
    assert by_size[2].basis == by_size[3].basis == by_size[8].basis == "interpolated"
    # Between batch 4 and 13 the geometric midpoint (~7.2) splits the sizes between the two points' K.
    assert by_size[7].k == 2 and by_size[8].k == 0


def test_nothing_is_claimed_beyond_the_largest_measured_batch() -> None:
    sure = {"draft_model-k4": {"c1": (1.6, 1.5, 1.7), "c4": (1.4, 1.3, 1.5)}}
    best = recommend(*sweep(sure, {"c1": 1.0, "c4": 4.0})).best
    assert best is not None
    tail = best.segments[-1]
    assert (tail.start, tail.end, tail.k, tail.basis) == (5, 64, 0, "unmeasured")
    assert best.ranges[-1].k == 0 and best.ranges[-1].end == 64


def test_the_largest_point_covers_the_batches_the_engine_ran_under_it() -> None:
    # At c16 the engine's batch averaged 13.2 but swung up to 16: those batches were measured there too, so
    # the K holds to 16 and only beyond it is drafting off.
    sure = {"draft_model-k2": {"c1": (1.5, 1.4, 1.6), "c16": (1.2, 1.1, 1.3)}}
    best = recommend(*sweep(sure, {"c1": 1.0, "c16": 13.2}, tops={"c1": 1.0, "c16": 16.0})).best
    assert best is not None
    by_size = {bs: s for s in best.segments for bs in range(s.start, s.end + 1)}
    assert by_size[13].basis == by_size[16].basis == "measured" and by_size[16].k == 2
    assert (by_size[17].basis, by_size[17].k) == ("unmeasured", 0)
    assert "up to 16" in by_size[16].reason


def test_below_the_smallest_measured_batch_takes_its_k() -> None:
    sure = {"draft_model-k4": {"c4": (1.4, 1.3, 1.5), "c16": (1.2, 1.1, 1.3)}}
    best = recommend(*sweep(sure, {"c4": 3.6, "c16": 12.0})).best
    assert best is not None
    first = best.segments[0]
    assert (first.start, first.end, first.k, first.basis) == (1, 3, 4, "below_measured")


def test_k0_where_every_candidate_loses_or_ties_the_baseline() -> None:
    losing = {"draft_model-k2": {"c1": (1.05, 0.95, 1.15), "c4": (0.9, 0.85, 0.95)},
              "draft_model-k4": {"c1": (0.98, 0.9, 1.05), "c4": (0.8, 0.7, 0.9)}}
    best = recommend(*sweep(losing, {"c1": 1.0, "c4": 4.0})).best
    assert best is not None
    assert [r.k for r in best.ranges] == [0]
    assert best.spec is None and best.speculative_config is None
    assert best.static_k == 0 and best.static_speculative_config is None


def test_overlapping_intervals_go_to_the_smaller_k() -> None:
    close = {"draft_model-k2": {"c1": (1.40, 1.30, 1.50)}, "draft_model-k4": {"c1": (1.45, 1.35, 1.55)}}
    best = recommend(*sweep(close, {"c1": 1.0})).best
    assert best is not None and best.ranges[0].k == 2
    clear = {"draft_model-k2": {"c1": (1.30, 1.25, 1.35)}, "draft_model-k4": {"c1": (1.60, 1.50, 1.70)}}
    best = recommend(*sweep(clear, {"c1": 1.0})).best
    assert best is not None and best.ranges[0].k == 4


def test_repeat_spread_widens_the_interval_a_choice_reads() -> None:
    """A tight interval over requests is not enough when the repeats disagree (drift between runs)."""
    steady = {"draft_model-k2": {"c1": [(1.30, 1.29, 1.31)] * 3}, "draft_model-k4": {"c1": [(1.40, 1.39, 1.41)] * 3}}
    best = recommend(*sweep(steady, {"c1": 1.0})).best
    assert best is not None and best.ranges[0].k == 4
    drifting = {**steady, "draft_model-k4": {"c1": [(1.20, 1.19, 1.21), (1.40, 1.39, 1.41), (1.60, 1.59, 1.61)]}}
    best = recommend(*sweep(drifting, {"c1": 1.0})).best
    assert best is not None and best.ranges[0].k == 2
    seg = best.segments[0]
    assert [(h.config_id, h.outcome) for h in seg.evidence][-1] == ("draft_model-k4", "unsettled")


def test_points_at_the_same_engine_batch_take_the_smaller_k() -> None:
    sat = {"draft_model-k4": {"c1": (1.6, 1.5, 1.7), "c16": (1.2, 1.1, 1.3), "c32": (0.8, 0.7, 0.9)}}
    best = recommend(*sweep(sat, {"c1": 1.0, "c16": 12.2, "c32": 11.8})).best
    assert best is not None
    seg = next(s for s in best.segments if s.basis == "measured" and s.start == 12)
    assert seg.k == 0 and set(seg.point_ids) == {"c16", "c32"}


def test_static_fallback_is_the_best_single_k_or_off() -> None:
    best = recommend(*sweep(CLEAR, BATCHES)).best
    assert best is not None
    assert best.static_k == 2 and best.static_config_id == "draft_model-k2"
    assert best.static_speculative_config is not None
    assert best.static_speculative_config["num_speculative_tokens"] == 2
    assert "num_speculative_tokens_per_batch_size" not in best.static_speculative_config


def test_max_num_seqs_from_the_engine_spec_or_given_or_a_note() -> None:
    assert recommend(*sweep(CLEAR, BATCHES, max_num_seqs=32)).max_num_seqs == 32
    assert recommend(*sweep(CLEAR, BATCHES), max_num_seqs=100).max_num_seqs == 100
    unknown = recommend(*sweep(CLEAR, BATCHES, max_num_seqs=None))
    assert unknown.max_num_seqs == 1024 and any("--max-num-seqs" in n for n in unknown.notes)


def test_drafters_get_one_table_each_best_first_and_dead_flags_are_dropped() -> None:
    ngram = SpecConfig.model_validate({"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_max": 3,
                                       "extra": {"disable_by_batch_size": 8}})
    rows = {"draft_model-k4": {"c1": (1.2, 1.1, 1.3)}, "ngram-k4": {"c1": (1.6, 1.5, 1.7)}}
    rec = recommend(*sweep(rows, {"c1": 1.0}, ks={"draft_model-k4": 4, "ngram-k4": 4},
                          extra_specs={"ngram-k4": ngram}))
    assert [d.candidates for d in rec.drafters] == [["ngram-k4"], ["draft_model-k4"]]
    best = rec.best
    assert best is not None and best.speculative_config is not None
    assert best.speculative_config["method"] == "ngram"
    assert "disable_by_batch_size" not in best.speculative_config
    assert any("dropped disable_by_batch_size" in n for n in rec.notes)


def test_goodput_counts_requests_that_meet_the_slo() -> None:
    rows = {"draft_model-k2": {"c4": (1.3, 1.25, 1.35)}, "draft_model-k4": {"c4": (1.6, 1.55, 1.65)}}
    summary, records = sweep(rows, {"c4": 4.0})
    for r in records:  # K=4 is faster per token but misses the TTFT bound on 15 of its 20 requests
        if r.config_id == "draft_model-k4" and int(r.conversation_id[1:]) >= 5:
            r.ttft_s = 0.9
    rec = recommend(summary, records, objective="goodput", slo=SLO(ttft_ms=500))
    best = rec.best
    assert best is not None and best.ranges[0].k == 2  # K=2 meets the SLO on every request and beats the baseline
    measured = next(s for s in best.segments if s.basis == "measured")
    goodput = {s.config_id: s.value for s in measured.scores}
    k4_wall = summary.config("draft_model-k4").points[0].latency.wall_s  # type: ignore[union-attr]
    assert goodput["draft_model-k4"] == pytest.approx(5 / k4_wall)
    assert {h.metric for h in measured.evidence} == {"goodput"}
    assert any(h.config_id == "draft_model-k4" and h.outcome == "does_not_beat" for h in measured.evidence)


def test_goodput_needs_an_slo_and_an_slo_needs_goodput() -> None:
    with pytest.raises(InputError, match="--slo"):
        recommend(*sweep(CLEAR, BATCHES), objective="goodput")
    with pytest.raises(InputError, match="goodput"):
        recommend(*sweep(CLEAR, BATCHES), objective="throughput", slo=SLO(ttft_ms=100))


def test_tpot_objective_reads_the_tpot_ratio() -> None:
    summary, records = sweep(CLEAR, BATCHES)
    for r in records:  # the baseline spends 90% of each request on its first token: far less per token after it
        if r.config_id == BASELINE and r.e2e_s is not None:
            r.ttft_s = 0.9 * r.e2e_s
    tpot = recommend(summary, records, objective="tpot")
    assert tpot.best is not None and [r.k for r in tpot.best.ranges] == [0]
    assert all(h.metric == "tpot" for s in tpot.best.segments for h in s.evidence)
    throughput = recommend(summary, records)
    assert throughput.best is not None and throughput.best.ranges[0].k == 4


def test_a_run_without_baseline_or_candidates_is_refused() -> None:
    summary, records = sweep(CLEAR, BATCHES)
    summary.configs = [c for c in summary.configs if c.role is Role.baseline]
    with pytest.raises(InputError, match="nothing to recommend"):
        recommend(summary, records)
    summary.configs = []
    with pytest.raises(InputError, match="baseline"):
        recommend(summary, records)


def test_the_recommendation_records_the_zone_its_ties_were_named_in() -> None:
    """K = 4 at most 3% better than K = 2: a tie by the run's zone, open without one; the table is the same either
    way (a tie keeps the cheaper, as an open duel does), and the zone the evidence read is recorded beside min gain."""
    k2, k4 = "draft_model-k2", "draft_model-k4"
    summary, records = sweep({k2: {"c1": (1.30, 1.29, 1.31)}, k4: {"c1": (1.31, 1.30, 1.32)}}, {"c1": 1.0})

    def duel(rec: Recommendation) -> str:
        best = rec.best
        assert best is not None
        return next(h.outcome for h in best.segments[0].evidence if h.config_id == k4)

    tied = recommend(summary, records)
    assert tied.indifference == summary.plan.indifference and duel(tied) == "tie"
    assert recommend(summary, records, min_gain=0.05).indifference == 0.05  # widened to a larger min gain
    off = recommend(summary, records, indifference=0.01)
    assert off.indifference == 0.01 and duel(off) == "unsettled"
    assert [r.entry for r in tied.best.ranges] == [r.entry for r in off.best.ranges]  # type: ignore[union-attr]


def test_indifference_flags_are_checked_and_count_as_criteria() -> None:
    from specmeter.config.criteria import Criteria
    from specmeter.workflows.recommend import differences

    with pytest.raises(InputError, match=r"--indifference 0.02 is below the minimum gain 0.05"):
        Criteria(min_gain=0.05, indifference=0.02)
    with pytest.raises(InputError, match=r"--indifference 1.5: give a fraction in \[0, 1\)"):
        Criteria(indifference=1.5)
    rec = recommend(*sweep(CLEAR, BATCHES))
    assert differences(Criteria(indifference=rec.indifference), rec) == []
    assert differences(Criteria(indifference=0.05), rec) == [("--indifference", "0.05", str(rec.indifference))]
