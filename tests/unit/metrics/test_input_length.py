"""Acceptance per input-length bucket (metrics/input_length.py), on records made here."""

from __future__ import annotations

from specmeter.metrics.input_length import LENGTH_EDGES, bucket_label, bucket_of, length_breakdown
from specmeter.schemas.records import RequestRecord
from specmeter.schemas.sd import SDCounts


def counts(steps: int, accepted: int) -> SDCounts:
    return SDCounts(source="per_request", num_steps=steps, num_draft_tokens=steps * 4, num_accepted_tokens=accepted)


def record(i: int, prompt: int | None, sd: SDCounts | None, warmup: bool = False) -> RequestRecord:
    return RequestRecord(config_id="sd", point_id="t1x", conversation_id=f"q{i}", ok=True, prompt_tokens=prompt,
                         sd=sd, warmup=warmup)


def test_edges_belong_to_the_bucket_below_them_and_the_last_bucket_is_open() -> None:
    assert bucket_of(1) == bucket_of(256) == (0, 256)
    assert bucket_of(257) == bucket_of(512) == (257, 512)
    assert bucket_of(LENGTH_EDGES[-1]) == (LENGTH_EDGES[-2] + 1, LENGTH_EDGES[-1])
    assert bucket_of(LENGTH_EDGES[-1] + 1) == (LENGTH_EDGES[-1] + 1, None)
    assert [bucket_label(*bucket_of(n)) for n in (10, 300, 20000)] == ["<= 256", "257-512", "> 16384"]


def test_each_bucket_pools_the_stats_of_its_requests_alone() -> None:
    sds = {100: counts(10, 20), 256: counts(10, 10), 300: counts(20, 10), 5000: counts(8, 24)}
    records = [record(i, n, sd) for i, (n, sd) in enumerate(sds.items())]
    records += [record(9, 100, counts(50, 50), warmup=True),  # warm-up: never counted
                record(10, None, counts(5, 5)),  # no usage: in no bucket
                record(11, 400, None)]  # no SD stats: not read
    got = length_breakdown(records)
    assert got is not None and got.unknown == 1
    assert [(b.low, b.high) for b in got.buckets] == [(0, 256), (257, 512), (4097, 8192)]
    short, middle, long = (b.acceptance for b in got.buckets)
    assert short.requests == 2 and short.counts.num_steps == 20 and short.counts.num_accepted_tokens == 30
    assert short.al_step_weighted == 1 + 30 / 20
    assert middle.requests == 1 and middle.al_step_weighted == 1 + 10 / 20
    assert long.al_step_weighted == 1 + 24 / 8 and long.category == "4097-8192"
    assert sum(b.acceptance.requests for b in got.buckets) == len(sds)


def test_nothing_without_per_request_stats() -> None:
    assert length_breakdown([record(0, 100, None)]) is None
    assert length_breakdown([]) is None
