"""Run-level SD results for one load point: counter deltas, per-request sums, and whether they agree.

The engine's counters are the reference; per-request stats (when the engine gives them) must sum to
the same numbers, and the summary says so, or says by how much and why they differ. When the counters
cannot be trusted (server restarted, series missing, foreign traffic), per-request stats are preferred.
An engine's clear-on-read statistics read through the point (`IterationFeed`) give the run-level counts
when the counters give none (or no step count), and are checked against the counters when both exist;
a feed known to have missed part of the point is reported and never used.
"""

from __future__ import annotations

from collections.abc import Sequence

from specmeter.engines.base import EngineStats
from specmeter.metrics.sd import sum_counts
from specmeter.schemas.records import RequestRecord
from specmeter.schemas.sd import SDCounts, SDSummary
from specmeter.telemetry.feed import IterationFeed
from specmeter.telemetry.prometheus import CounterDelta, Snapshot, counter_delta

PER_REQUEST = "per-request sums"
COUNTER_DELTAS = "the /metrics counter deltas"


def compare_counts(counters: SDCounts, per_request: SDCounts, *, what: str = PER_REQUEST,
                   against: str = COUNTER_DELTAS, positions: bool = True) -> tuple[bool, str]:
    """Field-by-field comparison of per-request sums (or any other count of the same steps, named by `what`)
    against counter deltas (or whatever `against` names); `positions=False` when one side has no per-position
    counts."""
    diffs: list[str] = []
    for name in ("num_steps", "num_draft_tokens", "num_accepted_tokens"):
        a, b = getattr(per_request, name), getattr(counters, name)
        if a is None or b is None:  # an engine that does not count it on one side: nothing to compare
            continue
        if a != b:
            diffs.append(f"{name} {a} vs {b} ({a - b:+d})")
    if positions and per_request.num_steps is not None:  # without per-step detail, per-request positions are unknown
        n = max(len(counters.accepted_per_pos), len(per_request.accepted_per_pos))
        pa = per_request.accepted_per_pos + [0] * (n - len(per_request.accepted_per_pos))
        ca = counters.accepted_per_pos + [0] * (n - len(counters.accepted_per_pos))
        if pa != ca:
            diffs.append(f"accepted_per_pos {pa} vs {ca}")
    if not diffs:
        unknown = ""
        if per_request.num_steps is None:
            unknown = (" (per-request step counts not available from this engine)" if what == PER_REQUEST
                       else f" (step counts not available from {what})")
        return True, f"{what} equal {against}" + unknown
    return False, f"{what} differ from {against}: " + "; ".join(diffs)


def summarize_sd(
    adapter: EngineStats,
    before: Snapshot | None,
    after: Snapshot | None,
    records: Sequence[RequestRecord],
    scrape_error: str | None = None,
    expect_sd: bool = False,
    feed: IterationFeed | None = None,
) -> SDSummary:
    """`expect_sd`: the configuration asked for speculation, so drafting nothing is a failure to flag.
    `feed`: the engine's clear-on-read statistics read through the point (`EngineStats.iteration_feed`): the
    run-level counts when the counters give none (or no step count), checked against them otherwise."""
    summary = _summarize(adapter, before, after, records, scrape_error, feed)
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
          and summary.headline is None):
        summary.stalled = True
        summary.reason = f"speculation was asked for but never started: {summary.reason}"
    return summary


def _counted(adapter: EngineStats, delta: CounterDelta) -> tuple[SDCounts | None, str | None]:
    """The counters' SD counts, or why they are impossible (more accepted than drafted: a server that lies): a data
    fault of the point, never a crash; the per-request stats stand in where there are any."""
    try:
        return adapter.sd_from_counters(delta), None
    except ValueError as exc:
        detail = " ".join(str(exc).split(" for SDCounts")[0].split())
        return None, f"the server's SD counters are impossible ({detail.splitlines()[0][:160]}); they are not used"


def _join(*parts: str | None) -> str | None:
    return "; ".join(p for p in parts if p) or None


