"""The report's tables (report/tables.py) and their console rendering, on a RunSummary built by hand."""

from __future__ import annotations

import pytest
from rich.console import Console

from specmeter.analysis.decide import verdict as decide_verdict
from specmeter.config.models import EngineSpec, LoadSpec, SpecConfig
from specmeter.plans.run import BASELINE, run_plan
from specmeter.report.console import VERBOSE, render
from specmeter.report.decisions import head_to_head_table
from specmeter.report.tables import (
    decision_table,
    lossless_table,
    notes,
    plan_table,
    sd_table,
    speedup_table,
)
from specmeter.schemas.analysis import Crossover, HeadToHead, PointChoice, Ratio, Speedup
from specmeter.schemas.metrics import Distribution, LatencySummary
from specmeter.schemas.plan import Plan, WorkloadSelection
from specmeter.schemas.results import Analysis, ConfigResult, LosslessCheck, Mismatch, PointResult, RunSummary
from specmeter.schemas.sd import SDCounts, SDSummary

# REFERENCE §1 vector: iid alpha = 0.8, K = 4 -> AL 3.3616, AR 0.5904, a_i = 0.8^(i+1), c_i = 0.8.
SD_COUNTS = SDCounts(
    source="counters", num_steps=10000, num_draft_tokens=40000, num_accepted_tokens=23616,
    accepted_per_pos=[8000, 6400, 5120, 4096],
)
BASELINE_REASON = "speculation is off on this server: it exposes no SD counters and no per-request SD stats"


def dist(p50: float, mean: float | None = None) -> Distribution:
    return Distribution(count=10, mean=mean if mean is not None else p50, p50=p50, p90=p50 * 1.5, p99=p50 * 2)


def latency(tok_s: float, tpot: float) -> LatencySummary:
    return LatencySummary(
        num_requests=10, num_ok=10, wall_s=5.0, output_tokens=int(tok_s * 5), prompt_tokens=1000,
        output_tokens_per_s=tok_s, requests_per_s=2.0, ttft_s=dist(0.05), tpot_s=dist(tpot),
        inter_chunk_s=dist(0.04), itl_per_token_s=dist(0.012), e2e_s=dist(1.2), queued_s=dist(0.0),
        tokens_per_chunk=3.3,
    )


SPEC = SpecConfig(method="draft_model", num_speculative_tokens=4, draft_model="d")
SD_ID = "draft_model-k4"


def make_plan(**load: object) -> Plan:
    load.setdefault("concurrency", [4])
    return run_plan(EngineSpec(model="m"), SPEC, LoadSpec(**load), baseline=True, baseline_endpoint=None,
                    workload=WorkloadSelection(dataset="sample"))


def make_summary(speedup: list[Speedup] | None = None, **sd_kw: object) -> RunSummary:
    fields: dict[str, object] = {
        "available": True, "counters": SD_COUNTS, "per_request": SD_COUNTS, "requests_with_stats": 10,
        "agree": True, "agreement": "per-request sums equal the /metrics counter deltas", "reference": "counters",
    }
    sd_summary = SDSummary.model_validate({**fields, **sd_kw})
    plan = make_plan()
    sd = ConfigResult(
        config_id=SD_ID, role="candidate", spec_label="draft_model K=4",
        points=[PointResult(point_id="c4", latency=latency(300.0, 0.010), sd=sd_summary)],
    )
    base = ConfigResult(
        config_id=BASELINE, role="baseline", spec_label="off",
        points=[PointResult(point_id="c4", latency=latency(150.0, 0.020),
                            sd=SDSummary(available=False, reason=BASELINE_REASON))],
    )
    return RunSummary(specmeter_version="0.1.0", created_utc="2026-01-01T00:00:00Z", status="complete",
                      plan=plan, configs=[sd, base], analysis=Analysis(speedups=speedup or []))


def rendered(summary: RunSummary) -> str:
    console = Console(record=True, width=200)
    render(summary, console, verbosity=VERBOSE)  # every table and per-point note
    return console.export_text()


UNEQUAL_NOTE = "the two sides completed different requests (2 differ): ratios compare unequal work"


def speedup(low: float | None, high: float | None, value: float | None = 2.0, same: bool = True) -> Speedup:
    """A stored speedup at c4, with the verdict analysis gives its throughput interval."""
    thr = Ratio(value=value, ci95_low=low, ci95_high=high)
    return Speedup(
        config_id=SD_ID, baseline_id=BASELINE, point_id="c4", output_throughput=thr,
        tpot=Ratio(value=2.0, ci95_low=1.8, ci95_high=2.2), ttft=Ratio(value=1.0), e2e=Ratio(value=1.9),
        paired_requests=10, same_work=same, note=None if same else UNEQUAL_NOTE,
        decided_on="output_throughput", verdict=decide_verdict(thr),
    )


