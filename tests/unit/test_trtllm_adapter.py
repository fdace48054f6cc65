"""The TensorRT-LLM engine: trtllm-serve command and its YAML from SpecConfig, Prometheus counters (with and
without per-position counters), the JSON iteration stats of /metrics in both field-name styles, per-request
stats in the shape of TensorRT-LLM PR #19311, engine detection, and a whole attach-mode run against a
local stand-in that serves trtllm-serve's shapes (/health, /v1/models with owned_by tensorrt_llm, JSON
iteration stats at /metrics cleared by every read, Prometheus text at /prometheus/metrics, streaming chat
and completions with no SD numbers in them)."""

from __future__ import annotations

import asyncio
import hashlib
import json
import random
import re
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from aiohttp import web
from prometheus_client import CollectorRegistry, Counter, Gauge, generate_latest

from faultserver import only_config, run_plan
from specmeter.config import EngineSpec, SpecConfig
from specmeter.engines.base import ServerProbe
from specmeter.engines.registry import detect_engine
from specmeter.engines.sglang import SGLangStats
from specmeter.engines.trtllm import CONFIG_DIR_ENV, PROMETHEUS_PATH, TRTLLMLauncher, TRTLLMStats, positions
from specmeter.engines.trtllm_iterations import IterationStats, iteration_entries, sd_from_iteration_stats
from specmeter.engines.vllm import VLLMStats
from specmeter.errors import InputError
from specmeter.load.client import OpenAIClient
from specmeter.load.feed import FeedPoller
from specmeter.metrics.prometheus import counter_delta, parse_exposition
from specmeter.metrics.sd_summary import summarize_sd
from specmeter.schemas.sd import SDCounts, SDSummary
from standin import ThreadedApp, attach_execution

pytestmark = pytest.mark.timeout(60)


@pytest.fixture(autouse=True)
def config_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "trtllm-configs"
    monkeypatch.setenv(CONFIG_DIR_ENV, str(path))
    return path


def _cmd(spec: SpecConfig, engine: EngineSpec | None = None) -> list[str]:
    engine = engine or EngineSpec(kind="trtllm", model="org/target")
    return TRTLLMLauncher().server_command(engine, spec, 8001)


def _yaml(cmd: list[str]) -> dict[str, Any]:
    options: dict[str, Any] = yaml.safe_load(Path(cmd[cmd.index("--extra_llm_api_options") + 1]).read_text())
    return options


# ---- launch command and YAML -----------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("method", "decoding_type", "draft"),
    [("eagle3", "Eagle3", "org/e3"), ("draft_model", "DraftTarget", "org/small"), ("ngram", "NGram", None),
     ("mtp", "MTP", None)],
)
def test_every_method_gets_its_decoding_type_and_k(method: str, decoding_type: str, draft: str | None,
                                                   config_dir: Path) -> None:
    cmd = _cmd(SpecConfig(method=method, num_speculative_tokens=3, draft_model=draft))
    assert Path(cmd[0]).name == "trtllm-serve" and cmd[1] == "org/target"
    assert cmd[cmd.index("--backend") + 1] == "pytorch" and cmd[cmd.index("--port") + 1] == "8001"
    options = _yaml(cmd)
    assert Path(cmd[cmd.index("--extra_llm_api_options") + 1]).parent == config_dir
    assert options["enable_iter_perf_stats"] is True and options["return_perf_metrics"] is True
    spec_cfg = options["speculative_config"]
    assert spec_cfg["decoding_type"] == decoding_type and spec_cfg["max_draft_len"] == 3
    assert spec_cfg.get("speculative_model_dir") == draft
    if method == "mtp":
        assert spec_cfg["num_nextn_predict_layers"] == 3
    # the docs run the two-model drafters without the overlap scheduler
    assert options.get("disable_overlap_scheduler", False) is (method in ("draft_model", "ngram"))