def _summarize(
    adapter: EngineStats,
    before: Snapshot | None,
    after: Snapshot | None,
    records: Sequence[RequestRecord],
    scrape_error: str | None,
    feed: IterationFeed | None = None,
) -> SDSummary:
    measured = [r for r in records if not r.warmup]
    with_stats = [r.sd for r in measured if r.sd is not None]
    per_request = sum_counts(with_stats) if with_stats else None
    req_als = [al for s in with_stats if (al := s.acceptance_length) is not None]

    # The feed's counts, unless it is known to have missed some of the point (then it is only reported).
    fed = feed.counts() if feed is not None else None
    fed_what = f"the iteration stats of {feed.path}" if feed is not None else ""
    gap = feed.incomplete() if feed is not None and fed is not None else None
    fed_note = f"{fed_what} are incomplete, so not used: {gap}" if gap else None
    if gap:
        fed = None

    counters: SDCounts | None = None
    invalid: str | None = None
    foreign: str | None = None
    restarted = False
    if before is not None and after is not None:
        if not adapter.sd_enabled_in(after):
            if per_request is None and fed is None:
                return SDSummary(
                    available=False,
                    reason=_join("speculation is off on this server: it exposes no SD counters and no per-request "
                                 "SD stats", fed_note),
                )
            if adapter.sd_enabled_in(before):
                restarted = True
                invalid = ("SD counters vanished from /metrics during the run (restart or a different server?): "
                           + ", ".join(n for n in adapter.sd_counter_names if before.has(n)))
            elif per_request is None or fed is not None:
                invalid = f"no SD counters ({', '.join(adapter.sd_counter_names[:3])}) at {adapter.metrics_path}"
            else:
                invalid = ("no SD counters (" + ", ".join(adapter.sd_counter_names[:3]) + ") in /metrics although "
                           "the responses carry per-request SD stats; they are missing, so per-request stats are used")
        else:
            delta = counter_delta(before, after, adapter.sd_counter_names)
            invalid = delta.invalid_reason
            restarted = invalid is not None and not delta.impossible
            counters, impossible = _counted(adapter, delta) if invalid is None else (None, None)
            invalid = invalid or impossible
            if counters is None and invalid is None:
                invalid = ("SD counters missing from /metrics after the run: " + ", ".join(delta.missing)
                           if delta.missing else f"{adapter.name}'s counters give no run-level SD counts")
            foreign = _foreign_traffic(adapter, before, after, measured)
    elif per_request is None and fed is None:
        return SDSummary(available=False, reason=_join(scrape_error or "no /metrics snapshots and no per-request SD "
                                                       "stats", fed_note))
    else:
        invalid = scrape_error

    prom = counters if invalid is None else None
    checks: list[tuple[bool, str]] = []
    failed = sum(1 for r in measured if not r.ok)
    if fed is not None and prom is not None:
        agree, text = compare_counts(prom, fed, what=fed_what, against=f"the {adapter.metrics_path} counter deltas",
                                     positions=False)
        if not agree and failed:
            text += f" ({failed} requests failed: the engine may count their steps in one of the two only)"
        checks.append((agree, text))
    run_counts, fed_used = prom, False
    if fed is not None and not restarted and (prom is None or (prom.num_steps is None and fed.num_steps is not None)):
        # The counters give nothing (or no step count): the feed's totals are the run-level counts.
        why = (invalid or f"no snapshots of {adapter.metrics_path}" if prom is None
               else f"the counters at {adapter.metrics_path} give no step count")
        reads, misses = (feed.reads, feed.failed_reads) if feed is not None else (0, 0)
        invalid = (f"{why}; run-level counts come from {fed_what}, read through the point "
                   f"({reads} read{'' if reads == 1 else 's'}" + (f", {misses} failed)" if misses else ")"))
        run_counts, fed_used = fed, True
    elif prom is None:
        invalid = _join(invalid, fed_note)

    summary = SDSummary(
        available=True,
        counters=run_counts,
        counters_invalid_reason=invalid,
        per_request=per_request,
        per_request_mean_al=sum(req_als) / len(req_als) if req_als else None,
        requests_with_stats=len(with_stats),
        foreign_traffic=foreign,
    )
    if summary.counters is not None and per_request is not None:
        agree, text = compare_counts(summary.counters, per_request, against=fed_what if fed_used else COUNTER_DELTAS,
                                     positions=not fed_used)
        if not agree and failed:
            text += f" ({failed} failed requests carry no per-request stats but were counted by the engine)"
        if not agree and foreign:
            text += " (other clients' traffic reached the server during the run)"
        checks.insert(0, (agree, text))
    if checks:
        summary.agree = all(ok for ok, _ in checks)
        summary.agreement = _join(*(text for _, text in checks))
    if prom is not None and fed_note:
        summary.agreement = _join(summary.agreement, fed_note)
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
