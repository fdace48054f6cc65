"""A point served by several data-parallel replicas, read as one engine serving their union would count it.

- Counters: each replica's scrapes before and after the point are checked on their own first (unreadable, gone
  backwards or re-created: it restarted), so a replica that failed is named and its sum is never used; then the
  snapshots are added series by series. The delta of the sums is the sum of the deltas: AL, AR and the
  per-position rates are those of every step of every replica.
- Running batch: the replicas' samples pooled. Each sample is one replica's batch, so the pooled mean and
  histogram are the per-replica batch: what a dynamic-K table is keyed on (each replica runs the table on its own
  batch), never the sum over replicas.
- Shares: each replica's measured requests and its own batch, for the results.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Sequence

from specmeter.common.errors import EngineError
from specmeter.metrics.running import summarize_running
from specmeter.schemas.capture import GaugeSamples, ReplicaReads, Scrape
from specmeter.schemas.metrics import ReplicaShare, SteadyState
from specmeter.schemas.records import RequestRecord
from specmeter.telemetry.prometheus import Snapshot, counter_delta, parse_exposition


def parse_scrape(scrape: Scrape | None) -> tuple[Snapshot | None, str | None]:
    """A scrape parsed, or (None, why not). A server whose metrics are missing or garbage still gets measured:
    SD then comes from per-request stats, and the reason is recorded."""
    if scrape is None:
        return None, None
    if scrape.text is None:
        return None, scrape.error
    try:
        return parse_exposition(scrape.text, taken_at=scrape.at_s), None
    except EngineError as exc:
        return None, str(exc)


def summed_snapshots(reads: Sequence[ReplicaReads], names: list[str]) -> tuple[Snapshot | None, Snapshot | None,
                                                                               str | None]:
    """(before, after) summed over the replicas, or (None, None, why) naming the first replica whose counters
    cannot be used over the point. `names`: the SD counters the engine's stats read."""
    befores: list[Snapshot] = []
    afters: list[Snapshot] = []
    present: dict[str, frozenset[str]] = {}
    for read in reads:
        before, why_before = parse_scrape(read.before)
        after, why_after = parse_scrape(read.after)
        if before is None or after is None:
            why = why_before or why_after or "not read (the point did not finish)"
            return None, None, f"replica {read.url}: {why}; the replicas' counters cannot be summed"
        delta = counter_delta(before, after, names)
        if delta.invalid_reason is not None:
            return None, None, f"replica {read.url}: {delta.invalid_reason}"
        befores.append(before)
        afters.append(after)
        present[read.url] = frozenset(n for n in names if after.has(n))
    first, *others = present.items()
    for url, found in others:
        if found != first[1]:
            gap = sorted(first[1] ^ found)
            return None, None, (f"replicas {first[0]} and {url} expose different SD counters ({', '.join(gap[:3])}): "
                                "list replicas of one speculative configuration")
    return sum_snapshots(befores), sum_snapshots(afters), None


def sum_snapshots(snapshots: Sequence[Snapshot]) -> Snapshot:
    """Every series added over the snapshots (a series one of them lacks counts as zero there), taken when the
    last of them was."""
    total: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    for snap in snapshots:
        for name, series in snap.samples.items():
            for key, value in series.items():
                total[name][key] += value
    return Snapshot(taken_at=max(s.taken_at for s in snapshots),
                    samples={name: dict(series) for name, series in total.items()})


def pooled_samples(reads: Sequence[ReplicaReads]) -> GaugeSamples | None:
    """Every replica's running-batch samples in one series, in time order (None: the gauge was not sampled)."""
    sampled = [r.running for r in reads if r.running is not None]
    if not sampled:
        return None
    samples = sorted(s for gauge in sampled for s in gauge.samples)
    return GaugeSamples(name=sampled[0].name, interval_s=sampled[0].interval_s, samples=samples)


def replica_shares(reads: Sequence[ReplicaReads], records: Sequence[RequestRecord],
                   steady: SteadyState | None) -> list[ReplicaShare]:
    """Each replica's measured requests (`records`: the point's final ones, warm-up excluded) and its batch."""
    sent = Counter(r.replica for r in records)
    ok = Counter(r.replica for r in records if r.ok)
    total = sum(sent.values())
    return [ReplicaShare(url=read.url, requests=sent[read.url], ok=ok[read.url],
                         share=sent[read.url] / total if total else 0.0,
                         running_batch=summarize_running(read.running.name, read.running.samples,
                                                         read.running.interval_s, steady)
                         if read.running is not None else None)
            for read in reads]
