"""Self-tests of the fake engine (tests/fakeengine): when these fail, the fake is wrong, not specmeter.

They check that it speaks vLLM's formats as specmeter's own parsers read them, that its counters
advance by exactly the per-request stats it returns, and that each server-wide fault does what it says.
"""

from __future__ import annotations

import asyncio
import json
import time
import urllib.request

import pytest

from fakeengine.server import FakeEngine
from fakeengine.steps import sd_stats
from fakeengine.vllm import ACCEPTED, DRAFTS
from specmeter.engines.vllm import REQUESTS_DONE, VLLMStats
from specmeter.load.client import OpenAIClient, RequestSpec
from specmeter.metrics.requests import with_sd
from specmeter.schemas.records import RequestRecord
from specmeter.telemetry.prometheus import counter_delta, parse_exposition

pytestmark = pytest.mark.timeout(30)
ADAPTER = VLLMStats()


def _get(url: str) -> tuple[int, str]:
    with urllib.request.urlopen(url, timeout=5) as resp:  # 127.0.0.1 only
        return resp.status, resp.read().decode()


def _body(text: str, chat: bool = True, max_tokens: int = 32) -> dict:
    body = {"model": "m", "max_tokens": max_tokens, "stream": True,
            "stream_options": {"include_usage": True, "continuous_usage_stats": True}}
    if chat:
        body["messages"] = [{"role": "user", "content": text}]
    else:
        body["prompt"] = text
    return body


async def _send_many(url: str, texts: list[str], chat: bool = True) -> list[RequestRecord]:
    out = []
    async with OpenAIClient(url, timeout_s=5) as client:
        for t in texts:
            rec = RequestRecord(config_id="ngram-k4", point_id="c1", conversation_id=t)
            path = "/v1/chat/completions" if chat else "/v1/completions"
            await client.send(RequestSpec(path, _body(t, chat)), rec, 0.0)
            out.append(rec)
    return out


def test_health_models_and_metrics_parse(fake_engine: FakeEngine) -> None:
    assert _get(fake_engine.url + "/health")[0] == 200
    status, text = _get(fake_engine.url + "/v1/models")
    assert status == 200 and json.loads(text)["data"][0]["id"] == fake_engine.model
    snap = parse_exposition(_get(fake_engine.url + "/metrics")[1])
    assert ADAPTER.sd_enabled_in(snap)
    for name in [*ADAPTER.sd_counter_names[:4], REQUESTS_DONE]:
        assert snap.has(name), name
    assert snap.has("vllm:spec_decode_num_drafts_created")  # the _created twins are there
    assert set(snap.series("vllm:spec_decode_num_accepted_tokens_per_pos_total")) == {
        f"position={i}" for i in range(fake_engine.k)
    }


@pytest.mark.parametrize("chat", [True, False])
@pytest.mark.parametrize("num_engines", [1, 2])
def test_counters_advance_by_exactly_the_per_request_stats(chat: bool, num_engines: int) -> None:
    with FakeEngine(num_engines=num_engines, prior_requests=3) as server:
        before = parse_exposition(server.scrape())
        sent = asyncio.run(_send_many(server.url, [f"question {i}" for i in range(5)], chat))
        records = [with_sd(r, ADAPTER) for r in sent]
        after = parse_exposition(server.scrape())
    assert all(r.ok for r in records), [r.error for r in records]
    delta = counter_delta(before, after, ADAPTER.sd_counter_names)
    counters = ADAPTER.sd_from_counters(delta)
    assert counters is not None and delta.valid
    steps = sum(r.sd.num_steps for r in records if r.sd)
    accepted = sum(r.sd.num_accepted_tokens for r in records if r.sd)
    assert counters.num_steps == steps == server.true_totals.steps > 0
    assert counters.num_accepted_tokens == accepted == server.true_totals.accepted
    assert sum(after.series(REQUESTS_DONE).values()) - sum(before.series(REQUESTS_DONE).values()) == 5
    # chunks carry a+1 tokens per step, and usage says how many
    for r in records:
        assert r.output_tokens == sum(r.chunk_tokens or [])
        plain_steps = len(r.chunk_tokens) - 1 - r.sd.num_steps  # decode steps that drafted nothing
        assert r.output_tokens == 1 + r.sd.num_steps + r.sd.num_accepted_tokens + plain_steps


