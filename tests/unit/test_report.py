"""Console report (report/console.py) on a RunSummary built by hand."""

from __future__ import annotations

import pytest
from rich.console import Console

from specmeter.metrics.latency import LatencySummary
from specmeter.metrics.sd import SDCounts
from specmeter.metrics.sd_summary import SDSummary
from specmeter.metrics.stats import Distribution
from specmeter.report.console import notes, render, sd_table, speedup_table
from specmeter.results import LevelResult, PhaseResult, Ratio, RunSummary, SpeedupResult

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


def make_summary(speedup: list[SpeedupResult] | None = None, **sd_kw: object) -> RunSummary:
    fields: dict[str, object] = {
        "available": True, "counters": SD_COUNTS, "per_request": SD_COUNTS, "requests_with_stats": 10,
        "agree": True, "agreement": "per-request sums equal the /metrics counter deltas", "reference": "counters",
    }
    sd_summary = SDSummary.model_validate({**fields, **sd_kw})
    sd = PhaseResult(
        name="sd", spec_label="draft_model K=4", spec={"method": "draft_model"},
        levels=[LevelResult(concurrency=4, latency=latency(300.0, 0.010), sd=sd_summary)],
    )
    base = PhaseResult(
        name="baseline", spec_label="off", spec={"method": "none"},
        levels=[LevelResult(concurrency=4, latency=latency(150.0, 0.020),
                            sd=SDSummary(available=False, reason=BASELINE_REASON))],
    )
    return RunSummary(specmeter_version="0.1.0", created_utc="2026-01-01T00:00:00Z", status="complete",
                      phases=[sd, base], speedup=speedup or [])


def rendered(summary: RunSummary) -> str:
    console = Console(record=True, width=200)
    render(summary, console)
    return console.export_text()


def speedup(low: float | None, high: float | None, value: float | None = 2.0, same: bool = True) -> SpeedupResult:
    return SpeedupResult(
        concurrency=4, output_throughput=Ratio(value=value, ci95_low=low, ci95_high=high),
        tpot=Ratio(value=2.0, ci95_low=1.8, ci95_high=2.2), ttft=Ratio(value=1.0), same_work=same,
        note=None if same else "phases completed different requests (2 differ): ratios compare unequal work",
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
    assert "draft_model K=4" in out  # the SD phase's speculation label
    assert f"baseline @ concurrency 4: no SD metrics: {BASELINE_REASON}" in out
    assert "300.0" in out and "150.0" in out  # output tok/s per phase
    assert "Speedup" not in out  # no speedup computed -> no table


def test_sd_table_only_lists_phases_with_sd() -> None:
    table = sd_table(make_summary())
    assert table is not None and table.row_count == 1
    off_only = make_summary()
    off_only.phases = off_only.phases[1:]
    assert sd_table(off_only) is None


def test_differing_counts_are_flagged() -> None:
    out = rendered(make_summary(agree=False, agreement="per-request sums differ from /metrics deltas: num_steps 9 vs 10"))
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
    assert "speedup @ concurrency 4: phases completed different requests" in out


def test_notes_for_invalid_counters_foreign_traffic_errors_and_incomplete() -> None:
    summary = make_summary(
        counters_invalid_reason="counters went down between snapshots (the server restarted during the run): x",
        foreign_traffic="the server finished 12 requests during the run but specmeter sent 10",
    )
    summary.phases[0].levels[0].latency.errors_by_kind = {"timeout": 2, "http_5xx": 1}
    summary.status = "incomplete"
    summary.incomplete_reason = "interrupted"
    lines = notes(summary)
    assert any("counter deltas not used: counters went down" in line for line in lines)
    assert any("the server finished 12 requests" in line for line in lines)
    assert any(line.endswith("failed requests: http_5xx 1, timeout 2") for line in lines)
    assert lines[-1] == "run incomplete: interrupted"
