"""Attach mode over data-parallel replicas against two fake engines (tests/fakeengine): requests spread with each
conversation on one replica, counters summed to what one engine serving both would count, the running batch kept
per replica, each replica's share in the results, and a replica that restarts or dies named by its URL."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from fakeengine.drive import RecordingReporter, attach_plan, conversations, max_overlap, only_config, run_plan
from fakeengine.server import FakeEngine
from specmeter.common.errors import InputError, RunIncomplete
from specmeter.config.models import EngineSpec
from specmeter.execution.runner import execute
from specmeter.load.client import OpenAIClient
from specmeter.load.replicas import Replicas
from specmeter.plans.sweep import SweepSpec
from specmeter.report.tables import notes, summary_tables
from specmeter.rundir.store import RunStore, load_summary
from specmeter.schemas.capture import Attempt
from specmeter.schemas.records import RequestRecord

pytestmark = pytest.mark.timeout(60)
QUESTIONS = [f"Question {i}: explain how caches work." for i in range(8)]
TWO_TURNS = [["Turn one: what is a cache?", "Turn two: and what is eviction?"] for _ in range(2)]


def _fake(**faults: Any) -> FakeEngine:
    return FakeEngine(output_tokens=24, slow_chunk_s=0.01, default_fault="slow", **faults)


# ---- spreading, without a server ---------------------------------------------------------------------
def test_a_conversation_goes_to_the_least_busy_replica_and_ties_take_turns() -> None:
    urls = ["http://127.0.0.1:1", "http://127.0.0.1:2", "http://127.0.0.1:3"]
    replicas = Replicas([OpenAIClient(u) for u in urls])
    alone = []
    for _ in range(4):  # one user at a time still visits every replica
        with replicas.conversation() as (_, url):
            alone.append(url)
    assert alone == [urls[0], urls[1], urls[2], urls[0]]
    with replicas.conversation() as (_, held):  # urls[1] is busy: the next two go elsewhere
        assert held == urls[1]
        with replicas.conversation() as (_, second), replicas.conversation() as (_, third):
            assert {second, third} == {urls[0], urls[2]}
            with replicas.conversation() as (_, fourth):  # all busy alike: the turn goes on
                assert fourth == urls[1]
    with Replicas([OpenAIClient(urls[0])]).conversation() as (_, url):
        assert url is None  # one server: records name no replica, as before replicas existed


# ---- config: one URL as before, several as a list ----------------------------------------------------
def test_endpoint_is_a_string_or_a_list_and_old_plans_records_and_captures_load() -> None:
    one = EngineSpec.model_validate_json('{"endpoint": "http://h:1"}')  # as every stored plan has it
    assert one.endpoint == "http://h:1" and one.endpoints == ["http://h:1"]
    assert json.loads(one.model_dump_json())["endpoint"] == "http://h:1"
    assert EngineSpec(endpoint=["http://h:1"]).endpoint == "http://h:1"
    assert EngineSpec(endpoint=["http://h:1", "http://h:2"]).endpoints == ["http://h:1", "http://h:2"]
    with pytest.raises(ValueError, match="given twice"):
        EngineSpec(endpoint=["http://h:1", "http://h:1/"])
    with pytest.raises(ValueError, match="empty list"):
        EngineSpec(endpoint=[])
    sweep = SweepSpec.model_validate({
        "engine": {"kind": "vllm", "endpoint": ["http://h:5", "http://h:6"]}, "baseline_endpoint": ["http://h:1", "http://h:2"],
        "candidates": [{"method": "ngram", "k": 2, "endpoint": ["http://h:3", "http://h:4"]}]})
    assert [c.engine.endpoints for c in sweep.configs()] == [["http://h:1", "http://h:2"], ["http://h:3", "http://h:4"]]
    old = RequestRecord.model_validate({"config_id": "a", "point_id": "c1", "conversation_id": "q"})
    assert old.replica is None
    attempt = Attempt.model_validate({"index": 0, "engine": "vllm", "started_s": 0.0, "before": {"at_s": 0.0}})
    assert [r.before for r in attempt.reads()] == [attempt.before] and attempt.replicas is None


# ---- a run over two replicas -------------------------------------------------------------------------
def test_requests_spread_over_two_replicas_and_their_counters_summed(tmp_path: Path) -> None:
    convs = conversations([*QUESTIONS, *TWO_TURNS])
    with _fake() as a, _fake() as b:
        summary, error, _ = run_plan(attach_plan([a.url, b.url], convs, concurrency=[2]), tmp_path / "run")
    assert error is None, repr(error)
    assert not a.problems and not b.problems
    records = RunStore(tmp_path / "run").read_records()
    sent = Counter(r.replica for r in records)
    assert sent == {a.url: len(a.completion_requests()), b.url: len(b.completion_requests())}
    assert sent[a.url] > 0 and sent[b.url] > 0
    for conv_id in {r.conversation_id for r in records}:  # every turn of a conversation on one replica
        assert len({r.replica for r in records if r.conversation_id == conv_id}) == 1
    for url in (a.url, b.url):  # 2 slots over 2 replicas, least outstanding: one at a time on each
        assert max_overlap([r for r in records if r.replica == url]) == 1

    point = only_config(summary).points[0]
    shares = point.replicas
    assert shares is not None and [s.url for s in shares] == [a.url, b.url]
    assert [s.requests for s in shares] == [sent[a.url], sent[b.url]]
    assert sum(s.requests for s in shares) == point.latency.num_requests
    assert sum(s.share for s in shares) == pytest.approx(1.0)

    sd = point.sd
    counts = sd.counters
    assert sd.reference == "counters" and sd.agree is True, sd.agreement
    assert counts is not None
    assert counts.num_steps == a.true_totals.steps + b.true_totals.steps
    assert counts.num_draft_tokens == a.true_totals.drafted + b.true_totals.drafted
    assert counts.num_accepted_tokens == a.true_totals.accepted + b.true_totals.accepted
    assert counts.accepted_per_pos == [x + y for x, y in zip(a.true_totals.accepted_per_pos,
                                                             b.true_totals.accepted_per_pos)]

    pooled = point.running_batch  # one replica's batch: the pooled samples, never their sum
    assert pooled is not None and pooled.max is not None and pooled.max <= 2
    per_replica = [s.running_batch for s in shares]
    assert all(rb is not None and rb.samples > 0 for rb in per_replica)
    assert pooled.samples == sum(rb.samples for rb in per_replica if rb is not None)
    table = next(t for t in summary_tables(summary) if t.title.startswith("Replicas"))
    assert [row[2] for row in table.rows] == [a.url, b.url]


def test_a_replica_that_restarts_is_named_and_per_request_stats_are_used(tmp_path: Path) -> None:
    convs = conversations(QUESTIONS)
    with _fake() as a, _fake(prior_requests=40, restart_after_requests=1) as b:
        summary, error, _ = run_plan(attach_plan([a.url, b.url], convs, concurrency=[2]), tmp_path / "run")
    assert error is None, repr(error)
    point = only_config(summary).points[0]
    sd = point.sd
    assert b.restarts == 1
    assert sd.available and sd.reference == "per_request"
    assert sd.counters_invalid_reason is not None and sd.counters_invalid_reason.startswith(f"replica {b.url}: ")
    assert "restarted" in sd.counters_invalid_reason
    assert point.latency.num_ok == point.latency.num_requests == len(QUESTIONS)  # nothing measured is lost
    named = [n.text for n in notes(summary) if b.url in n.text]
    assert named and all("\n" not in n for n in named)


def test_a_replica_that_dies_stops_the_run_with_its_url_and_keeps_what_finished(tmp_path: Path) -> None:
    convs = conversations(QUESTIONS * 3)
    with _fake() as a, _fake() as b:

        class KillsB(RecordingReporter):
            def request_done(self, record: Any) -> None:
                super().request_done(record)
                if len(self.records) == 3:
                    threading.Thread(target=b.stop).start()

        reporter = KillsB()
        ex = attach_plan([a.url, b.url], convs, concurrency=[2])
        with pytest.raises(RunIncomplete) as caught:
            execute(ex, RunStore(tmp_path / "run"), reporter)
    first = str(caught.value).splitlines()[0]
    assert f"replica {b.url} stopped accepting connections" in first
    stored = load_summary(tmp_path / "run")
    assert stored.status == "incomplete" and stored.incomplete_reason is not None
    assert b.url in stored.incomplete_reason and "\n" not in stored.incomplete_reason
    kept = RunStore(tmp_path / "run").read_records()
    assert sum(r.ok for r in kept) >= 3  # what finished before the death is on disk


# ---- the CLI -----------------------------------------------------------------------------------------
def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "specmeter.cli", "run", *args], capture_output=True, text=True,
                          timeout=50)


def test_endpoint_repeated_on_the_command_line(tmp_path: Path) -> None:
    with _fake() as a, _fake() as b:
        res = _cli("--endpoint", a.url, "--endpoint", b.url, "--no-baseline", "--num-prompts", "4",
                   "--max-tokens", "8", "--warmup", "0", "--concurrency", "2", "--out", str(tmp_path), "--json")
        dead = _cli("--endpoint", a.url, "--endpoint", "http://127.0.0.1:9", "--out", str(tmp_path / "x"))
    assert res.returncode == 0, res.stderr[-2000:]
    summary = json.loads(res.stdout)
    assert summary["plan"]["configs"][0]["engine"]["endpoint"] == [a.url, b.url]
    shares = summary["configs"][0]["points"][0]["replicas"]
    assert [s["url"] for s in shares] == [a.url, b.url] and all(s["requests"] > 0 for s in shares)
    assert dead.returncode == InputError.exit_code
    lines = [ln for ln in dead.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "http://127.0.0.1:9 is unreachable" in lines[0]
