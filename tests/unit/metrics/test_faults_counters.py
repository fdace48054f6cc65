"""Run-level SD numbers against a server whose /metrics misbehave: restarts (counters go down), missing SD
series, foreign traffic, and per-request stats that lie. And the clean case, where everything agrees.

Driven through runner.execute in attach mode; the fake engine knows the true step counts, so every
expectation is exact.
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import pytest

from fakeengine.drive import attach_plan, conversations, negative_numbers, only_config, point_requests, run_plan
from fakeengine.server import FakeEngine
from fakeengine.steps import Tally
from fakeengine.vllm import VLLM
from specmeter.common.errors import InputError
from specmeter.engines.registry import plan_stats
from specmeter.metrics.requests import parse_records
from specmeter.rundir.store import RunStore

pytestmark = pytest.mark.timeout(30)
K = 4
WORKLOAD = [
    "Summarise the plot of Hamlet.",
    ["Write a haiku about rain.", "Now one about snow.", "And one about fog."],
    "List three sorting algorithms.",
    ["What is a mutex?", "Show one in Python."],
    "Translate 'good morning' into French.",
    "Explain TCP slow start.",
]


def _run(server: FakeEngine, root: Path, **load):  # type: ignore[no-untyped-def]
    load.setdefault("concurrency", [2])
    plan = attach_plan(server.url, conversations(WORKLOAD), k=K, **load)
    summary, error, _ = run_plan(plan, root)
    assert error is None, repr(error)
    assert summary.status == "complete"
    assert not server.problems, server.problems
    return summary, parse_records(RunStore(root).read_records(), plan_stats(summary.plan))


def _sd(summary):  # type: ignore[no-untyped-def]
    """SD of the run's first point."""
    return only_config(summary).points[0].sd


def _measured_reported(server: FakeEngine, records) -> Tally:  # type: ignore[no-untyped-def]
    """What the server's per-request stats claimed for the measured (non-warmup) requests."""
    t = Tally()
    for r in records:
        if not r.warmup and r.sd is not None:
            t.requests += 1
            t.steps += r.sd.num_steps
            t.drafted += r.sd.num_draft_tokens
            t.accepted += r.sd.num_accepted_tokens
    return t


def _no_negatives(root: Path, summary) -> None:  # type: ignore[no-untyped-def]
    on_disk = json.loads((root / "summary.json").read_text())
    assert negative_numbers(on_disk) == []
    assert negative_numbers(json.loads(summary.model_dump_json())) == []


# ---- clean --------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("detailed", "num_engines", "draft_per_pos"),
    [(True, 1, False), (False, 1, False), (True, 2, True), (False, 2, False)],
    ids=["detailed", "histogram-only", "two-engines+draft-per-pos", "histogram-two-engines"],
)
def test_clean_run_counters_and_per_request_agree(tmp_path: Path, detailed: bool, num_engines: int,
                                                   draft_per_pos: bool) -> None:
    with FakeEngine(VLLM(detailed=detailed, draft_per_pos=draft_per_pos), k=K, num_engines=num_engines,
                    prior_requests=3) as server:
        summary, records = _run(server, tmp_path / "run", concurrency=[1, 3], warmup=2)
    levels = only_config(summary).points
    assert [lv.point_id for lv in levels] == ["c1", "c3"]
    convs = conversations(WORKLOAD)
    for lv, n in zip(levels, [1, 3]):
        sd = lv.sd
        assert sd.available and sd.reason is None
        assert sd.reference == "counters", sd
        assert sd.counters_invalid_reason is None and sd.foreign_traffic is None
        assert sd.agree is True, sd.agreement
        assert sd.agreement and "equal" in sd.agreement
        c, p = sd.counters, sd.per_request
        assert c is not None and p is not None
        assert (c.num_steps, c.num_draft_tokens, c.num_accepted_tokens) == (
            p.num_steps, p.num_draft_tokens, p.num_accepted_tokens)
        assert c.num_steps > 0
        assert 1.0 <= c.acceptance_length <= K + 1
        assert 0.0 <= c.acceptance_rate <= 1.0
        assert c.mean_draft_length == pytest.approx(K)
        rates = c.per_position_rate
        assert len(rates) == K and all(0.0 <= a <= 1.0 for a in rates)
        assert all(x >= y for x, y in itertools.pairwise(rates))  # accepting i+1 tokens needs accepting i
        # every request of the point (the workload, cycled up to 4 x concurrency requests) has stats
        assert sd.requests_with_stats == lv.latency.num_requests == point_requests(convs, n)
        assert lv.latency.num_requests == sum(1 for r in records if r.point_id == lv.point_id and not r.warmup)
        assert sd.per_request_mean_al is not None and 1.0 <= sd.per_request_mean_al <= K + 1
        if draft_per_pos:
            assert c.drafted_per_pos == [c.num_steps] * K
    # nothing lost between levels: both levels' counter deltas plus the warmup requests are exactly
    # what the server counted for real requests
    warm_steps = sum(r.sd.num_steps for r in records if r.warmup and r.sd)
    assert sum(lv.sd.counters.num_steps for lv in levels) + warm_steps == server.true_totals.steps
    warm_acc = sum(r.sd.num_accepted_tokens for r in records if r.warmup and r.sd)
    assert sum(lv.sd.counters.num_accepted_tokens for lv in levels) + warm_acc == server.true_totals.accepted
    _no_negatives(tmp_path / "run", summary)


