"""Run-level SD results for one load point: counter deltas, per-request sums, and whether they agree.

The engine's counters are the reference; per-request stats (when the engine gives them) must sum to
the same numbers, and the summary says so, or says by how much and why they differ. When the counters
cannot be trusted (server restarted, series missing, foreign traffic), per-request stats are preferred.
"""

from __future__ import annotations

from collections.abc import Sequence

from specmeter.engines.base import EngineStats
from specmeter.metrics.prometheus import Snapshot, counter_delta
from specmeter.metrics.sd import sum_counts
from specmeter.schemas.records import RequestRecord
from specmeter.schemas.sd import SDCounts, SDSummary


def compare_counts(counters: SDCounts, per_request: SDCounts) -> tuple[bool, str]:
    """Field-by-field comparison of per-request sums against counter deltas."""
    diffs: list[str] = []
    for name in ("num_steps", "num_draft_tokens", "num_accepted_tokens"):
        a, b = getattr(per_request, name), getattr(counters, name)
        if a is None or b is None:  # an engine that does not count it on one side: nothing to compare
            continue
        if a != b:
            diffs.append(f"{name} {a} vs {b} ({a - b:+d})")
    if per_request.num_steps is not None:  # without per-step detail, per-request positions are unknown
        n = max(len(counters.accepted_per_pos), len(per_request.accepted_per_pos))
        pa = per_request.accepted_per_pos + [0] * (n - len(per_request.accepted_per_pos))
        ca = counters.accepted_per_pos + [0] * (n - len(counters.accepted_per_pos))
        if pa != ca:
            diffs.append(f"accepted_per_pos {pa} vs {ca}")
    if not diffs:
        unknown = " (per-request step counts not available from this engine)" if per_request.num_steps is None else ""
        return True, "per-request sums equal the /metrics counter deltas" + unknown
    return False, "per-request sums differ from /metrics deltas: " + "; ".join(diffs)


def summarize_sd(
    adapter: EngineStats,
    before: Snapshot | None,
    after: Snapshot | None,
    records: Sequence[RequestRecord],
    scrape_error: str | None = None,
    expect_sd: bool = False,
) -> SDSummary:
    """`expect_sd`: the configuration asked for speculation, so drafting nothing is a failure to flag."""
    summary = _summarize(adapter, before, after, records, scrape_error)
    summary.not_available = dict(adapter.unavailable)
    head = summary.headline
    completed = sum(1 for r in records if not r.warmup and r.ok and r.output_tokens)
    if head is not None and head.num_draft_tokens == 0 and completed:
        # Some engines keep SD counters at zero with speculation off (llama.cpp); TensorRT-LLM switches SD
        # off for good below its acceptance threshold; a misconfigured server never starts it. Either way
        # no step was speculative: an acceptance length here would be a made-up 1.
        summary.available, summary.reference = False, None
        summary.stalled = expect_sd
        summary.reason = (f"speculation stopped or never started: the engine drafted nothing over {completed} "
                          "completed requests" if expect_sd else
                          "speculation is off on this server: it drafted nothing")
    elif (expect_sd and completed and after is not None and not adapter.sd_enabled_in(after)
          and summary.per_request is None):
        summary.stalled = True
        summary.reason = f"speculation was asked for but never started: {summary.reason}"
    return summary


def _summarize(
    adapter: EngineStats,
    before: Snapshot | None,
    after: Snapshot | None,
    records: Sequence[RequestRecord],
    scrape_error: str | None,
) -> SDSummary:
    measured = [r for r in records if not r.warmup]
    with_stats = [r.sd for r in measured if r.sd is not None]
    per_request = sum_counts(with_stats) if with_stats else None
    req_als = [al for s in with_stats if (al := s.acceptance_length) is not None]

    counters: SDCounts | None = None
    invalid: str | None = None
    foreign: str | None = None
    if before is not None and after is not None:
        if not adapter.sd_enabled_in(after):
            if per_request is None:
                return SDSummary(
                    available=False,
                    reason="speculation is off on this server: it exposes no SD counters and no per-request SD stats",
                )
            if adapter.sd_enabled_in(before):
                invalid = ("SD counters vanished from /metrics during the run (restart or a different server?): "
                           + ", ".join(n for n in adapter.sd_counter_names if before.has(n)))
            else:
                invalid = ("no SD counters (" + ", ".join(adapter.sd_counter_names[:3]) + ") in /metrics although "
                           "the responses carry per-request SD stats; they are missing, so per-request stats are used")
        else:
            delta = counter_delta(before, after, adapter.sd_counter_names)
            invalid = delta.invalid_reason
            counters = adapter.sd_from_counters(delta) if invalid is None else None
            if counters is None and invalid is None:
                invalid = ("SD counters missing from /metrics after the run: " + ", ".join(delta.missing)
                           if delta.missing else f"{adapter.name}'s counters give no run-level SD counts")
            foreign = _foreign_traffic(adapter, before, after, measured)
    elif per_request is None:
        return SDSummary(available=False, reason=scrape_error or "no /metrics snapshots and no per-request SD stats")
    else:
        invalid = scrape_error

    summary = SDSummary(
        available=True,
        counters=counters if invalid is None else None,
        counters_invalid_reason=invalid,
        per_request=per_request,
        per_request_mean_al=sum(req_als) / len(req_als) if req_als else None,
        requests_with_stats=len(with_stats),
        foreign_traffic=foreign,
    )
    if summary.counters is not None and per_request is not None:
        agree, text = compare_counts(summary.counters, per_request)
        failed = sum(1 for r in measured if not r.ok)
        if not agree and failed:
            text += f" ({failed} failed requests carry no per-request stats but were counted by the engine)"
        if not agree and foreign:
            text += " (other clients' traffic reached the server during the run)"
        summary.agree, summary.agreement = agree, text
    if summary.counters is not None and not foreign:
        summary.reference = "counters"
    elif per_request is not None:
        summary.reference = "per_request"
    elif summary.counters is not None:
        summary.reference = "counters"
    else:
        summary.available = False
        summary.reason = invalid or "no SD statistics could be read"
    return summary


def _foreign_traffic(
    adapter: EngineStats, before: Snapshot, after: Snapshot, measured: Sequence[RequestRecord]
) -> str | None:
    """Requests finished by the server beyond ours mean someone else used it during the run."""
    name = adapter.traffic_counter_names.get("requests")
    if name is None:  # the engine counts no finished requests: foreign traffic cannot be seen this way
        return None
    b, a = before.series(name), after.series(name)
    if not a:
        return None
    server_done = sum(a.values()) - sum(b.values())
    ours = len(measured)
    if server_done > ours:
        return (
            f"the server finished {int(server_done)} requests during the run but specmeter sent {ours}: "
            "other traffic reached it, so counter deltas include foreign requests; per-request stats are used"
        )
    return None