def test_per_request_stats_match_vllm_fields() -> None:
    stats = sd_stats([2, 0, 4, 1], [4, 0, 4, 4], k=4)
    assert stats["num_spec_steps"] == 3 and stats["num_draft_tokens"] == 12
    assert stats["num_accepted_draft_tokens"] == 7 and stats["acceptance_histogram"] == [0, 1, 1, 0, 1]
    assert stats["mean_acceptance_length"] == pytest.approx(1 + 7 / 3)


def test_restart_zeroes_counters_and_changes_created(fake_engine: FakeEngine) -> None:
    asyncio.run(_send_many(fake_engine.url, ["a", "b"]))
    before = parse_exposition(fake_engine.scrape())
    time.sleep(0.01)
    fake_engine.restart()
    after = parse_exposition(fake_engine.scrape())
    assert after.value(DRAFTS + "_total") == 0 < before.value(DRAFTS + "_total")
    assert after.value(DRAFTS + "_created") > before.value(DRAFTS + "_created")
    assert counter_delta(before, after, ADAPTER.sd_counter_names).invalid_reason


def test_hide_sd_modes() -> None:
    with FakeEngine() as server:
        server.hide_sd = "required"
        snap = parse_exposition(server.scrape())
        assert not snap.has(DRAFTS + "_total") and not snap.has(ACCEPTED + "_total")
        assert snap.has("vllm:spec_decode_num_accepted_tokens_per_pos_total")
        server.hide_sd = "all"
        assert not ADAPTER.sd_enabled_in(parse_exposition(server.scrape()))


def test_foreign_and_lying_modes() -> None:
    with FakeEngine(foreign_per_request=2) as server:
        server.lie_extra_accepted = 1
        before = parse_exposition(server.scrape())
        records = [with_sd(r, ADAPTER) for r in asyncio.run(_send_many(server.url, ["x", "y"]))]
        after = parse_exposition(server.scrape())
    assert sum(after.series(REQUESTS_DONE).values()) - sum(before.series(REQUESTS_DONE).values()) == 6
    told = sum(r.sd.num_accepted_tokens for r in records if r.sd)
    assert told == server.reported_totals.accepted == server.true_totals.accepted + 2


def test_fault_selection_by_marker_header_and_schedule(fake_engine: FakeEngine) -> None:
    fake_engine.schedule = {1: "http_500"}

    async def go() -> list[RequestRecord]:
        recs = []
        async with OpenAIClient(fake_engine.url, timeout_s=5) as client:
            for i, text in enumerate(["plain", "plain again", "please FAULT:http_429 now"]):
                rec = RequestRecord(config_id="ngram-k4", point_id="c1", conversation_id=str(i))
                await client.send(RequestSpec("/v1/chat/completions", _body(text)), rec, 0.0)
                recs.append(rec)
        async with OpenAIClient(fake_engine.url, timeout_s=5) as client:
            client._session.headers["X-Fault"] = "http_400"  # type: ignore[union-attr]
            rec = RequestRecord(config_id="ngram-k4", point_id="c1", conversation_id="h")
            await client.send(RequestSpec("/v1/chat/completions", _body("plain")), rec, 0.0)
            recs.append(rec)
        return recs

    kinds = [r.error_kind for r in asyncio.run(go())]
    assert kinds == [None, "http_5xx", "http_429", "http_4xx"]
    assert [r.fault for r in fake_engine.completion_requests()] == [None, "http_500", "http_429", "http_400"]


def test_unknown_fault_is_reported_as_a_problem() -> None:
    with FakeEngine() as server:
        asyncio.run(_send_many(server.url, ["FAULT:no_such_fault"]))
    assert server.problems and "no_such_fault" in server.problems[0]


