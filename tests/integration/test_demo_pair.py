"""The demo pair on the real engine: per-request stats sum to the counter deltas; every category
of the sample workload is reported with an acceptance length the engine can produce."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest
from vllm_helpers import ServerPool, measure, only_config

from specmeter.config.models import LoadSpec, SpecConfig, SpecMethod
from specmeter.data.sample import load_sample
from specmeter.rundir.store import RunStore
from specmeter.schemas.results import RunSummary

K = 4
pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("run") / "run"


@pytest.fixture(scope="module")
def summary(pool: ServerPool, models: Path, run_dir: Path) -> RunSummary:
    spec = SpecConfig(method=SpecMethod.draft_model, num_speculative_tokens=K, draft_model=str(models / "demo-draft"))
    # 77 conversations, 93 requests: above the 4 x N floor, so each is sent exactly once.
    load = LoadSpec(concurrency=[4], max_tokens=48, temperature=0.0, warmup=2)
    return measure(pool.get(spec).base_url, run_dir, load, spec=spec)


def test_per_request_sums_equal_counter_deltas(summary: RunSummary) -> None:
    level = only_config(summary).points[0]
    assert level.latency.num_ok == level.latency.num_requests > 0
    sd = level.sd
    assert sd.counters is not None and sd.per_request is not None
    assert sd.agree is True, sd.agreement
    assert sd.per_request.num_steps == sd.counters.num_steps
    assert sd.per_request.num_accepted_tokens == sd.counters.num_accepted_tokens
    al = sd.counters.acceptance_length
    assert al is not None and 1.0 <= al <= K + 1
    # Unconditional per-position rates can only fall with position.
    rates = sd.counters.per_position_rate
    assert len(rates) == K and all(a >= b for a, b in itertools.pairwise(rates))


def test_all_categories_reported(summary: RunSummary) -> None:
    level = only_config(summary).points[0]
    cb = level.categories
    assert cb is not None
    expected = {c.category for c in load_sample()}
    assert {row.category for row in cb.categories} == expected
    assert len(expected) == 11
    for row in cb.categories:
        assert row.al_step_weighted is not None and 1.0 <= row.al_step_weighted <= K + 1
        assert row.al_request_mean is not None and 1.0 <= row.al_request_mean <= K + 1
    # Pooled over categories == the run-level per-request sums == the engine's counters.
    assert cb.pooled.counts.num_steps == level.sd.counters.num_steps
    assert cb.pooled.counts.num_accepted_tokens == level.sd.counters.num_accepted_tokens
    assert cb.macro_al is not None and 1.0 <= cb.macro_al <= K + 1


def test_multi_turn_carries_history(summary: RunSummary, run_dir: Path) -> None:
    records = [r for r in RunStore(run_dir).read_records() if not r.warmup]
    sample = load_sample()
    # Every turn of every conversation was sent and measured.
    assert len(records) == sum(len(c.turns) for c in sample)
    by_turn = {(r.conversation_id, r.turn): r for r in records}
    checked = 0
    for conv in sample:
        for t in range(1, len(conv.turns)):
            prev, cur = by_turn[(conv.id, t - 1)], by_turn[(conv.id, t)]
            # A later turn's prompt holds the earlier prompt and the model's own reply to it. The reply is
            # re-tokenized from text, which may merge tokens, so only most of its length must show.
            assert cur.prompt_tokens is not None and prev.prompt_tokens is not None and prev.output_tokens
            assert cur.prompt_tokens > prev.prompt_tokens + prev.output_tokens // 2
            checked += 1
    assert checked > 0