def test_counters_only_server(tmp_path: Path) -> None:
    """vLLM without per-request stats: the counters are the reference, nothing to compare."""
    with FakeEngine(k=K, per_request_stats=False) as server:
        summary, _ = _run(server, tmp_path / "run")
    sd = _sd(summary)
    assert sd.available and sd.reference == "counters" and sd.per_request is None
    assert sd.agree is None
    assert sd.counters.num_steps == server.true_totals.steps


@pytest.mark.parametrize("settings", [{"per_request_stats": False, "hide_sd": "all"}, {"hide_sd": "all"}],
                         ids=["speculation-off", "sd-series-never-exposed"])
def test_a_candidate_whose_metrics_show_no_speculation_is_refused_before_measuring(tmp_path: Path,
                                                                                  settings: dict[str, Any]) -> None:
    """vLLM registers its SD counters only with a speculative config: a server whose /metrics shows none does not
    run the config the plan gives it (engines/probe.check_drafting), whatever its responses carry."""
    with FakeEngine(k=K, **settings) as server:
        plan = attach_plan(server.url, conversations(WORKLOAD), k=K, concurrency=[2])
        _, error, _ = run_plan(plan, tmp_path / "run")
        sent = server.completion_requests()
    assert isinstance(error, InputError) and "runs no speculative decoding" in str(error)
    assert not sent


# ---- counters reset (server restart) --------------------------------------------------------------------
RESTARTS = {
    # counters drop below their value at the level's start
    "mid-level": ({"restart_after_requests": 3}, 30),
    # after the point's last request, before its closing /metrics snapshot
    "at-the-after-scrape": ({"restart_on_idle_scrape": point_requests(conversations(WORKLOAD), 1)}, 30),
    # the restart comes early and later traffic pushes every counter above its old value: only the
    # changed _created twins show it
    "hidden-by-later-traffic": ({"restart_after_requests": 1}, 1),
}


@pytest.mark.parametrize("how", list(RESTARTS))
def test_counter_reset_falls_back_to_per_request(tmp_path: Path, how: str) -> None:
    faults, prior = RESTARTS[how]
    with FakeEngine(k=K, prior_requests=prior, **faults) as server:
        drafts_before_restart = server.counters[0].drafts
        summary, records = _run(server, tmp_path / "run", concurrency=[1])
    assert server.restarts == 1
    if how == "hidden-by-later-traffic":  # the premise: no counter went down
        assert server.counters[0].drafts > drafts_before_restart
    sd = _sd(summary)
    assert sd.counters is None
    assert sd.counters_invalid_reason and "restart" in sd.counters_invalid_reason
    if how != "hidden-by-later-traffic":
        assert "went down" in sd.counters_invalid_reason
    assert "vllm:spec_decode_num_drafts_total" in sd.counters_invalid_reason  # names a series
    assert sd.reference == "per_request" and sd.available
    assert sd.headline is sd.per_request
    assert sd.agree is None  # nothing trustworthy to compare against
    told = _measured_reported(server, records)
    assert sd.per_request.num_steps == told.steps == server.reported_totals.steps
    assert sd.per_request.num_accepted_tokens == told.accepted
    assert 1.0 <= sd.per_request.acceptance_length <= K + 1
    _no_negatives(tmp_path / "run", summary)


# ---- missing SD series ------------------------------------------------------------------------------------
REQUIRED = ("vllm:spec_decode_num_drafts_total", "vllm:spec_decode_num_draft_tokens_total",
            "vllm:spec_decode_num_accepted_tokens_total")