def test_engine_settings_and_extra_reach_the_command_and_the_yaml() -> None:
    engine = EngineSpec(kind="trtllm", model="org/target", dtype="bfloat16", max_model_len=4096, max_num_seqs=16,
                        trust_remote_code=True, extra_args=["--tp_size", "2"])
    spec = SpecConfig(method="ngram", num_speculative_tokens=4, prompt_lookup_max=3, extra={"is_public_pool": False})
    cmd = _cmd(spec, engine)
    assert cmd[cmd.index("--max_seq_len") + 1] == "4096" and cmd[cmd.index("--max_batch_size") + 1] == "16"
    assert "--trust_remote_code" in cmd and cmd[-2:] == ["--tp_size", "2"]
    options = _yaml(cmd)
    assert options["dtype"] == "bfloat16"
    assert options["speculative_config"] == {"decoding_type": "NGram", "max_draft_len": 4,
                                             "max_matching_ngram_size": 3, "is_public_pool": False}


def test_the_yaml_path_follows_its_content(config_dir: Path) -> None:
    a = _cmd(SpecConfig(method="eagle3", num_speculative_tokens=3, draft_model="org/e3"))
    b = _cmd(SpecConfig(method="eagle3", num_speculative_tokens=3, draft_model="org/e3"))
    c = _cmd(SpecConfig(method="eagle3", num_speculative_tokens=4, draft_model="org/e3"))
    assert a == b and a != c  # same config, same command (and file); another K, another file
    off = _yaml(_cmd(SpecConfig()))
    assert off == {"enable_iter_perf_stats": True, "return_perf_metrics": True}
    assert sorted(p.name.startswith("llm-api-options-") for p in config_dir.iterdir()) == [True] * 3


@pytest.mark.parametrize("method", ["suffix", "eagle"])
def test_a_method_trtllm_lacks_is_refused_with_the_supported_list(method: str) -> None:
    spec = SpecConfig(method=method, num_speculative_tokens=4, draft_model="d" if method == "eagle" else None)
    with pytest.raises(InputError, match=rf"trtllm cannot run speculation method '{method}'; it supports: "
                                         r"eagle3, draft_model, ngram, mtp"):
        _cmd(spec)


@pytest.mark.parametrize("spec", [
    SpecConfig(method="ngram", num_speculative_tokens=4, prompt_lookup_min=2),
    SpecConfig(method="ngram", num_speculative_tokens=4, num_speculative_tokens_per_batch_size=[[1, 4, 4]]),
    SpecConfig(method="draft_model", num_speculative_tokens=4, draft_model="d", draft_tensor_parallel_size=1),
])
def test_settings_trtllm_cannot_honour_are_refused(spec: SpecConfig) -> None:
    with pytest.raises(InputError):
        _cmd(spec)


