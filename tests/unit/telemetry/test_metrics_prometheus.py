"""Prometheus exposition parsing and counter deltas (telemetry/prometheus.py) on real vLLM /metrics text.

Fixtures in tests/fixtures/vllm were captured verbatim from a vLLM 0.32 CPU server (tiny random Llama,
draft_model = the target itself, K=3, temperature 0) before and after 5 requests (3 chat, 1 streaming
chat, 1 completion), and from the same server started without speculation (metrics_nospec.txt).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from specmeter.common.errors import EngineError
from specmeter.telemetry.prometheus import Snapshot, counter_delta, parse_exposition, series_key

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "vllm"

DRAFTS = "vllm:spec_decode_num_drafts_total"
DRAFT_TOKENS = "vllm:spec_decode_num_draft_tokens_total"
ACCEPTED = "vllm:spec_decode_num_accepted_tokens_total"
PER_POS = "vllm:spec_decode_num_accepted_tokens_per_pos_total"
SD_NAMES = [DRAFTS, DRAFT_TOKENS, ACCEPTED, PER_POS]


def load(name: str) -> Snapshot:
    return parse_exposition((FIXTURES / name).read_text(encoding="utf-8"))


# ---- real vLLM text ------------------------------------------------------------------------------


def test_real_before_snapshot_has_zeroed_sd_counters() -> None:
    snap = load("metrics_before.txt")
    for name in (DRAFTS, DRAFT_TOKENS, ACCEPTED):
        assert snap.value(name) == 0.0
    assert snap.series(PER_POS) == {"position=0": 0.0, "position=1": 0.0, "position=2": 0.0}


def test_real_after_snapshot_exact_names_not_polluted_by_created_twins() -> None:
    snap = load("metrics_after.txt")
    # The `_created` twins are Unix timestamps (~1.7e9): exact-name matching keeps them separate.
    created = snap.value("vllm:spec_decode_num_drafts_created")
    assert created is not None and created > 1e9
    # 5 requests x 6 steps, 3 tokens drafted and accepted each (draft == target, greedy).
    assert snap.value(DRAFTS) == 30.0
    assert snap.value(DRAFT_TOKENS) == 90.0
    assert snap.value(ACCEPTED) == 90.0
    assert snap.series(PER_POS) == {"position=0": 30.0, "position=1": 30.0, "position=2": 30.0}
    for name in (DRAFTS, DRAFT_TOKENS, ACCEPTED, PER_POS):
        assert all(v < 1e6 for v in snap.series(name).values())
    # Labels other than replica/model labels stay in the key; every series is kept.
    assert snap.value("vllm:request_success_total", "finished_reason=length") == 5.0
    assert snap.value("vllm:request_success_total", "finished_reason=stop") == 0.0


def test_real_histogram_series_keyed_by_le() -> None:
    snap = load("metrics_after.txt")
    buckets = snap.series("vllm:e2e_request_latency_seconds_bucket")
    assert buckets, "the e2e latency histogram should be present"
    assert all(k.startswith("le=") for k in buckets)
    # cumulative buckets: +Inf equals the count, which equals the number of finished requests
    assert buckets["le=+Inf"] == snap.value("vllm:e2e_request_latency_seconds_count") == 5.0


def test_real_nospec_has_no_sd_counters_but_has_traffic_counters() -> None:
    snap = load("metrics_nospec.txt")
    for name in SD_NAMES:
        assert not snap.has(name)
    assert not any("spec_decode" in name for name in snap.samples)
    assert snap.has("vllm:request_success_total")
    assert snap.has("vllm:generation_tokens_total")


def test_real_counter_delta() -> None:
    before, after = load("metrics_before.txt"), load("metrics_after.txt")
    d = counter_delta(before, after, [*SD_NAMES, "vllm:generation_tokens_total"])
    assert d.valid and d.invalid_reason is None
    assert d.missing == []
    assert d.value(DRAFTS) == 30.0
    assert d.value(DRAFT_TOKENS) == 90.0
    assert d.value(ACCEPTED) == 90.0
    assert d.series(PER_POS) == {"position=0": 30.0, "position=1": 30.0, "position=2": 30.0}
    assert d.value("vllm:generation_tokens_total") == 5 * 24  # 5 requests, max_tokens 24 each
    # Reverse order: every counter that moved went down -> invalid, never a negative delta used silently.
    rev = counter_delta(after, before, SD_NAMES)
    assert not rev.valid
    assert rev.invalid_reason is not None and "went down" in rev.invalid_reason
    assert DRAFTS in rev.invalid_reason


def test_real_counter_delta_against_nospec_reports_missing() -> None:
    d = counter_delta(load("metrics_before.txt"), load("metrics_nospec.txt"), SD_NAMES)
    assert sorted(d.missing) == sorted(SD_NAMES)
    assert d.values == {}


# ---- crafted text --------------------------------------------------------------------------------


def two_engine_text(e0: float, e1: float, pos0: tuple[float, float], created: float = 1.7e9) -> str:
    return f"""# HELP vllm:spec_decode_num_drafts_total Number of spec decoding drafts.