def test_server_stops_by_itself() -> None:
    server = FakeEngine(max_lifetime_s=0.3).start()
    assert server._thread is not None
    server._thread.join(5)
    assert not server._thread.is_alive() and server.expired
    server.stop()  # harmless after expiry


RUNNING = "vllm:num_requests_running"


def test_running_gauge_counts_the_requests_being_streamed() -> None:
    """vllm:num_requests_running is what specmeter samples during a point: it must be real."""
    from specmeter.telemetry.prometheus import gauge_sum

    with FakeEngine(num_engines=2, output_tokens=40, slow_chunk_s=0.05, default_fault="slow") as server:
        assert gauge_sum(server.scrape(), RUNNING) == 0.0

        async def go() -> tuple[list[RequestRecord], list[float]]:
            seen: list[float] = []

            async def watch() -> None:
                while True:
                    seen.append(gauge_sum(server.scrape(), RUNNING) or 0.0)
                    await asyncio.sleep(0.05)

            watcher = asyncio.create_task(watch())
            async with OpenAIClient(server.url, timeout_s=10) as client:
                recs = [RequestRecord(config_id="ngram-k4", point_id="c3", conversation_id=str(i)) for i in range(3)]
                await asyncio.gather(*(client.send(RequestSpec("/v1/chat/completions", _body(f"q {i}")), r, 0.0)
                                       for i, r in enumerate(recs)))
            watcher.cancel()
            return recs, seen

        records, seen = asyncio.run(go())
        assert all(r.ok for r in records), [r.error for r in records]
        assert max(seen) == 3 == server.max_running  # all three streamed at once, over two engines
        assert gauge_sum(server.scrape(), RUNNING) == 0.0  # and nothing is left running
        series = [line for line in server.scrape().splitlines() if line.startswith(RUNNING + "{")]
        assert len(series) == 2 and all('engine="' in line for line in series)  # one series per engine


@pytest.mark.parametrize("chat", [True, False])
def test_token_ids_are_returned_when_asked_and_deterministic(fake_engine: FakeEngine, chat: bool) -> None:
    async def send(text: str, ask: bool) -> RequestRecord:
        body = _body(text, chat)
        if ask:
            body["return_token_ids"] = True
        rec = RequestRecord(config_id="ngram-k4", point_id="c1", conversation_id=text)
        async with OpenAIClient(fake_engine.url, timeout_s=5) as client:
            await client.send(RequestSpec("/v1/chat/completions" if chat else "/v1/completions", body), rec, 0.0)
        return rec

    a, again, other, plain = (asyncio.run(send(t, ask)) for t, ask in
                              (("hello", True), ("hello", True), ("goodbye", True), ("hello", False)))
    assert all(r.ok for r in (a, again, other, plain))
    assert a.output_token_ids is not None and len(a.output_token_ids) == a.output_tokens
    assert again.output_token_ids == a.output_token_ids  # same prompt, same tokens (greedy)
    assert other.output_token_ids != a.output_token_ids
    assert plain.output_token_ids is None and plain.output_text == a.output_text


def test_restart_on_idle_scrape_waits_for_the_traffic_to_finish(fake_engine: FakeEngine) -> None:
    fake_engine.restart_on_idle_scrape = 2
    _get(fake_engine.url + "/metrics")  # nothing finished yet
    asyncio.run(_send_many(fake_engine.url, ["a"]))
    _get(fake_engine.url + "/metrics")
    assert fake_engine.restarts == 0  # one finished, two needed
    asyncio.run(_send_many(fake_engine.url, ["b"]))
    assert fake_engine.restarts == 0  # the restart comes with the next scrape, not with the request
    before = fake_engine.scrape()
    _get(fake_engine.url + "/metrics")
    _get(fake_engine.url + "/metrics")
    assert fake_engine.restarts == 1  # once
    after = parse_exposition(fake_engine.scrape())
    assert after.value(DRAFTS + "_total") == 0 < parse_exposition(before).value(DRAFTS + "_total")