def test_render_sd_and_baseline_phases() -> None:
    out = rendered(make_summary())
    assert "Speculative decoding" in out
    assert "AL" in out and "AR" in out
    assert "3.36" in out  # AL 3.3616
    assert "0.59" in out  # AR 0.5904
    assert "0.80 0.64 0.51 0.41" in out  # a_i = 0.8^(i+1)
    assert "0.80 0.80 0.80 0.80" in out  # c_i = 0.8
    assert "agree" in out
    assert "draft_model K=4" in out  # the SD configuration's speculation label
    assert f"baseline @ concurrency 4: no SD metrics: {BASELINE_REASON}" in out
    assert "300.0" in out and "150.0" in out  # output tok/s per configuration
    assert "Speedup" not in out  # no speedup computed -> no table


def test_sd_table_only_lists_configurations_with_sd() -> None:
    table = sd_table(make_summary())
    assert table is not None and table.row_count == 1
    off_only = make_summary()
    off_only.configs = off_only.configs[1:]
    assert sd_table(off_only) is None


def test_differing_counts_are_flagged() -> None:
    agreement = "per-request sums differ from /metrics deltas: num_steps 9 vs 10"
    out = rendered(make_summary(agree=False, agreement=agreement))
    assert "DIFFER" in out
    assert "num_steps 9 vs 10" in out


@pytest.mark.parametrize(
    ("low", "high", "value", "verdict"),
    [
        (1.6, 2.4, 2.0, "SD pays"),
        (0.5, 0.9, 0.7, "SD slows serving"),
        (0.9, 1.2, 1.05, "no clear difference"),
        (1.0, 1.3, 1.1, "no clear difference"),  # a CI touching 1 is not a win
        (None, None, 1.5, "no clear difference"),  # no CI, no claim
    ],
)
def test_speedup_verdict(low: float | None, high: float | None, value: float, verdict: str) -> None:
    summary = make_summary([speedup(low, high, value)])
    table = speedup_table(summary)
    assert table is not None
    out = rendered(summary)
    assert verdict in out
    for other in {"SD pays", "SD slows serving", "no clear difference"} - {verdict}:
        assert other not in out
    if low is not None and high is not None:
        assert f"{value:.2f}x [{low:.2f}, {high:.2f}]" in out


def test_speedup_without_value_has_no_verdict() -> None:
    out = rendered(make_summary([speedup(None, None, value=None)]))
    for verdict in ("SD pays", "SD slows serving", "no clear difference"):
        assert verdict not in out


def test_unequal_work_is_called_out() -> None:
    summary = make_summary([speedup(1.6, 2.4, same=False)])
    out = rendered(summary)
    assert "SD pays (unequal work!)" in out
    assert f"speedup {SD_ID} @ concurrency 4: {UNEQUAL_NOTE}" in out


def test_notes_for_invalid_counters_foreign_traffic_errors_and_incomplete() -> None:
    summary = make_summary(
        counters_invalid_reason="counters went down between snapshots (the server restarted during the run): x",
        foreign_traffic="the server finished 12 requests during the run but specmeter sent 10",
    )
    summary.configs[0].points[0].latency.errors_by_kind = {"timeout": 2, "http_5xx": 1}
    summary.status = "incomplete"
    summary.incomplete_reason = "interrupted"
    lines = [n.text for n in notes(summary)]
    assert any("counter deltas not used: counters went down" in line for line in lines)
    assert any("the server finished 12 requests" in line for line in lines)
    assert any(line.endswith("failed requests: http_5xx 1, timeout 2") for line in lines)
    assert lines[-1] == "run incomplete: interrupted"


# ---- what the restructured report adds: the plan, stored decisions, the lossless check -----------------


def test_plan_table_shows_each_configuration_and_its_status() -> None:
    summary = make_summary()
    summary.configs[1].server_error = "vllm exited with code 1 during startup\nlast log lines: CUDA OOM"
    summary.configs[1].points = []
    out = rendered(summary)
    assert "Plan (run): concurrency 4" in out
    table = plan_table(summary)
    assert table.row_count == 2
    assert "1 point(s)" in out and "server failed" in out
    # the failure is explained in the notes, with the engine's reason
    assert any(n.text.startswith(f"{BASELINE}: server failed to start: vllm exited") for n in notes(summary))
    summary.configs = summary.configs[:1]
    assert "not run" in rendered(summary)


def test_verdict_is_read_from_the_stored_speedup_not_recomputed() -> None:
    """The report renders Speedup.verdict; an interval that alone would say 'pays' shows what was stored."""
    stored = speedup(1.6, 2.4).model_copy(update={"verdict": "unclear"})
    out = rendered(make_summary([stored]))
    assert "no clear difference" in out and "SD pays" not in out


def test_open_loop_speedup_says_it_was_decided_on_tpot() -> None:
    summary = make_summary()
    summary.plan = make_plan(request_rate=[2.0])
    for config in summary.configs:
        config.points[0].point_id = "r2"
    tpot = Ratio(value=1.5, ci95_low=1.2, ci95_high=1.8)
    s = speedup(0.9, 1.1, value=1.0).model_copy(update={"point_id": "r2", "tpot": tpot, "decided_on": "tpot",
                                                         "verdict": decide_verdict(tpot)})
    summary.analysis = Analysis(speedups=[s])
    out = rendered(summary)
    assert "SD pays (on TPOT)" in out
    assert "2 req/s (Poisson)" in out  # points are shown by their label


