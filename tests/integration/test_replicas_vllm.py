"""Two real vLLM replicas of the demo pair, attached as one server's data-parallel replicas: the run's SD counts
are the sum of what each replica's own /metrics counted over the run, read here independently, and each replica's
share of the requests is recorded."""

from __future__ import annotations

import urllib.request
from collections import Counter
from pathlib import Path

import pytest
from vllm_helpers import ServerPool, measure, only_config

from specmeter.config.models import LoadSpec, SpecConfig, SpecMethod
from specmeter.engines.vllm import VLLMStats
from specmeter.rundir.store import RunStore
from specmeter.schemas.sd import SDCounts
from specmeter.telemetry.prometheus import Snapshot, counter_delta, parse_exposition

K = 2
pytestmark = pytest.mark.integration
STATS = VLLMStats()


def _metrics(url: str) -> Snapshot:
    with urllib.request.urlopen(f"{url}/metrics", timeout=30) as resp:  # a local server
        return parse_exposition(resp.read().decode())


def _delta(before: Snapshot, after: Snapshot) -> SDCounts:
    delta = counter_delta(before, after, STATS.sd_counter_names)
    assert delta.valid, delta.invalid_reason
    counts = STATS.sd_from_counters(delta)
    assert counts is not None
    return counts


def test_two_replicas_counters_summed_and_each_share_recorded(pool: ServerPool, models: Path, tmp_path: Path) -> None:
    spec = SpecConfig(method=SpecMethod.draft_model, num_speculative_tokens=K, draft_model=str(models / "demo-draft"))
    urls = [pool.get(spec, replica=i).base_url for i in (0, 1)]
    try:
        before = [_metrics(u) for u in urls]
        # No warm-up: everything the replicas count between these reads is the measured point's.
        load = LoadSpec(concurrency=[2], max_tokens=16, temperature=0.0, warmup=0)
        summary = measure(urls, tmp_path / "run", load, num_prompts=6, spec=spec)
        each = [_delta(b, _metrics(u)) for b, u in zip(before, urls)]
    finally:
        pool.stop(spec, replica=1)  # only this test uses a second replica: its memory goes back to the session
    assert summary.status == "complete", summary.incomplete_reason

    point = only_config(summary).points[0]
    assert point.latency.num_ok == point.latency.num_requests > 0
    sd = point.sd
    assert sd.reference == "counters" and sd.agree is True, sd.agreement
    counts = sd.counters
    assert counts is not None and counts.num_steps is not None and counts.num_steps > 0
    assert counts.num_steps == sum(c.num_steps or 0 for c in each)
    assert counts.num_draft_tokens == sum(c.num_draft_tokens for c in each)
    assert counts.num_accepted_tokens == sum(c.num_accepted_tokens for c in each)
    assert counts.accepted_per_pos == [sum(c.accepted_per_pos[i] for c in each) for i in range(K)]

    records = RunStore(tmp_path / "run").read_records()
    sent = Counter(r.replica for r in records)
    shares = point.replicas
    assert shares is not None and [s.url for s in shares] == urls
    assert all(s.requests > 0 for s in shares)
    assert [s.requests for s in shares] == [sent[u] for u in urls]
    assert sum(s.requests for s in shares) == point.latency.num_requests