# TYPE vllm:spec_decode_num_drafts_total counter
vllm:spec_decode_num_drafts_total{{engine="0",model_name="m"}} {e0}
vllm:spec_decode_num_drafts_total{{engine="1",model_name="m"}} {e1}
# HELP vllm:spec_decode_num_drafts_created Number of spec decoding drafts.
# TYPE vllm:spec_decode_num_drafts_created gauge
vllm:spec_decode_num_drafts_created{{engine="0",model_name="m"}} {created}
vllm:spec_decode_num_drafts_created{{engine="1",model_name="m"}} {created + 1}
# HELP vllm:spec_decode_num_accepted_tokens_per_pos_total Accepted tokens per draft position.
# TYPE vllm:spec_decode_num_accepted_tokens_per_pos_total counter
vllm:spec_decode_num_accepted_tokens_per_pos_total{{engine="0",model_name="m",position="0"}} {pos0[0]}
vllm:spec_decode_num_accepted_tokens_per_pos_total{{engine="1",model_name="m",position="0"}} {pos0[1]}
vllm:spec_decode_num_accepted_tokens_per_pos_total{{engine="0",model_name="m",position="1"}} 1.0
# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{{engine="0",model_name="m"}} 2.0
vllm:num_requests_running{{engine="1",model_name="m"}} 3.0
"""


def test_two_engines_are_summed() -> None:
    snap = parse_exposition(two_engine_text(10.0, 7.0, (4.0, 5.0)))
    assert snap.value(DRAFTS) == 17.0
    assert snap.series(PER_POS) == {"position=0": 9.0, "position=1": 1.0}
    assert snap.value("vllm:num_requests_running") == 5.0
    assert snap.value("vllm:spec_decode_num_drafts_created") == pytest.approx(2 * 1.7e9 + 1)


def test_two_engine_counter_delta() -> None:
    before = parse_exposition(two_engine_text(10.0, 7.0, (4.0, 5.0)))
    after = parse_exposition(two_engine_text(15.0, 9.0, (6.0, 8.0)))
    d = counter_delta(before, after, [DRAFTS, PER_POS])
    assert d.valid
    assert d.value(DRAFTS) == 7.0
    assert d.series(PER_POS) == {"position=0": 5.0, "position=1": 0.0}


def test_decreasing_counter_marks_invalid() -> None:
    before = parse_exposition(two_engine_text(10.0, 7.0, (4.0, 5.0)))
    # engine 0 restarted (10 -> 2) while engine 1 moved on: the sum went down.
    after = parse_exposition(two_engine_text(2.0, 9.0, (4.0, 5.0)))
    d = counter_delta(before, after, [DRAFTS, PER_POS])
    assert not d.valid
    assert d.invalid_reason is not None
    assert DRAFTS in d.invalid_reason and "restarted" in d.invalid_reason
    assert "\n" not in d.invalid_reason


def test_new_series_counts_from_zero_and_vanished_series_invalid() -> None:
    before = parse_exposition('vllm:x_total{position="0"} 3\n')
    after = parse_exposition('vllm:x_total{position="0"} 5\nvllm:x_total{position="1"} 2\n')
    d = counter_delta(before, after, ["vllm:x_total"])
    assert d.valid
    assert d.series("vllm:x_total") == {"position=0": 2.0, "position=1": 2.0}
    gone = counter_delta(after, parse_exposition('vllm:x_total{position="0"} 9\n'), ["vllm:x_total"])
    assert not gone.valid and "vanished" in (gone.invalid_reason or "")


def test_missing_series_goes_to_missing() -> None:
    snap = parse_exposition("vllm:a_total 1\n")
    d = counter_delta(snap, snap, ["vllm:a_total", "vllm:b_total"])
    assert d.missing == ["vllm:b_total"]
    assert d.valid
    assert d.value("vllm:a_total") == 0.0
    assert d.value("vllm:b_total") == 0.0  # default for an absent name


def test_series_key_drops_replica_and_model_labels() -> None:
    assert series_key({"engine": "0", "model_name": "m", "position": "2"}) == "position=2"
    assert series_key({"engine": "1", "model_name": "m"}) == ""
    assert series_key({"b": "2", "a": "1", "dp_rank": "3"}) == "a=1,b=2"


def test_nan_samples_are_ignored() -> None:
    snap = parse_exposition("vllm:g NaN\nvllm:h 2\n")
    assert snap.value("vllm:g") is None
    assert snap.value("vllm:h") == 2.0


@pytest.mark.parametrize(
    "text",
    [
        "hello world",
        "<html><body>Not Found</body></html>",
        '{"detail": "Not Found"}',
        'vllm:x_total{engine="0" 1',
        "vllm:x_total notanumber",
    ],
)
def test_malformed_text_raises_engine_error(text: str) -> None:
    with pytest.raises(EngineError, match="not Prometheus exposition"):
        parse_exposition(text)


def test_empty_text_is_an_empty_snapshot() -> None:
    assert parse_exposition("").samples == {}


@settings(max_examples=300, deadline=None)
@given(st.text())
def test_arbitrary_text_parses_or_raises_engine_error(text: str) -> None:
    try:
        snap = parse_exposition(text)
    except EngineError as exc:
        assert "\n" not in str(exc)  # errors reach the user as one line
        return
    for series in snap.samples.values():
        for value in series.values():
            assert isinstance(value, float)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.one_of(
            st.sampled_from([
                "# TYPE vllm:x_total counter", "# HELP vllm:x_total help", 'vllm:x_total{engine="0"} 1',
                'vllm:x_total{engine="1",position="0"} 2.5', "vllm:x_created 1.7e9", "", "{", "}", "=",
                'vllm:y{le="+Inf"} 3', "vllm:z NaN", "vllm:z +Inf", "# EOF",
            ]),
            st.text(max_size=20),
        ),
        max_size=12,
    )
)
def test_exposition_like_text_parses_or_raises_engine_error(lines: list[str]) -> None:
    try:
        parse_exposition("\n".join(lines) + "\n")
    except EngineError as exc:
        assert "\n" not in str(exc)
