"""The lossless check (analysis/lossless.py, and where analysis runs it) on synthetic records: at
temperature 0 each candidate output must equal the baseline's for the same request."""

from __future__ import annotations

from typing import Any

import pytest

from specmeter.analysis.decide import FORCED_LENGTH_NOTE, lossless
from specmeter.analysis.lossless import MAX_LISTED, first_difference, lossless_check
from specmeter.config.models import EngineSpec, LoadSpec, SpecConfig
from specmeter.plans.run import BASELINE, run_plan
from specmeter.schemas.plan import PlannedConfig, WorkloadSelection
from specmeter.schemas.records import RequestRecord
from specmeter.schemas.results import RunSummary

SPEC = SpecConfig(method="ngram", num_speculative_tokens=4)
CAND = "ngram-k4"


def _plan(**load: Any) -> Any:
    return run_plan(EngineSpec(model="/m"), SPEC, LoadSpec(concurrency=[1, 4], **load), baseline=True,
                    baseline_endpoint=None, workload=WorkloadSelection(dataset="sample"))


def _configs() -> tuple[PlannedConfig, PlannedConfig]:
    plan = _plan()
    return plan.config(CAND), plan.config(BASELINE)


def rec(config_id: str, conv: str, ids: list[int] | None, text: str | None = None, *, point: str = "c1",
        repeat: int = 0, turn: int = 0, ok: bool = True, warmup: bool = False) -> RequestRecord:
    return RequestRecord(config_id=config_id, point_id=point, repeat=repeat, conversation_id=conv, turn=turn,
                         ok=ok, warmup=warmup, output_token_ids=ids,
                         output_text=text if text is not None else " ".join(f"t{i}" for i in ids or []))


def pair(conv: str, cand: list[int] | None, base: list[int] | None, **kw: Any) -> list[RequestRecord]:
    return [rec(CAND, conv, cand, **kw), rec(BASELINE, conv, base, **kw)]


def test_first_difference() -> None:
    assert first_difference([1, 2, 3], [1, 2, 3]) is None
    assert first_difference([1, 2, 3], [1, 9, 3]) == 1
    assert first_difference([1, 2], [1, 2, 3]) == 2  # a prefix differs where the shorter one ends
    assert first_difference([1, 2, 3], [1]) == 1
    assert first_difference([], []) is None
    assert first_difference("abc", "abd") == 2


def test_identical_outputs_match_on_token_ids() -> None:
    cand, base = _configs()
    records = [*pair("q0", [5, 6, 7], [5, 6, 7]), *pair("q1", [8], [8]), *pair("q1", [9, 9], [9, 9], turn=1)]
    check = lossless_check(cand, base, records)
    assert (check.config_id, check.baseline_id) == (CAND, BASELINE)
    assert check.basis == "token ids"
    assert check.compared == check.matched == 3 and check.match_rate == 1.0
    assert check.mismatches == []


def test_a_difference_is_located_per_request() -> None:
    cand, base = _configs()
    records = [
        *pair("q0", [5, 6, 7, 8], [5, 6, 0, 8]),
        *pair("q1", [1, 2], [1, 2, 3]),  # candidate stopped early
        *pair("q2", [4, 4], [4, 4]),
        *pair("q0", [5, 6], [5, 6], point="c4"),
    ]
    check = lossless_check(cand, base, records)
    assert check.compared == 4 and check.matched == 2 and check.match_rate == 0.5
    found = {(m.point_id, m.conversation_id): m for m in check.mismatches}
    assert set(found) == {("c1", "q0"), ("c1", "q1")}
    assert (found["c1", "q0"].first_diff, found["c1", "q0"].candidate_len, found["c1", "q0"].baseline_len) == (2, 4, 4)
    assert (found["c1", "q1"].first_diff, found["c1", "q1"].candidate_len, found["c1", "q1"].baseline_len) == (2, 2, 3)


def test_only_requests_both_sides_completed_are_compared() -> None:
    cand, base = _configs()
    records = [
        *pair("q0", [1, 2], [1, 2]),
        rec(CAND, "q1", [1]), rec(BASELINE, "q1", [2], ok=False),  # the baseline failed: nothing to compare
        rec(CAND, "q2", [3]),  # only the candidate ran it
        *pair("warm", [1], [2], warmup=True),  # warmup is never compared
        rec(CAND, "q3", [1], repeat=1), rec(BASELINE, "q3", [2], repeat=0),  # different repeats are not a pair
        rec("other-config", "q0", [9, 9]),
    ]
    check = lossless_check(cand, base, records)
    assert check.compared == check.matched == 1


def test_text_is_compared_when_token_ids_are_missing_on_either_side() -> None:
    cand, base = _configs()
    records = [*pair("q0", [1, 2], [1, 2], text="same text"),
               rec(CAND, "q1", None, "hello world"), rec(BASELINE, "q1", [7, 8], "hello there")]
    check = lossless_check(cand, base, records)
    assert check.basis == "text"
    assert check.compared == 2 and check.matched == 1
    (m,) = check.mismatches
    assert m.conversation_id == "q1" and m.first_diff == len("hello ")  # counts characters
    assert (m.candidate_len, m.baseline_len) == (len("hello world"), len("hello there"))


def test_nothing_compared_has_no_rate_and_mismatches_are_capped() -> None:
    cand, base = _configs()
    empty = lossless_check(cand, base, [])
    assert empty.compared == 0 and empty.match_rate is None and empty.mismatches == []
    many = [r for i in range(MAX_LISTED + 10) for r in pair(f"q{i:03d}", [1, i], [1, -1])]
    check = lossless_check(cand, base, many)
    assert check.compared == MAX_LISTED + 10 and check.matched == 0
    assert len(check.mismatches) == MAX_LISTED  # the list is capped; the counts are not


def _summary(**load: Any) -> RunSummary:
    return RunSummary(specmeter_version="t", created_utc="2026-01-01T00:00:00Z", plan=_plan(**load))


def test_analysis_checks_only_at_temperature_zero() -> None:
    records = [*pair("q0", [1, 2], [1, 3])]
    (check,) = lossless(_summary(), records)
    assert check.config_id == CAND and check.matched == 0
    assert lossless(_summary(temperature=0.7), records) == []


@pytest.mark.parametrize(("load", "needle"), [({"temperature": 0.7}, "temperature > 0"),
                                              ({"ignore_eos": True}, FORCED_LENGTH_NOTE)])
def test_analysis_says_why_outputs_are_not_comparable(load: dict[str, Any], needle: str) -> None:
    from specmeter.analysis.decide import analyze

    assert analyze(_summary(), []).lossless_note is None
    assert needle in (analyze(_summary(**load), []).lossless_note or "")
