"""Run-level SD summary (metrics/sd_summary.py) on the real vLLM captures in tests/fixtures/vllm.

The draft_model session sent exactly 5 requests between metrics_before.txt and metrics_after.txt
(chat_1..3.json, chat_stream.sse, completion.json); see test_vllm_adapter.py for the capture details.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from specmeter.engines.vllm import VLLMStats
from specmeter.metrics.sd import sum_counts
from specmeter.metrics.sd_summary import compare_counts, summarize_sd
from specmeter.schemas.records import RequestRecord
from specmeter.schemas.sd import SDCounts
from specmeter.telemetry.prometheus import Snapshot, parse_exposition

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "vllm"
ADAPTER = VLLMStats()


def snap(name: str) -> Snapshot:
    return parse_exposition((FIXTURES / name).read_text(encoding="utf-8"))


def payloads() -> list[dict[str, Any]]:
    out = [json.loads((FIXTURES / f"chat_{i}.json").read_text()) for i in (1, 2, 3)]
    lines = [ln for ln in (FIXTURES / "chat_stream.sse").read_text().splitlines() if ln.startswith("data: {")]
    out.append(json.loads(lines[-1][len("data: "):]))
    out.append(json.loads((FIXTURES / "completion.json").read_text()))
    return out


def records(n: int | None = None) -> list[RequestRecord]:
    out = []
    for i, payload in enumerate(payloads()[:n]):
        sd, raw = ADAPTER.sd_from_response(payload)
        out.append(RequestRecord(config_id="ngram-k4", point_id="c1", conversation_id=f"c{i}", ok=True,
                                 output_tokens=payload["usage"]["completion_tokens"], sd=sd, sd_raw=raw))
    return out


def test_real_session_counters_and_per_request_agree() -> None:
    s = summarize_sd(ADAPTER, snap("metrics_before.txt"), snap("metrics_after.txt"), records())
    assert s.available
    assert s.agree is True, s.agreement
    assert s.reference == "counters"
    assert s.counters is not None and s.per_request is not None
    assert s.requests_with_stats == 5
    assert s.foreign_traffic is None
    assert s.headline is s.counters
    assert s.per_request_mean_al == 4.0  # draft == target, greedy: every request AL = K + 1


def test_warmup_records_are_excluded() -> None:
    recs = records()
    recs[0].warmup = True
    s = summarize_sd(ADAPTER, snap("metrics_before.txt"), snap("metrics_after.txt"), recs)
    assert s.requests_with_stats == 4
    assert s.agree is False  # the warmup request's steps are in the counters only


def test_foreign_traffic_prefers_per_request_stats() -> None:
    # The server finished 5 requests; pretend specmeter sent only 3.
    s = summarize_sd(ADAPTER, snap("metrics_before.txt"), snap("metrics_after.txt"), records(3))
    assert s.foreign_traffic is not None and "5" in s.foreign_traffic and "3" in s.foreign_traffic
    assert s.reference == "per_request"
    assert s.agree is False
    assert s.agreement is not None and "other clients" in s.agreement


def test_speculation_off_is_not_available() -> None:
    recs = [RequestRecord(config_id="baseline", point_id="c1", conversation_id="c", ok=True, output_tokens=8)]
    s = summarize_sd(ADAPTER, snap("metrics_nospec.txt"), snap("metrics_nospec.txt"), recs)
    assert not s.available
    assert s.reason is not None and "speculation is off" in s.reason
    assert s.headline is None


def test_restarted_server_falls_back_to_per_request_without_crashing() -> None:
    # Counters going down between snapshots = the server restarted during the run.
    s = summarize_sd(ADAPTER, snap("metrics_after.txt"), snap("metrics_before.txt"), records())
    assert s.available
    assert s.counters is None
    assert s.counters_invalid_reason is not None and "went down" in s.counters_invalid_reason
    assert s.reference == "per_request"
    assert s.headline is s.per_request


def test_no_snapshots_uses_per_request_or_says_why() -> None:
    s = summarize_sd(ADAPTER, None, None, records())
    assert s.available and s.reference == "per_request"
    none = summarize_sd(ADAPTER, None, None, [])
    assert not none.available and none.reason


def test_compare_counts_reports_each_difference() -> None:
    a = SDCounts(source="counters", num_steps=10, num_draft_tokens=30, num_accepted_tokens=12,
                 accepted_per_pos=[6, 4, 2])
    same = a.model_copy(update={"source": "per_request", "accepted_per_pos": [6, 4, 2, 0]})
    ok, text = compare_counts(a, same)
    assert ok and "equal" in text
    b = SDCounts(source="per_request", num_steps=9, num_draft_tokens=27, num_accepted_tokens=12,
                 accepted_per_pos=[6, 4, 2])
    ok, text = compare_counts(a, b)
    assert not ok
    assert "num_steps 9 vs 10 (-1)" in text and "num_draft_tokens 27 vs 30 (-3)" in text
    assert "num_accepted_tokens" not in text


def _vllm_text(drafts: int, draft_tokens: int, accepted: int, done: int) -> Snapshot:
    return parse_exposition(
        f"vllm:spec_decode_num_drafts_total {drafts}\nvllm:spec_decode_num_draft_tokens_total {draft_tokens}\n"
        f"vllm:spec_decode_num_accepted_tokens_total {accepted}\nvllm:request_success_total {done}\n")


def _done(n: int) -> list[RequestRecord]:
    return [RequestRecord(config_id="k4", point_id="c4", conversation_id=f"c{i}", ok=True, output_tokens=20)
            for i in range(n)]


def test_counters_that_stop_growing_while_requests_complete_are_flagged_not_read_as_al_1() -> None:
    before, after = _vllm_text(50, 200, 80, 10), _vllm_text(50, 200, 80, 14)
    s = summarize_sd(ADAPTER, before, after, _done(4), expect_sd=True)
    assert s.stalled and not s.available
    assert s.headline is None  # no acceptance length at all, never 1.0
    assert "drafted nothing over 4 completed requests" in (s.reason or "")


def test_a_speculation_off_server_drafting_nothing_is_not_a_stall() -> None:
    s = summarize_sd(ADAPTER, _vllm_text(0, 0, 0, 0), _vllm_text(0, 0, 0, 4), _done(4), expect_sd=False)
    assert not s.available and not s.stalled
    assert "speculation is off" in (s.reason or "")


def test_a_candidate_whose_server_never_speculates_is_flagged() -> None:
    plain = parse_exposition("vllm:request_success_total 4\n")
    s = summarize_sd(ADAPTER, plain, plain, _done(4), expect_sd=True)
    assert s.stalled and not s.available
    assert "never started" in (s.reason or "")


def test_nothing_completed_is_not_a_stall() -> None:
    before = _vllm_text(50, 200, 80, 10)
    failed = [r.model_copy(update={"ok": False, "output_tokens": None}) for r in _done(3)]
    assert not summarize_sd(ADAPTER, before, before, failed, expect_sd=True).stalled


def test_per_request_counts_without_steps_compare_on_what_both_sides_have() -> None:
    counters = SDCounts(source="counters", num_steps=24, num_draft_tokens=95, num_accepted_tokens=15,
                        accepted_per_pos=[7, 3, 3, 2])
    per_request = SDCounts(source="per_request", num_steps=None, num_draft_tokens=95, num_accepted_tokens=15)
    agree, text = compare_counts(counters, per_request)
    assert agree and "step counts not available" in text
    off_by_one = per_request.model_copy(update={"num_accepted_tokens": 14})
    assert compare_counts(counters, off_by_one)[0] is False
    assert per_request.acceptance_length is None and per_request.per_position_rate == []
    assert per_request.acceptance_rate == 15 / 95


def test_a_sum_with_one_unknown_step_count_has_no_step_count() -> None:
    known = SDCounts(source="per_request", num_steps=3, num_draft_tokens=9, num_accepted_tokens=4)
    unknown = SDCounts(source="per_request", num_steps=None, num_draft_tokens=8, num_accepted_tokens=2)
    pooled = sum_counts([known, unknown])
    assert pooled.num_steps is None and pooled.num_draft_tokens == 17 and pooled.num_accepted_tokens == 6
    assert sum_counts([known, known]).num_steps == 6
