"""Per-request faults: each becomes an error kind on its record, is counted per level, and the run goes on.

Driven through specmeter's real OpenAIClient, and through runner.execute in attach mode against the
fake engine (tests/fakeengine). A fault never escapes as an exception.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from pathlib import Path

import pytest

from fakeengine.drive import attach_plan, conversations, only_config, point_requests, run_plan
from fakeengine.faults import REQUEST_FAULTS
from fakeengine.server import FakeEngine
from specmeter.engines.vllm import VLLMStats
from specmeter.load.client import OpenAIClient, RequestSpec
from specmeter.metrics.requests import with_sd
from specmeter.rundir.store import RunStore, load_summary
from specmeter.schemas.records import RequestRecord

pytestmark = pytest.mark.timeout(30)

# The faults the brief names, and the kind specmeter must record for each.
BRIEF_FAULTS = {
    "timeout": "timeout",
    "stall": "timeout",
    "http_400": "http_4xx",
    "http_429": "http_429",
    "http_500": "http_5xx",
    "reset": "connection",
    "disconnect": "connection",
    "malformed": "malformed",
    "no_usage": "malformed",
    "incomplete": "incomplete_stream",
    "stream_error": "stream_error",
}
# Data that Python's json module rejects with something other than JSONDecodeError, or that decodes
# to the wrong types: still just a malformed stream, never a crash.
HOSTILE_FAULTS = {"malformed_deep": "malformed", "malformed_bigint": "malformed", "bad_content_type": "malformed",
                  "bad_finish_reason": "malformed", "bad_usage_type": "malformed"}
# Wrongly typed fields may also be dropped (the request then succeeds), as long as nothing of the wrong
# type reaches the record: either outcome is fine, a crash or a damaged requests.jsonl is not.
MAY_BE_IGNORED = {"bad_content_type", "bad_finish_reason", "bad_usage_type"}
HTTP_STATUS = {"http_400": 400, "http_429": 429, "http_500": 500}


def _request(text: str, api: str, max_tokens: int = 32) -> RequestSpec:
    body = {"model": "fake/target-model", "max_tokens": max_tokens, "temperature": 0.0, "stream": True,
            "stream_options": {"include_usage": True, "continuous_usage_stats": True}}
    if api == "chat":
        body["messages"] = [{"role": "user", "content": text}]
        return RequestSpec("/v1/chat/completions", body)
    body["prompt"] = text
    return RequestSpec("/v1/completions", body)


def _send(url: str, text: str, api: str, timeout_s: float = 1.0) -> tuple[RequestRecord, str]:
    async def go() -> tuple[RequestRecord, str]:
        async with OpenAIClient(url, timeout_s=timeout_s) as client:
            rec = RequestRecord(config_id="ngram-k4", point_id="c1", conversation_id="x")
            text_out = await client.send(_request(text, api), rec, 0.0)
            return rec, text_out

    return asyncio.run(go())


def _cases() -> list[tuple[str, str, str]]:
    out = []
    for fault, kind in {**BRIEF_FAULTS, **HOSTILE_FAULTS}.items():
        for api in ("chat", "completions"):
            if fault == "bad_content_type" and api == "completions":
                continue  # a non-string `text` is simply ignored there (no crash possible)
            out.append((fault, kind, api))
    return out


@pytest.mark.parametrize(("fault", "kind", "api"), _cases())
def test_client_records_each_fault_as_its_error_kind(fake_engine: FakeEngine, fault: str, kind: str, api: str) -> None:
    rec, text = _send(fake_engine.url, f"Tell me a story. FAULT:{fault}", api)
    if fault in MAY_BE_IGNORED and rec.ok:
        assert isinstance(text, str) and isinstance(rec.output_text, str)
        assert rec.finish_reason is None or isinstance(rec.finish_reason, str), rec.finish_reason
        assert isinstance(rec.output_tokens, int) and not isinstance(rec.output_tokens, bool), rec.output_tokens
        assert rec.prompt_tokens is None or isinstance(rec.prompt_tokens, int), rec.prompt_tokens
        rec.model_validate_json(rec.model_dump_json())  # what requests.jsonl gets must read back
        return
    assert rec.error_kind == kind, rec.error
    assert not rec.ok and text == ""
    assert rec.error and len(rec.error) <= 300  # a short, readable reason
    assert rec.e2e_s is not None
    if fault in HTTP_STATUS:
        assert rec.http_status == HTTP_STATUS[fault]
        assert f"HTTP {HTTP_STATUS[fault]}" in rec.error
    if fault == "timeout":
        assert 0.9 <= rec.e2e_s < 3.0  # honoured the 1 s request timeout, did not wait for the server
    if fault == "stream_error":
        assert "illegal memory access" in rec.error  # the server's own message is kept


@pytest.mark.parametrize("api", ["chat", "completions"])
@pytest.mark.parametrize("fault", ["none", "slow"])
def test_client_clean_and_slow_requests_succeed(fake_engine: FakeEngine, fault: str, api: str) -> None:
    rec, text = _send(fake_engine.url, f"Hello. FAULT:{fault}", api)
    assert rec.ok and rec.error_kind is None, rec.error
    assert rec.output_tokens == 24 and text.split()[0] == "w0"
    sd = with_sd(rec, VLLMStats()).sd
    assert sd is not None and sd.num_steps > 0
    assert rec.chunk_tokens is not None and sum(rec.chunk_tokens) == rec.output_tokens
    assert rec.ttft_s is not None and rec.ttft_s <= rec.e2e_s


def _fault_workload(faults: dict[str, str], clean: int) -> tuple[list, dict[str, str]]:
    """One single-turn conversation per fault, `clean` clean ones, and two multi-turn ones."""
    turns: list = [f"Question {i}: explain caching." for i in range(clean)]
    expected: dict[str, str] = {}
    for fault in faults:
        turns.append(f"Explain {fault}. FAULT:{fault}")
    convs = conversations(turns)
    for conv, fault in zip(convs[clean:], faults):
        expected[conv.id] = faults[fault]
    # the second turn fails: the first is kept; the third turn is never sent (it needs the second's reply)
    convs += conversations([["Turn one.", "Turn two FAULT:http_500", "Turn three."]], prefix="mt-late")
    # the first turn fails: nothing else of this conversation is sent
    convs += conversations([["Turn one FAULT:reset", "Turn two."]], prefix="mt-early")
    return convs, expected


@pytest.mark.parametrize("api", ["chat", "completions"])
def test_run_records_every_fault_and_goes_on(fake_engine: FakeEngine, tmp_path: Path, api: str) -> None:
    convs, expected = _fault_workload(BRIEF_FAULTS, clean=8)
    plan = attach_plan(fake_engine.url, convs, api=api, concurrency=[6], request_timeout_s=1,
                       max_error_rate=1.0)
    summary, error, reporter = run_plan(plan, tmp_path / "run")
    assert error is None, repr(error)
    assert summary.status == "complete"

    records = RunStore(tmp_path / "run").read_records()
    # every conversation is sent once (its turns fill the point's floor of 4 x 6 requests)
    assert point_requests(convs, 6) == 8 + len(BRIEF_FAULTS) + 3 + 2
    assert len(records) == len(reporter.records) == 8 + len(BRIEF_FAULTS) + 2 + 1
    by_conv: dict[str, list[RequestRecord]] = {}
    for r in records:
        by_conv.setdefault(r.conversation_id, []).append(r)
    for conv_id, kind in expected.items():
        (rec,) = by_conv[conv_id]
        assert rec.error_kind == kind and not rec.ok and rec.error, (conv_id, rec.error_kind, rec.error)
    for i in range(8):
        (rec,) = by_conv[f"c{i:03d}"]
        assert rec.ok, rec.error
    late = sorted(by_conv["mt-late000"], key=lambda r: r.turn)
    assert [(r.turn, r.ok, r.error_kind) for r in late] == [(0, True, None), (1, False, "http_5xx")]
    assert [(r.turn, r.error_kind) for r in by_conv["mt-early000"]] == [(0, "connection")]

    (level,) = only_config(summary).points
    want = Counter(expected.values())
    want["http_5xx"] += 1
    want["connection"] += 1
    assert level.latency.errors_by_kind == dict(want)
    assert level.latency.num_requests == len(records)
    assert level.latency.num_ok == 8 + 1
    assert level.latency.output_tokens == sum(r.output_tokens or 0 for r in records if r.ok)
    # the engine counted the partial steps of aborted streams that carry no per-request stats: if the
    # numbers then disagree, the summary must say why
    sd = level.sd
    assert sd.available and sd.reference == "counters"
    if sd.agree is False:
        assert "failed requests" in (sd.agreement or "")
    # the summary on disk is the one returned
    on_disk = load_summary(tmp_path / "run")
    assert on_disk.status == "complete"
    assert only_config(on_disk).points[0].latency.errors_by_kind == dict(want)


@pytest.mark.parametrize("fault", list(HOSTILE_FAULTS))
def test_run_survives_hostile_stream_data(fake_engine: FakeEngine, tmp_path: Path, fault: str) -> None:
    """JSON nested 100000 deep (RecursionError), a 5000-digit integer (ValueError), a number where the
    text belongs (TypeError when joining the text), a number as finish_reason (written to
    requests.jsonl, which then no longer reads back) and token counts as strings (summed into the
    level's totals) are malformed streams, not crashes of the run."""
    convs, expected = _fault_workload({fault: HOSTILE_FAULTS[fault]}, clean=3)
    plan = attach_plan(fake_engine.url, convs, concurrency=[2], request_timeout_s=5, max_error_rate=1.0)
    summary, error, _ = run_plan(plan, tmp_path / "run")
    assert error is None, f"a hostile stream ({fault}) crashed the run: {error!r}"
    records = {r.conversation_id: r for r in RunStore(tmp_path / "run").read_records() if r.turn == 0}
    for conv_id, kind in expected.items():
        if fault in MAY_BE_IGNORED and records[conv_id].ok:
            continue
        assert records[conv_id].error_kind == kind, (conv_id, records[conv_id].error)
    assert only_config(summary).points[0].latency.errors_by_kind.get("malformed", 0) == (
        0 if fault in MAY_BE_IGNORED and records[next(iter(expected))].ok else 1
    )


def test_scheduled_faults_without_markers(fake_engine: FakeEngine, tmp_path: Path) -> None:
    """Server-side schedule (request index -> fault): specmeter sees nothing special in its prompts."""
    fake_engine.schedule = {1: "http_429", 3: "incomplete"}
    plan = attach_plan(fake_engine.url, conversations([f"Q{i}" for i in range(6)]), concurrency=[1],
                       max_error_rate=1.0)
    summary, error, _ = run_plan(plan, tmp_path / "run")
    assert error is None, repr(error)
    records = RunStore(tmp_path / "run").read_records()
    assert [r.error_kind for r in records] == [None, "http_429", None, "incomplete_stream", None, None]
    assert only_config(summary).points[0].latency.errors_by_kind == {"http_429": 1, "incomplete_stream": 1}


def test_warmup_failures_do_not_count_in_the_level(fake_engine: FakeEngine, tmp_path: Path) -> None:
    fake_engine.schedule = {0: "http_500"}  # the first warmup request
    # 8 conversations at concurrency 2: each is measured once (the point's floor is 4 x 2 requests)
    convs = conversations([f"Q{i}" for i in range(8)])
    assert point_requests(convs, 2) == 8
    plan = attach_plan(fake_engine.url, convs, concurrency=[2], warmup=2)
    summary, error, _ = run_plan(plan, tmp_path / "run")
    assert error is None, repr(error)
    level = only_config(summary).points[0]
    assert level.latency.errors_by_kind == {} and level.latency.num_requests == 8
    warm = [r for r in RunStore(tmp_path / "run").read_records() if r.warmup]
    assert sorted(r.error_kind or "" for r in warm) == ["", "http_5xx"]


def test_all_request_fault_kinds_are_known_to_specmeter() -> None:
    from typing import get_args

    from specmeter.schemas.records import ErrorKind

    assert {k for k in REQUEST_FAULTS.values() if k} <= set(get_args(ErrorKind))


def _send_as(url: str, answers_as: tuple[str, ...]) -> RequestRecord:
    async def go() -> RequestRecord:
        async with OpenAIClient(url, timeout_s=2.0, answers_as=answers_as) as client:
            rec = RequestRecord(config_id="ngram-k4", point_id="c1", conversation_id="x")
            await client.send(_request("Hello.", "chat"), rec, 0.0)
            return rec

    return asyncio.run(go())


def test_a_stream_naming_a_model_the_server_does_not_serve_is_not_a_measurement() -> None:
    with FakeEngine(answer_model="fake/other") as engine:  # a proxy that routed the request elsewhere
        rec = _send_as(engine.url, ("fake/target-model",))
        assert not rec.ok and rec.error_kind == "wrong_model" and rec.error is not None
        assert "'fake/other'" in rec.error and "fake/target-model" in rec.error
        assert rec.output_tokens == 24  # what it streamed is kept on the record, only not counted as measured
        assert _send_as(engine.url, ("fake/target-model", "fake/other")).ok  # a name the server listed
        assert _send_as(engine.url, ()).ok  # nothing listed at start: not checked