def test_decision_table_shows_crossovers_and_choices() -> None:
    summary = make_summary([speedup(1.6, 2.4)])
    assert decision_table(summary) is None  # nothing decided, nothing shown
    summary.analysis.crossovers = [Crossover(config_id=SD_ID, axis="concurrency", status="always_pays",
                                             note=f"{SD_ID}: pays at every measured concurrency")]
    summary.analysis.choices = [PointChoice(point_id="c4", best_config_id=SD_ID, best_k=4, leader_config_id=SD_ID,
                                            reason="it leads with nothing tied")]
    table = decision_table(summary)
    assert table is not None and table.row_count == 2
    out = rendered(summary)
    assert f"crossover {SD_ID} (concurrency)" in out and "pays at every measured concurrency" in out
    assert "best at concurrency 4" in out and f"{SD_ID} (K=4): it leads with nothing tied" in out


def test_the_head_to_head_table_names_a_tie_and_its_size() -> None:
    summary = make_summary([speedup(1.6, 2.4)])
    tie = HeadToHead(point_id="c4", config_id=SD_ID, against=BASELINE, metric="output_throughput",
                     ratio=Ratio(value=1.004), low=0.991, high=1.018, threshold=1.01, indifference=0.03, outcome="tie",
                     paired_requests=40)
    summary.analysis.choices = [PointChoice(point_id="c4", best_config_id=BASELINE, best_k=0,
                                            leader_config_id=SD_ID, reason="", evidence=[tie])]
    table = head_to_head_table(summary)
    assert table is not None
    (row,) = table.rows
    assert "tie (at most 3% better)" in row and "1.004x [0.991, 1.018]" in row and row[-1] == BASELINE
    assert "a tie, the interval ending inside the indifference zone, keeps the choice" in table.title


def test_lossless_table_lists_the_first_mismatches() -> None:
    summary = make_summary()
    assert lossless_table(summary) is None
    mismatches = [Mismatch(point_id="c4", repeat=0, conversation_id=f"q{i}", turn=0, first_diff=7 + i,
                           candidate_len=20, baseline_len=20) for i in range(5)]
    summary.analysis.lossless = [LosslessCheck(config_id=SD_ID, baseline_id=BASELINE, basis="token ids",
                                               compared=10, matched=5, match_rate=0.5, mismatches=mismatches)]
    out = rendered(summary)
    assert "Lossless check" in out
    assert "token ids" in out and "50%" in out
    assert "c4 q0#0 @7, c4 q1#0 @8, c4 q2#0 @9 (+2 more)" in out
    assert "q3#0" not in out  # only the first three are listed


def test_repeats_are_numbered() -> None:
    summary = make_summary()
    summary.plan = summary.plan.model_copy(update={"repeats": 2})
    second = summary.configs[0].points[0].model_copy(update={"repeat": 1})
    summary.configs[0].points.append(second)
    out = rendered(summary)
    assert "concurrency 4 #1" in out and "concurrency 4 #2" in out
    assert "2 repeats" in out


def test_a_model_drafter_that_accepts_almost_nothing_is_one_warning() -> None:
    """Many drafts, almost none accepted: the drafter's weights are probably missing or random (one line naming the
    configuration and how to check); a drafter with few drafts, or one that accepts, gets no such line."""
    dead = SDCounts(source="counters", num_steps=1000, num_draft_tokens=4000, num_accepted_tokens=3,
                    accepted_per_pos=[3, 0, 0, 0])
    few = SDCounts(source="counters", num_steps=10, num_draft_tokens=40, num_accepted_tokens=0,
                   accepted_per_pos=[0, 0, 0, 0])
    warned = [n for n in notes(make_summary(counters=dead, per_request=dead)) if "missing or random" in n.text]
    assert len(warned) == 1 and warned[0].warn and warned[0].text.startswith(SD_ID)
    assert "3 of 4000" in warned[0].text and "tensor names" in warned[0].text
    for counts in (few, SD_COUNTS):
        assert not [n for n in notes(make_summary(counters=counts, per_request=counts)) if "missing or" in n.text]


def test_the_schedule_error_is_one_note_at_the_worst_scheduled_point() -> None:
    summary = make_summary()
    assert not any(n.text.startswith("schedule error") for n in notes(summary))  # a closed loop schedules nothing
    summary.configs[0].points[0].schedule_error = Distribution(count=8, p50=0.0004, p99=0.0012)
    summary.configs[1].points[0].schedule_error = Distribution(count=8, p50=0.0011, p99=0.0056)
    (line,) = [n.text for n in notes(summary) if n.text.startswith("schedule error")]
    assert "p50 at most 1.1 ms, p99 at most 5.6 ms over 2 scheduled points" in line
    assert line.endswith(f"(the worst p99: {BASELINE} @ concurrency 4)")
