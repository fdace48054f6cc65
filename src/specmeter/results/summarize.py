"""A point's results as a pure function of what measuring it captured: its request records and the raw
telemetry of each attempt (captures/). The runner calls this when a point ends; `specmeter report --recompute`
calls it again on the stored files, so an old run gains new metrics and anyone can re-audit the counter
reconciliation from the files alone. A resumed point is no special path: its attempts are merged here.
"""

from __future__ import annotations

from collections.abc import Sequence

from specmeter.config.models import LoadPoint, LoadSpec, SpecConfig
from specmeter.engines.base import EngineStats
from specmeter.load.kinds import kind_of
from specmeter.metrics.categories import category_breakdown
from specmeter.metrics.goodput import summarize_goodput
from specmeter.metrics.input_length import length_breakdown
from specmeter.metrics.latency import summarize_latency
from specmeter.metrics.replicas import parse_scrape, pooled_samples, replica_shares, summed_snapshots
from specmeter.metrics.requests import with_sd
from specmeter.metrics.running import summarize_running
from specmeter.metrics.schedule import schedule_error
from specmeter.metrics.sd_summary import summarize_sd
from specmeter.metrics.synthetic import synthetic_check
from specmeter.rundir.store import latest_records
from specmeter.schemas.capture import Attempt, PointCapture
from specmeter.schemas.records import RequestRecord
from specmeter.schemas.results import PointResult
from specmeter.schemas.sd import SDSummary, SyntheticCheck
from specmeter.telemetry.feed import IterationFeed, replay

RESUMED_SD = ("point finished by --resume on a new server: counter deltas cover only the resumed requests, so "
              "per-request stats are used")


def summarize_point(capture: PointCapture, records: Sequence[RequestRecord], point: LoadPoint,
                    stats: EngineStats, *, expect_sd: bool, spec: SpecConfig | None = None,
                    load: LoadSpec | None = None) -> PointResult:
    """The PointResult of one (configuration, point, repeat) from its capture and every record it sent (warm-up
    and superseded ones included: they are sorted out here). `expect_sd`: the configuration asked for
    speculation, so drafting nothing is flagged. `spec` and `load`: the configuration's, as planned; with
    synthetic acceptance its measured acceptance is checked against the set one."""
    sent = [with_sd(r, stats) for r in records
            if (r.config_id, r.point_id, r.repeat) == (capture.config_id, capture.point_id, capture.repeat)
            and not r.warmup]
    tree = spec is not None and spec.drafts_tree
    if tree:  # every count of this configuration is of tree drafts, whichever side counted it
        sent = [r.model_copy(update={"sd": r.sd.model_copy(update={"tree": True})}) if r.sd is not None else r
                for r in sent]
    final = latest_records(sent)
    last = capture.attempts[-1]
    wall = sum(_wall(a, sent) for a in _all_attempts(capture, sent))
    resumed = len(_all_attempts(capture, sent)) > 1
    counted = [r for r in final if r.attempt == last.index]
    sd = _attempt_sd(last, counted, stats, expect_sd)
    if resumed and sd.available:
        sd = summarize_sd(stats, None, None, final, expect_sd=expect_sd)
        sd.counters_invalid_reason = RESUMED_SD
        counted = final
    if tree:
        sd = _as_tree(sd)
    if spec is not None and spec.synthetic and load is not None:
        sd.synthetic = _synthetic(sd, counted, stats, spec, load)
    steady = kind_of(point).steady_state(final, wall) if not resumed else None
    reads = last.reads()
    running = pooled_samples(reads)  # one replica's batch, pooled over several (metrics/replicas.py)
    return PointResult(
        point_id=capture.point_id, repeat=capture.repeat, instance=last.instance, started_s=last.started_s,
        latency=summarize_latency(final, wall), steady=steady,
        running_batch=summarize_running(running.name, running.samples, running.interval_s, steady)
        if running is not None else None,
        sd=sd, categories=category_breakdown(final), lengths=length_breakdown(final), resumed=resumed,
        goodput=summarize_goodput(final, wall, load.slo) if load is not None and load.slo is not None else None,
        schedule_error=schedule_error(final),
        replicas=replica_shares(reads, final, steady) if len(reads) > 1 else None, host=last.host,
    )


def _as_tree(sd: SDSummary) -> SDSummary:
    """The point's counts marked as tree drafts (the engines' readers never know the configuration's shape)."""
    marked = {name: counts.model_copy(update={"tree": True}) for name in ("counters", "per_request")
              if (counts := getattr(sd, name)) is not None}
    return sd.model_copy(update=marked)


def _synthetic(sd: SDSummary, records: Sequence[RequestRecord], stats: EngineStats, spec: SpecConfig,
               load: LoadSpec) -> SyntheticCheck | None:
    """The point's acceptance against the set rates, over the steps its headline counts cover (`records`)."""
    head = sd.headline
    if not sd.available or head is None or spec.synthetic_acceptance is None:
        return None
    drafted = head.drafted_per_pos
    other = sd.per_request
    if drafted is None and other is not None and other.num_steps == head.num_steps:
        drafted = other.drafted_per_pos  # the same steps, counted per request (vLLM's per-step stats)
    seed = (f"every request carried seed {load.seed} (temperature {load.temperature:g}) and the engine draws a "
            "seeded request's synthetic acceptance from it: the requests repeat one another's draws, so the error "
            "is larger than binomial and is not judged" if load.temperature > 0 else None)
    return synthetic_check(head, spec.synthetic_acceptance.rates_for(spec.k, stats.synthetic_length_schedule),
                           records, max_tokens=load.max_tokens, fits_cap=stats.drafts_fit_output_cap,
                           engine_drafted=drafted, seed_note=seed)


def _all_attempts(capture: PointCapture, records: Sequence[RequestRecord]) -> list[Attempt | int]:
    """The captured attempts, and (as bare indices) earlier ones whose telemetry was never stored: a point
    resumed from a run of specmeter 0.1.0, whose records all count as attempt 0."""
    seen = {a.index for a in capture.attempts}
    bare = sorted({r.attempt for r in records} - seen)
    return [*bare, *capture.attempts]


def _wall(attempt: Attempt | int, records: Sequence[RequestRecord]) -> float:
    """How long an attempt ran: as measured, or, for one that never finished (killed), until its last request
    ended."""
    if isinstance(attempt, Attempt) and attempt.wall_s is not None:
        return attempt.wall_s
    index = attempt.index if isinstance(attempt, Attempt) else attempt
    return max((r.end_s or r.start_s for r in records if r.attempt == index), default=0.0)


def _attempt_sd(attempt: Attempt, records: Sequence[RequestRecord], stats: EngineStats,
                expect_sd: bool) -> SDSummary:
    """SD of one attempt: its counter deltas (scrapes before and after; several replicas' summed), its feed, and
    its requests."""
    if attempt.replicas is not None:
        before, after, err_before = summed_snapshots(attempt.replicas, stats.sd_counter_names)
        err_after = None
    else:
        before, err_before = parse_scrape(attempt.before)
        after, err_after = parse_scrape(attempt.after)
    feed: IterationFeed | None = None
    if attempt.feed is not None:
        feed = stats.iteration_feed()
        if feed is not None:
            replay(feed, attempt.feed)
    return summarize_sd(stats, before, after, records, scrape_error=err_before or err_after, expect_sd=expect_sd,
                        feed=feed)