def test_missing_required_sd_series_gives_a_clear_reason(tmp_path: Path) -> None:
    """Only the per-position series are exposed: the totals are missing, and the summary names them."""
    with FakeEngine(k=K, hide_sd="required") as server:
        summary, records = _run(server, tmp_path / "run")
    sd = _sd(summary)
    assert sd.counters is None
    reason = sd.counters_invalid_reason
    assert reason and "missing" in reason
    for name in REQUIRED:
        assert name in reason
    assert sd.reference == "per_request" and sd.available
    assert sd.per_request.num_steps == _measured_reported(server, records).steps
    _no_negatives(tmp_path / "run", summary)


def test_all_sd_series_vanishing_but_per_request_stats_present(tmp_path: Path) -> None:
    """A server that stops showing its SD counters while its responses carry SD stats: per-request stats are used,
    and the summary says why the counters were not. (One that never shows them is refused before measuring.)"""
    with FakeEngine(k=K, hide_sd="all", hide_sd_from_scrape=2) as server:
        summary, records = _run(server, tmp_path / "run")
    sd = _sd(summary)
    assert sd.available and sd.reference == "per_request"
    assert sd.counters is None
    assert sd.per_request.num_steps == _measured_reported(server, records).steps
    reason = sd.counters_invalid_reason or sd.reason
    assert reason, "no reason given for ignoring /metrics although the responses carry SD stats"
    assert "missing" in reason or "vanished" in reason
    assert "spec_decode" in reason


# ---- foreign traffic ----------------------------------------------------------------------------------------
def test_foreign_traffic_is_flagged_and_per_request_used(tmp_path: Path) -> None:
    with FakeEngine(k=K, foreign_per_request=1) as server:
        summary, records = _run(server, tmp_path / "run")
    sd = _sd(summary)
    ours = sum(1 for r in records if not r.warmup)
    assert ours == point_requests(conversations(WORKLOAD), 2) == len(records)
    assert sd.foreign_traffic, "twice the requests we sent were counted by the server, unflagged"
    assert str(2 * ours) in sd.foreign_traffic and str(ours) in sd.foreign_traffic
    assert sd.reference == "per_request"
    assert sd.headline is sd.per_request
    assert sd.per_request.num_steps == server.reported_totals.steps
    # the counters are still shown, and disagree by exactly the foreign share, with the cause named
    assert sd.counters is not None and sd.counters.num_steps == 2 * sd.per_request.num_steps
    assert sd.agree is False and "other clients" in (sd.agreement or "")


def test_no_foreign_traffic_when_the_server_counts_exactly_our_requests(tmp_path: Path) -> None:
    with FakeEngine(k=K, prior_requests=5) as server:
        summary, _ = _run(server, tmp_path / "run")
    assert _sd(summary).foreign_traffic is None


# ---- lying per-request stats -----------------------------------------------------------------------------------
def test_lying_per_request_stats_disagree_and_say_by_how_much(tmp_path: Path) -> None:
    with FakeEngine(k=K, lie_extra_accepted=1) as server:
        summary, _ = _run(server, tmp_path / "run")
    sd = _sd(summary)
    told, true = server.reported_totals, server.true_totals
    diff = told.accepted - true.accepted
    assert diff > 0
    assert sd.reference == "counters"  # the counters are the reference when they are valid
    assert sd.counters.num_accepted_tokens == true.accepted
    assert sd.per_request.num_accepted_tokens == told.accepted
    assert sd.agree is False
    text = sd.agreement or ""
    assert f"num_accepted_tokens {told.accepted} vs {true.accepted} (+{diff})" in text, text
    assert "accepted_per_pos" in text
    assert "num_steps" not in text  # only what differs is named
    on_disk = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert on_disk["configs"][0]["points"][0]["sd"]["agree"] is False


# ---- /metrics that is not Prometheus text --------------------------------------------------------------
def test_garbage_metrics_page_does_not_stop_the_run(tmp_path: Path) -> None:
    """A server whose /metrics answers HTML: the run completes, per-request stats are used, and the
    summary names the problem instead of reporting counters."""
    with FakeEngine(k=K, garbage_metrics=True) as server:
        summary, records = _run(server, tmp_path / "run")
    sd = _sd(summary)
    assert sd.available and sd.reference == "per_request" and sd.counters is None
    assert sd.per_request.num_steps == _measured_reported(server, records).steps
    assert "Prometheus" in (sd.counters_invalid_reason or "")
    _no_negatives(tmp_path / "run", summary)