def test_version_reads_the_installed_distribution(monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib.metadata as md

    def fake(dist: str) -> str:
        if dist == "tensorrt_llm":
            return "1.3.0"
        raise md.PackageNotFoundError(dist)

    monkeypatch.setattr(md, "version", fake)
    assert TRTLLMLauncher().version() == "tensorrt_llm 1.3.0"

    def missing(dist: str) -> str:
        raise md.PackageNotFoundError(dist)

    monkeypatch.setattr(md, "version", missing)
    assert TRTLLMLauncher().version() is None


# ---- Prometheus counters ---------------------------------------------------------------------------------
def _prom(drafted_pos: list[int] | None, accepted_pos: list[int] | None, drafted: int, accepted: int,
          done: int = 3) -> str:
    lines = [
        "# TYPE trtllm_spec_decode_num_draft_tokens counter",
        f'trtllm_spec_decode_num_draft_tokens_total{{engine_type="trtllm",model_name="m"}} {drafted}.0',
        "# TYPE trtllm_spec_decode_num_accepted_tokens counter",
        f'trtllm_spec_decode_num_accepted_tokens_total{{engine_type="trtllm",model_name="m"}} {accepted}.0',
        "# TYPE trtllm_request_success counter",
        f'trtllm_request_success_total{{engine_type="trtllm",finished_reason="stop",model_name="m"}} {done}.0',
        "# TYPE trtllm_num_requests_running gauge",
        'trtllm_num_requests_running{engine_type="trtllm",model_name="m"} 2.0',
    ]
    if drafted_pos is not None and accepted_pos is not None:
        lines.append("# TYPE trtllm_spec_decode_drafted_tokens counter")
        lines += [f'trtllm_spec_decode_drafted_tokens_total{{model_name="m",token_position="{i}"}} {v}.0'
                  for i, v in enumerate(drafted_pos)]
        lines.append("# TYPE trtllm_spec_decode_accepted_tokens counter")
        lines += [f'trtllm_spec_decode_accepted_tokens_total{{model_name="m",token_position="{i}"}} {v}.0'
                  for i, v in enumerate(accepted_pos)]
    return "\n".join(lines) + "\n"


def test_per_position_counters_give_steps_and_positions() -> None:
    stats = TRTLLMStats()
    before = parse_exposition(_prom([10, 10, 10], [8, 5, 2], 30, 15))
    after = parse_exposition(_prom([30, 30, 30], [20, 12, 5], 90, 37))
    sd = stats.sd_from_counters(counter_delta(before, after, stats.sd_counter_names))
    assert sd is not None and sd.source == "counters"
    assert (sd.num_steps, sd.num_draft_tokens, sd.num_accepted_tokens) == (20, 60, 22)
    assert sd.accepted_per_pos == [12, 7, 3] and sd.drafted_per_pos == [20, 20, 20]
    assert sd.acceptance_length == pytest.approx(1 + 22 / 20)
    assert sd.per_position_rate == pytest.approx([0.6, 0.35, 0.15])


def test_without_per_position_counters_steps_are_unknown() -> None:
    stats = TRTLLMStats()
    delta = counter_delta(parse_exposition(_prom(None, None, 30, 15)), parse_exposition(_prom(None, None, 90, 37)),
                          stats.sd_counter_names)
    sd = stats.sd_from_counters(delta)
    assert sd is not None and sd.num_steps is None and (sd.num_draft_tokens, sd.num_accepted_tokens) == (60, 22)
    assert sd.acceptance_length is None and sd.acceptance_rate == pytest.approx(22 / 60)


def test_counters_that_went_down_or_do_not_add_up_give_none() -> None:
    stats = TRTLLMStats()
    high, low = parse_exposition(_prom([30], [20], 30, 20)), parse_exposition(_prom([10], [5], 10, 5))
    assert stats.sd_from_counters(counter_delta(high, low, stats.sd_counter_names)) is None
    liar = parse_exposition(_prom([10], [40], 10, 40))
    assert stats.sd_from_counters(counter_delta(low, liar, stats.sd_counter_names)) is None


def test_positions_reads_either_label_name() -> None:
    assert positions({"token_position=0": 5, "token_position=2": 1}) == [5, 0, 1]
    assert positions({"position=1": 2, "position=0": 3}) == [3, 2]
    assert positions({"": 4}) == []


def test_stats_names_and_what_is_not_available() -> None:
    stats = TRTLLMStats()
    assert stats.metrics_path == PROMETHEUS_PATH == "/prometheus/metrics"
    assert stats.traffic_counter_names == {"requests": "trtllm_request_success_total",
                                           "generation_tokens": "trtllm_generation_tokens_total"}
    assert stats.running_gauge == "trtllm_num_requests_running"  # read at metrics_path like the counters
    assert set(stats.unavailable) == {"per-request and per-category SD",
                                      "steps, AL and per-position rates from counters"}
    assert stats.request_extensions(0.0) == {}


# ---- JSON iteration stats --------------------------------------------------------------------------------
def _iteration(i: int, drafted: int, accepted: int, requests: int, snake: bool = False) -> dict[str, Any]:
    spec = {"numDraftTokens": drafted, "numAcceptedTokens": accepted, "numRequestsWithDraftTokens": requests,
            "acceptanceLength": (accepted + requests) / requests if requests else 0.0, "iterLatencyMS": 1.0,
            "draftOverhead": 0.2}
    if snake:
        spec = {"num_draft_tokens": drafted, "num_accepted_tokens": accepted,
                "num_requests_with_draft_tokens": requests, "acceptance_length": spec["acceptanceLength"]}
        return {"iter": i, "iter_latency_ms": 5.0, "spec_decoding_stats": spec}
    return {"iter": i, "iterLatencyMS": 5.0, "numActiveRequests": requests, "specDecodingStats": spec}


@pytest.mark.parametrize("snake", [False, True], ids=["camelCase", "snake_case"])
def test_iteration_stats_sum_to_run_totals(snake: bool) -> None:
    first = [_iteration(1, 0, 0, 0, snake), _iteration(2, 8, 5, 2, snake)]
    second = [json.dumps(_iteration(3, 12, 4, 3, snake)), _iteration(2, 8, 5, 2, snake)]  # strings; one again
    sd = sd_from_iteration_stats([first, second])
    assert sd is not None and (sd.num_steps, sd.num_draft_tokens, sd.num_accepted_tokens) == (5, 20, 9)
    assert sd.acceptance_length == pytest.approx(1 + 9 / 5)


def test_iteration_stats_recover_steps_from_acceptance_length_and_count_gaps() -> None:
    acc = IterationStats()
    no_count = {"iter": 7, "specDecodingStats": {"numDraftTokens": 12, "numAcceptedTokens": 6, "acceptanceLength": 3.0}}
    acc.add([no_count, _iteration(10, 4, 1, 1)])
    sd = acc.counts()
    assert sd is not None and sd.num_steps == 3 + 1  # 6 / (3.0 - 1) = 3 requests
    assert acc.iterations == 2 and acc.missing == 2  # iterations 8 and 9 were never read
    unknowable = IterationStats()
    unknowable.add([{"specDecodingStats": {"numDraftTokens": 4, "numAcceptedTokens": 0}}])
    sd = unknowable.counts()
    assert sd is not None and sd.num_steps is None and sd.num_draft_tokens == 4
    assert IterationStats().counts() is None
    assert iteration_entries("not json") == [] and iteration_entries({"iter": 1}) == [{"iter": 1}]


# ---- per request (PR #19311 shape) -------------------------------------------------------------------------
def test_per_request_stats_are_read_where_the_open_change_puts_them() -> None:
    stats = TRTLLMStats()
    spec = {"acceptance_rate": 0.5, "total_accepted_draft_tokens": 30, "total_draft_tokens": 60,
            "num_spec_steps": 20, "acceptance_histogram": [8, 0, 6, 6], "num_spec_tokens": 3}
    on_choice = {"choices": [{"index": 0, "finish_reason": "stop", "speculative_decoding": spec}]}
    sd, raw = stats.sd_from_response(on_choice)
    assert sd is not None and raw == spec
    assert (sd.num_steps, sd.num_draft_tokens, sd.num_accepted_tokens) == (20, 60, 30)
    assert sd.accepted_per_pos == [12, 12, 6] and sd.acceptance_length == pytest.approx(2.5)
    no_steps = {"total_accepted_draft_tokens": 3, "total_draft_tokens": 9}
    sd, _ = stats.sd_from_response({"choices": [], "usage": {"completion_tokens": 5, "speculative_decoding": no_steps}})
    assert sd is not None and sd.num_steps is None and sd.acceptance_rate == pytest.approx(1 / 3)
    assert stats.sd_from_response({"choices": [], "usage": {"completion_tokens": 5}}) == (None, None)


# ---- detection -------------------------------------------------------------------------------------------
VLLM_METRICS = """\
# TYPE vllm:spec_decode_num_drafts counter
vllm:spec_decode_num_drafts_total{engine="0",model_name="m"} 5.0
"""


def _probe(metrics: str | None, owner: str | None) -> ServerProbe:
    models = {"object": "list", "data": [{"id": "m", "object": "model", "owned_by": owner}]} if owner else None
    return ServerProbe(url="http://x", models=models, metrics=parse_exposition(metrics) if metrics else None,
                       server_header="uvicorn")


def test_trtllm_is_recognised_by_its_models_listing_or_its_prometheus_names() -> None:
    stats = TRTLLMStats()
    assert stats.can_adapt(_probe(None, "tensorrt_llm"))  # its /metrics is JSON: the probe parses none
    assert stats.can_adapt(_probe(_prom([1], [1], 1, 1), None))
    assert not stats.can_adapt(_probe(VLLM_METRICS, "vllm"))
    assert not stats.can_adapt(_probe(None, "sglang"))
    assert not VLLMStats().can_adapt(_probe(None, "tensorrt_llm"))
    assert not SGLangStats().can_adapt(_probe(_prom([1], [1], 1, 1), "tensorrt_llm"))
    assert detect_engine(_probe(None, "tensorrt_llm")) == "trtllm"


# ---- a stand-in trtllm-serve ---------------------------------------------------------------------------------
class TRTLLMStandIn(ThreadedApp):
    """trtllm-serve's HTTP shapes over deterministic K-chain steps: each decode step is one iteration in the
    JSON list of /metrics (cleared by every read), and the Prometheus counters advance by exactly the steps.
    Builds differ: `per_position=False` serves no per-position counters, `prometheus=False` no
    /prometheus/metrics at all; `capacity` bounds the JSON list (the oldest iterations are evicted silently,
    like the tee buffer of `iter_stats_max_iterations`); `garble_next` reads answer non-JSON (after clearing)."""

    def __init__(self, k: int = 4, model: str = "stand-in/trtllm-target", alpha: float = 0.6, *,
                 per_position: bool = True, prometheus: bool = True, capacity: int | None = None,
                 step_s: float = 0.002) -> None:
        self.k, self.model, self.alpha = k, model, alpha
        self.per_position, self.serves_prometheus, self.capacity, self.step_s = (per_position, prometheus,
                                                                                 capacity, step_s)
        self.evicted = 0
        self.garble_next = 0
        self.garbled = 0
        self.bodies: list[dict[str, Any]] = []
        self.paths: list[str] = []
        self.truth = {"requests": 0, "steps": 0, "drafted": 0, "accepted": 0,
                      "accepted_per_pos": [0] * k}
        self.iterations: list[dict[str, Any]] = []
        self._iter = 0
        self.running = 0
        self._lock = threading.Lock()
        self.registry = CollectorRegistry()
        base = ["engine_type", "model_name"]
        self.drafted = Counter("trtllm_spec_decode_num_draft_tokens", "drafted", base, registry=self.registry)
        self.accepted = Counter("trtllm_spec_decode_num_accepted_tokens", "accepted", base, registry=self.registry)
        self.drafted_pos = Counter("trtllm_spec_decode_drafted_tokens", "drafted per position",
                                   [*base, "token_position"], registry=self.registry if per_position else None)
        self.accepted_pos = Counter("trtllm_spec_decode_accepted_tokens", "accepted per position",
                                    [*base, "token_position"], registry=self.registry if per_position else None)
        self.success = Counter("trtllm_request_success", "finished", [*base, "finished_reason"],
                               registry=self.registry)
        self.gen = Counter("trtllm_generation_tokens", "generated", base, registry=self.registry)
        self.gauge = Gauge("trtllm_num_requests_running", "running", base, registry=self.registry)
        self.gauge.labels("trtllm", model).set(0)
        super().__init__()

    def prometheus(self) -> str:
        return generate_latest(self.registry).decode()

    def middlewares(self) -> list[Any]:
        return [self._log]

    def routes(self, app: web.Application) -> None:
        app.router.add_get("/health", self._health)
        app.router.add_get("/v1/models", self._models)
        app.router.add_get("/metrics", self._iteration_stats)
        if self.serves_prometheus:
            app.router.add_get("/prometheus/metrics", self._prometheus)
        app.router.add_post("/v1/chat/completions", self._generate)
        app.router.add_post("/v1/completions", self._generate)

    @web.middleware
    async def _log(self, request: web.Request, handler: Any) -> web.StreamResponse:
        self.paths.append(request.path)
        response: web.StreamResponse = await handler(request)
        return response

    async def _health(self, request: web.Request) -> web.Response:
        return web.Response(status=200)

    async def _models(self, request: web.Request) -> web.Response:
        card = {"id": self.model, "object": "model", "created": int(time.time()), "owned_by": "tensorrt_llm"}
        return web.json_response({"object": "list", "data": [card]})

    async def _iteration_stats(self, request: web.Request) -> web.Response:
        with self._lock:
            drained, self.iterations = self.iterations, []
            if self.garble_next:
                self.garble_next -= 1
                self.garbled += 1
                return web.Response(text="<html>busy</html>", content_type="text/html")
        return web.json_response(drained)

    async def _prometheus(self, request: web.Request) -> web.Response:
        return web.Response(text=self.prometheus(), content_type="text/plain")

    def _plan(self, prompt: str, max_tokens: int) -> tuple[list[int], list[int], str]:
        rng = random.Random(hashlib.sha256(prompt.encode()).digest())
        chunks, accepted, total = [1], [], 1
        while total < max_tokens:
            a = 0
            while a < self.k and rng.random() < self.alpha:
                a += 1
            accepted.append(a)
            emit = min(a + 1, max_tokens - total)
            chunks.append(emit)
            total += emit
            if rng.random() < 0.08:
                return chunks, accepted, "stop"
        return chunks, accepted, "length"

    def _record_step(self, a: int) -> None:
        with self._lock:
            self._iter += 1
            self.iterations.append({
                "iter": self._iter, "iterLatencyMS": 3.0, "numActiveRequests": self.running,
                "numQueuedRequests": 0, "numCompletedRequests": 0,
                "specDecodingStats": {"numDraftTokens": self.k, "numAcceptedTokens": a,
                                      "numRequestsWithDraftTokens": 1, "acceptanceLength": 1.0 + a,
                                      "iterLatencyMS": 1.0, "draftOverhead": 0.3},
            })
            if self.capacity is not None and len(self.iterations) > self.capacity:
                self.evicted += len(self.iterations) - self.capacity
                del self.iterations[:-self.capacity]
            self.drafted.labels("trtllm", self.model).inc(self.k)
            self.accepted.labels("trtllm", self.model).inc(a)

    async def _generate(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        self.bodies.append(body)
        chat = request.path.endswith("/chat/completions")
        prompt = json.dumps(body.get("messages") if chat else body.get("prompt"), sort_keys=True)
        chunks, accepted, finish = self._plan(prompt, int(body.get("max_tokens") or 16))
        rid, created = f"{'chatcmpl' if chat else 'cmpl'}-{len(self.bodies)}", int(time.time())

        def event(choices: list[dict[str, Any]], usage: dict[str, Any] | None = None) -> bytes:
            obj = {"id": rid, "object": "chat.completion.chunk" if chat else "text_completion", "created": created,
                   "model": body.get("model"), "choices": choices, "usage": usage}
            return b"data: " + json.dumps(obj).encode() + b"\n\n"

        def choice(text: str, finish_reason: str | None) -> dict[str, Any]:
            if chat:
                return {"index": 0, "delta": {"content": text}, "logprobs": None, "finish_reason": finish_reason,
                        "stop_reason": None}
            return {"index": 0, "text": text, "logprobs": None, "finish_reason": finish_reason, "stop_reason": None}

        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        with self._lock:
            self.running += 1
        if chat:
            await resp.write(event([{"index": 0, "delta": {"role": "assistant", "content": ""}, "logprobs": None,
                                     "finish_reason": None}]))
        word = 0
        for i, n in enumerate(chunks):
            if i > 0:
                self._record_step(accepted[i - 1])
            last = i == len(chunks) - 1
            await resp.write(event([choice("".join(f" w{word + j}" for j in range(n)), finish if last else None)]))
            word += n
            await asyncio.sleep(self.step_s)
        with self._lock:
            self.running -= 1
            t = self.truth
            t["requests"] += 1
            t["steps"] += len(accepted)
            t["drafted"] += len(accepted) * self.k
            t["accepted"] += sum(accepted)
            for a in accepted:
                for pos in range(self.k):
                    self.drafted_pos.labels("trtllm", self.model, str(pos)).inc()
                for pos in range(a):
                    self.accepted_pos.labels("trtllm", self.model, str(pos)).inc()
                    t["accepted_per_pos"][pos] += 1
            self.success.labels("trtllm", self.model, finish).inc()
            self.gen.labels("trtllm", self.model).inc(sum(chunks))
        if (body.get("stream_options") or {}).get("include_usage"):
            usage = {"prompt_tokens": len(prompt.split()), "total_tokens": len(prompt.split()) + sum(chunks),
                     "completion_tokens": sum(chunks)}
            await resp.write(event([], usage))
        await resp.write(b"data: [DONE]\n\n")
        await resp.write_eof()
        return resp


@pytest.fixture
def trtllm_server() -> Iterator[TRTLLMStandIn]:
    with TRTLLMStandIn() as server:
        yield server


def _run(server: TRTLLMStandIn, root: Path, kind: str | None = "trtllm", api: str = "chat") -> SDSummary:
    """A whole attach-mode run against `server`; the point's SD summary, after what every run must show."""
    summary, error, _ = run_plan(attach_execution(server.url, kind, api, "trtllm-stand-in"), root)
    assert error is None, repr(error)
    point = only_config(summary).points[0]
    assert point.latency.num_ok == server.truth["requests"] == len(server.bodies) > 0
    sd: SDSummary = point.sd
    assert sd.per_request is None and sd.requests_with_stats == 0  # no SD numbers in trtllm-serve responses
    assert sd.foreign_traffic is None
    assert set(sd.not_available) == set(TRTLLMStats().unavailable)
    # the run read the JSON list right before the point and once after it: nothing is left in it
    assert server.paths.count("/metrics") >= 2 and json.loads(_get(server.url + "/metrics")) == []
    return sd


def _totals(counts: SDCounts | None) -> tuple[int | None, int, int]:
    assert counts is not None
    return counts.num_steps, counts.num_draft_tokens, counts.num_accepted_tokens


def _truth(server: TRTLLMStandIn) -> tuple[int, int, int]:
    truth = server.truth
    steps, drafted, accepted = truth["steps"], truth["drafted"], truth["accepted"]
    assert isinstance(steps, int) and isinstance(drafted, int) and isinstance(accepted, int)
    return steps, drafted, accepted


FEED_AGREES = "the iteration stats of /metrics equal the /prometheus/metrics counter deltas"


def _check_run(server: TRTLLMStandIn, root: Path, kind: str | None, api: str) -> None:
    before = parse_exposition(server.prometheus())
    sd = _run(server, root, kind, api)
    truth = server.truth
    assert sd.available and sd.reference == "counters", sd
    counters = sd.counters
    assert counters is not None
    assert _totals(counters) == _truth(server)
    assert counters.accepted_per_pos == truth["accepted_per_pos"]
    steps, _, accepted = _truth(server)
    assert counters.acceptance_length == pytest.approx(1 + accepted / steps)
    # both sources: the per-position counters are the run-level counts, the JSON iteration stats read
    # through the run are checked against them and agree
    assert sd.counters_invalid_reason is None
    assert sd.agree is True and sd.agreement == FEED_AGREES, sd.agreement
    # the aggregate counters (from iteration stats) say the same as the per-position ones
    delta = counter_delta(before, parse_exposition(server.prometheus()), TRTLLMStats().sd_counter_names)
    assert round(delta.value("trtllm_spec_decode_num_draft_tokens_total", "engine_type=trtllm")) == truth["drafted"]


@pytest.mark.parametrize("kind", ["trtllm", None], ids=["given", "detected"])
@pytest.mark.parametrize("api", ["chat", "completions"])
def test_a_run_against_trtllm_reads_its_prometheus_counters_and_its_iteration_stats(
        trtllm_server: TRTLLMStandIn, tmp_path: Path, kind: str | None, api: str) -> None:
    _check_run(trtllm_server, tmp_path / "run", kind, api)
    assert "/prometheus/metrics" in trtllm_server.paths


@pytest.mark.parametrize("build", ["no-per-position-counters", "no-prometheus"])
def test_without_step_counters_sd_comes_from_the_iteration_stats_read_through_the_run(build: str,
                                                                                     tmp_path: Path) -> None:
    with TRTLLMStandIn(per_position=False, prometheus=build != "no-prometheus") as server:
        sd = _run(server, tmp_path / "run")
        assert server.evicted == 0
    assert sd.available and sd.reference == "counters", sd
    assert _totals(sd.counters) == _truth(server)
    assert sd.counters is not None and sd.counters.accepted_per_pos == []  # per-position rates: from nowhere
    steps, _, accepted = _truth(server)
    assert sd.counters.acceptance_length == pytest.approx(1 + accepted / steps)
    reason = sd.counters_invalid_reason or ""
    assert "run-level counts come from the iteration stats of /metrics" in reason, reason
    if build == "no-prometheus":
        assert "/prometheus/metrics could not be read" in reason
        assert sd.agree is None and sd.agreement is None  # nothing to check them against
    else:
        assert "the counters at /prometheus/metrics give no step count" in reason
        # drafted and accepted tokens are in both: checked, and equal
        assert sd.agree is True and sd.agreement == FEED_AGREES


@pytest.mark.parametrize("prometheus", [True, False], ids=["with-counters", "without-counters"])
def test_iterations_evicted_before_a_read_are_reported_never_undercounted(prometheus: bool, tmp_path: Path) -> None:
    # A list of 3 iterations and 20 ms steps: the polls every 0.5 s find it overrun.
    with TRTLLMStandIn(capacity=3, step_s=0.02, prometheus=prometheus) as server:
        sd = _run(server, tmp_path / "run")
        assert server.evicted > 0
    if prometheus:  # the per-position counters stay the run-level counts; the feed is reported, not used
        assert sd.available and sd.reference == "counters" and sd.counters_invalid_reason is None
        assert _totals(sd.counters) == _truth(server)
        text = sd.agreement or ""
        assert sd.agree is None
    else:  # nothing else counted the point: no SD numbers rather than an undercount
        assert not sd.available and sd.counters is None and sd.headline is None
        text = sd.reason or ""
    assert "the iteration stats of /metrics are incomplete, so not used" in text, text
    found = re.search(r"at least (\d+) iterations were evicted from /metrics before a read got them", text)
    assert found is not None and 0 < int(found.group(1)) <= server.evicted, text


def test_an_answer_that_is_not_json_is_recorded_as_lost(trtllm_server: TRTLLMStandIn) -> None:
    server = trtllm_server

    async def read_through() -> IterationStats:
        feed = TRTLLMStats().iteration_feed()
        async with OpenAIClient(server.url, TRTLLMStats()) as client:
            server._record_step(3)  # before the point: read by the first read and not counted
            async with FeedPoller(client, feed, interval_s=0.02):
                server._record_step(2)
                server.garble_next = 1  # its answer is cleared on the server, then lost
                for _ in range(200):
                    if server.garbled:
                        break
                    await asyncio.sleep(0.01)
                server._record_step(1)
        return feed

    feed = asyncio.run(read_through())
    assert server.garbled == 1
    assert feed.lost and "not JSON" in feed.lost[0]
    assert _totals(feed.counts()) == (1, 4, 1)  # only what came after the garbled answer
    assert feed.missed == 1  # iteration 2 (the garbled one) is also a gap between 1 (the mark) and 3
    assert "could not be counted" in (feed.incomplete() or "")
    sd = summarize_sd(TRTLLMStats(), None, None, [], scrape_error="no counters here", feed=feed)
    assert not sd.available and "incomplete, so not used" in (sd.reason or "")


def test_the_mark_read_before_the_point_starts_the_gap_count() -> None:
    acc = IterationStats()
    acc.mark([_iteration(4, 8, 5, 2)])
    acc.add([_iteration(8, 4, 1, 1)])
    assert acc.missed == 3 and acc.counts() is not None  # 5, 6 and 7 were evicted before a read
    assert "at least 3 iterations were evicted" in (acc.incomplete() or "")
    fresh = IterationStats()
    fresh.mark([])  # nothing before the point: the gap count starts at the first iteration read
    fresh.add([_iteration(8, 4, 1, 1)])
    assert fresh.missed == 0 and fresh.incomplete() is None
    restarted = IterationStats()
    restarted.mark([_iteration(100, 4, 1, 1)])
    restarted.add([_iteration(1, 4, 1, 1), _iteration(2, 4, 1, 1)])  # numbers start again: no gap invented
    assert restarted.missed == 0


def _get(url: str) -> str:
    import urllib.request

    with urllib.request.urlopen(url, timeout=10) as resp:
        text: str = resp.read().decode()
        return text
