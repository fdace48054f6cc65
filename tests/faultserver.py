"""A fault-injecting, vLLM-shaped OpenAI-compatible server for tests (aiohttp.web, in-process).

It runs on 127.0.0.1 on a free port in a daemon thread with its own event loop (specmeter's runner
blocks the test thread in its own asyncio loop), and stops by itself after `max_lifetime_s`.

What it serves, in vLLM's formats:
  GET  /health, /v1/models
  GET  /metrics   Prometheus text: vllm:spec_decode_* counters (engine/model_name labels, per-position
                  series, `_created` twins), vllm:request_success_total{finished_reason}, token
                  counters, the vllm:num_requests_running gauge (per engine: the requests it is
                  streaming right now) and a histogram.
  POST /v1/chat/completions, /v1/completions   SSE streams: content chunks (delta.content or text,
                  and `token_ids` of the chunk's tokens when the request asks `return_token_ids`)
                  with continuous usage when asked, a final usage chunk with choices [] carrying
                  metrics.speculative_decoding, then `data: [DONE]`.

Every generated request gets deterministic speculative steps (seeded by its prompt); the counters
advance by exactly those steps, so per-request sums and counter deltas agree unless a server-wide
fault says otherwise.

Per-request faults (see REQUEST_FAULTS), chosen in this order:
  1. the `X-Fault` request header;
  2. a marker `FAULT:<name>` in the request's current (last) user message, or in a completions prompt
     (after its last "User:");
  3. `server.schedule[i]` for the i-th completion request the server received (0-based, warmup too);
  4. `server.default_fault`.
Server-wide faults are attributes (also accepted as constructor keywords): `restart_after_requests`,
`restart_on_scrape`, `restart_on_idle_scrape` (counters back to zero: a restart; every GET /metrics is a
scrape, specmeter's running-gauge polls during a point too), `hide_sd` / `hide_sd_from_scrape` (SD series
missing), `foreign_per_request` (phantom requests counted: other clients), `lie_extra_accepted`
(per-request stats claim more than the counters got), `per_request_stats` (False: no
metrics.speculative_decoding). Constructor options shape the server: K, output length, acceptance
rate, `detailed` per-step lists or histogram only, `num_engines` (DP replicas), `prior_requests`
(traffic before the test), `api_key` (required on /v1/*).

Use: the `fault_server` fixture (import it into the test module), or `with FaultServer(...) as srv:`.
The server records every request it got (`log`), the true and the reported SD totals, and any
internal problem (`problems`, checked by the fixture).
"""

from __future__ import annotations

import asyncio
import json
import random
import socket
import struct
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from aiohttp import web

from specmeter.runner import Reporter

FAULT_HEADER = "X-Fault"
MARKER = "FAULT:"

DRAFTS = "vllm:spec_decode_num_drafts"
DRAFT_TOKENS = "vllm:spec_decode_num_draft_tokens"
ACCEPTED = "vllm:spec_decode_num_accepted_tokens"
ACCEPTED_PER_POS = "vllm:spec_decode_num_accepted_tokens_per_pos"
DRAFT_TOKENS_PER_POS = "vllm:spec_decode_num_draft_tokens_per_pos"
REQUEST_SUCCESS = "vllm:request_success"
GENERATION_TOKENS = "vllm:generation_tokens"
PROMPT_TOKENS = "vllm:prompt_tokens"
FINISH_REASONS = ("stop", "length", "abort")

# fault name -> the error kind specmeter must record for it
REQUEST_FAULTS: dict[str, str | None] = {
    "none": None,
    "slow": None,  # chunks arrive slowly but well within the timeout: must succeed
    "timeout": "timeout",  # stalls before the response headers
    "stall": "timeout",  # stalls in the middle of the stream
    "http_400": "http_4xx",
    "http_401_echo_key": "http_4xx",  # 401 whose body repeats the caller's API key
    "http_429": "http_429",
    "http_500": "http_5xx",
    "reset": "connection",  # TCP RST after some chunks
    "disconnect": "connection",  # connection closed before any response
    "malformed": "malformed",  # a truncated JSON line mid-stream
    "malformed_deep": "malformed",  # valid-looking but absurdly nested JSON (RecursionError in json)
    "malformed_bigint": "malformed",  # an integer with 5000 digits (ValueError in json)
    "bad_content_type": "malformed",  # delta.content / text is a number, not a string
    "bad_finish_reason": "malformed",  # finish_reason is a number, not a string
    "bad_usage_type": "malformed",  # the final usage chunk gives token counts as strings
    "no_usage": "malformed",  # ignores stream_options: no usage anywhere
    "incomplete": "incomplete_stream",  # everything but `data: [DONE]`
    "stream_error": "stream_error",  # vLLM's error event mid-stream
}
MIDSTREAM = {"stall", "reset", "malformed", "malformed_deep", "malformed_bigint", "bad_content_type", "stream_error"}
# Faults that never reach the engine (nothing is counted in /metrics for them).
PRE_ENGINE = {"timeout", "http_400", "http_401_echo_key", "http_429", "http_500", "disconnect"}


@dataclass
class Received:
    """One HTTP request as the server saw it."""

    index: int | None  # position among completion requests (None for GETs)
    method: str
    path: str
    headers: dict[str, str]
    body: Any
    fault: str | None = None
    outcome: str = "pending"  # ok | aborted | rejected | pending


@dataclass
class Tally:
    """SD totals over some requests."""

    requests: int = 0
    steps: int = 0
    drafted: int = 0
    accepted: int = 0

    def add(self, stats: dict[str, Any]) -> None:
        self.requests += 1
        self.steps += stats["num_spec_steps"]
        self.drafted += stats["num_draft_tokens"]
        self.accepted += stats["num_accepted_draft_tokens"]


@dataclass
class Plan:
    prompt_tokens: int
    chunk_tokens: list[int]  # tokens per content chunk: [1 (prefill)] + [a+1 per decode step]
    per_step_accepted: list[int]
    per_step_drafted: list[int]
    finish_reason: str

    @property
    def output_tokens(self) -> int:
        return sum(self.chunk_tokens)


def sd_stats(per_step_accepted: list[int], per_step_drafted: list[int], k: int, detailed: bool = True) -> dict[str, Any]:
    """vLLM's `metrics.speculative_decoding` for the given steps (steps that drafted 0 are not steps)."""
    counted = [(a, d) for a, d in zip(per_step_accepted, per_step_drafted) if d > 0]
    steps = len(counted)
    drafted = sum(d for _, d in counted)
    accepted = sum(a for a, _ in counted)
    hist = [0] * (k + 1)
    for a, _ in counted:
        hist[a] += 1
    out: dict[str, Any] = {
        "mean_acceptance_length": 1.0 + accepted / steps if steps else 1.0,
        "draft_acceptance_rate": accepted / drafted if drafted else 0.0,
        "acceptance_histogram": hist,
        "num_spec_steps": steps,
        "num_accepted_draft_tokens": accepted,
        "num_draft_tokens": drafted,
        "num_spec_tokens": k,
    }
    if detailed:
        out["per_step_accepted"] = list(per_step_accepted)
        out["per_step_drafted"] = list(per_step_drafted)
    return out


class FaultServer:
    def __init__(
        self,
        *,
        k: int = 4,
        model: str = "fake/target-model",
        output_tokens: int = 24,
        alpha: float = 0.6,
        no_draft_prob: float = 0.1,
        detailed: bool = True,
        num_engines: int = 1,
        draft_per_pos: bool = False,
        prior_requests: int = 0,
        api_key: str | None = None,
        seed: int = 0,
        stall_s: float = 4.0,
        slow_chunk_s: float = 0.02,
        max_lifetime_s: float = 60.0,
        **server_faults: Any,
    ) -> None:
        self.k = k
        self.model = model
        self.output_tokens = output_tokens
        self.alpha = alpha
        self.no_draft_prob = no_draft_prob
        self.detailed = detailed
        self.num_engines = num_engines
        self.draft_per_pos = draft_per_pos
        self.api_key = api_key
        self.seed = seed
        self.stall_s = stall_s
        self.slow_chunk_s = slow_chunk_s
        self.max_lifetime_s = max_lifetime_s

        # per-request fault selection
        self.schedule: dict[int, str] = {}
        self.default_fault: str | None = None
        # server-wide faults
        self.restart_after_requests: int | None = None  # zero the counters once this many requests finished
        self.restart_on_scrape: int | None = None  # zero the counters just before the n-th /metrics scrape (1-based)
        # zero the counters just before the first /metrics scrape that finds this many completion requests
        # finished and none in flight: after all of a point's traffic, before its closing snapshot (the
        # gauge polls during a point make scrape numbers unpredictable)
        self.restart_on_idle_scrape: int | None = None
        self.hide_sd: str | None = None  # "all": no vllm:spec_decode_* series; "required": only per-position ones
        self.hide_sd_from_scrape: int = 0  # hiding starts at this /metrics scrape (1-based; 0: always)
        self.foreign_per_request: int = 0  # phantom requests counted per real finished request
        self.lie_extra_accepted: int = 0  # per-request stats claim this many more accepted tokens than counted
        self.per_request_stats: bool = True  # False: like vLLM without --per-request-spec-decode-metrics
        self.garbage_metrics: bool = False  # /metrics answers 200 with text that is not Prometheus exposition
        for key, value in server_faults.items():  # any of the attributes above, e.g. foreign_per_request=1
            if not hasattr(self, key) or key.startswith("_"):
                raise TypeError(f"FaultServer has no setting {key!r}")
            setattr(self, key, value)

        # observations
        self.log: list[Received] = []
        self.problems: list[str] = []  # unexpected server-side exceptions / unknown faults
        self.scrapes = 0
        self.restarts = 0
        self.expired = False
        self.true_totals = Tally()  # what the counters were advanced by (real requests, incl. aborted)
        self.reported_totals = Tally()  # what the per-request stats claimed (finished requests)
        self.finished: list[tuple[int, dict[str, Any], dict[str, Any]]] = []  # (index, true stats, reported stats)

        self._lock = threading.Lock()
        self._n_completions = 0
        self._n_finished = 0
        self._running = [0] * num_engines  # requests each engine is streaming right now (the gauge)
        self._in_flight = 0  # completion requests received and not yet answered in full
        self.max_running = 0  # the most requests streaming at once, over the server's life
        self._created = time.time()
        self._c: dict[str, Any] = {}
        self._zero_counters()
        for i in range(prior_requests):  # a server that has been running for a while
            plan = self._plan(f"prior traffic {i}", 32)
            self._account(plan.per_step_accepted, plan.per_step_drafted, engine=i % num_engines,
                          reason=plan.finish_reason, prompt_tokens=plan.prompt_tokens,
                          output_tokens=plan.output_tokens, real=False)

        self.url = ""
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop_event: asyncio.Event | None = None
        self._ready = threading.Event()
        self._start_error: BaseException | None = None
        self._handlers: set[asyncio.Task[Any]] = set()

    # ---- lifecycle ---------------------------------------------------------------------------------
    def start(self) -> FaultServer:
        self._thread = threading.Thread(target=self._thread_main, name="faultserver", daemon=True)
        self._thread.start()
        if not self._ready.wait(10):
            raise RuntimeError("fault server did not start within 10 s")
        if self._start_error is not None:
            raise RuntimeError(f"fault server failed to start: {self._start_error!r}")
        return self

    def stop(self) -> None:
        loop, ev = self._loop, self._stop_event
        if loop is not None and ev is not None and not loop.is_closed():
            try:
                loop.call_soon_threadsafe(ev.set)
            except RuntimeError:  # loop already closed
                pass
        if self._thread is not None:
            self._thread.join(10)

    def __enter__(self) -> FaultServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _thread_main(self) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        try:
            loop.run_until_complete(self._serve())
        except BaseException as exc:  # noqa: BLE001 - reported to start()
            self._start_error = exc
            self._ready.set()
        finally:
            loop.close()

    async def _serve(self) -> None:
        app = web.Application(middlewares=[self._middleware])
        app.router.add_get("/health", self._health)
        app.router.add_get("/v1/models", self._models)
        app.router.add_get("/metrics", self._metrics)
        app.router.add_post("/v1/chat/completions", self._chat)
        app.router.add_post("/v1/completions", self._completions)
        runner = web.AppRunner(app, access_log=None, handler_cancellation=True, shutdown_timeout=0.5)
        await runner.setup()
        try:
            site = web.TCPSite(runner, "127.0.0.1", 0)
            await site.start()
            port = runner.addresses[0][1]
            self.url = f"http://127.0.0.1:{port}"
            self._stop_event = asyncio.Event()
            self._ready.set()
            try:
                await asyncio.wait_for(self._stop_event.wait(), self.max_lifetime_s)
            except asyncio.TimeoutError:
                self.expired = True
        finally:
            for task in list(self._handlers):
                task.cancel()
            await runner.cleanup()

    # ---- counters ----------------------------------------------------------------------------------
    def _zero_counters(self) -> None:
        e, k = self.num_engines, self.k
        self._c = {
            "drafts": [0] * e,
            "draft_tokens": [0] * e,
            "accepted": [0] * e,
            "accepted_per_pos": [[0] * k for _ in range(e)],
            "draft_per_pos": [[0] * k for _ in range(e)],
            "success": [{r: 0 for r in FINISH_REASONS} for _ in range(e)],
            "generation_tokens": [0] * e,
            "prompt_tokens": [0] * e,
        }
        self._created = time.time()

    def restart(self) -> None:
        """What a server restart does to /metrics: every counter back to zero, new _created stamps."""
        with self._lock:
            self._zero_counters()
            self.restarts += 1

    def _account(
        self, acc: list[int], dr: list[int], *, engine: int, reason: str, prompt_tokens: int,
        output_tokens: int, real: bool = True,
    ) -> None:
        """Advance the counters by the given steps (caller holds no lock)."""
        with self._lock:
            c = self._c
            for a, d in zip(acc, dr):
                if d <= 0:
                    continue
                c["drafts"][engine] += 1
                c["draft_tokens"][engine] += d
                c["accepted"][engine] += a
                for i in range(a):
                    c["accepted_per_pos"][engine][i] += 1
                for i in range(d):
                    c["draft_per_pos"][engine][i] += 1
            c["success"][engine][reason] += 1
            c["generation_tokens"][engine] += output_tokens
            c["prompt_tokens"][engine] += prompt_tokens
            if real:
                self.true_totals.add(sd_stats(acc, dr, self.k))

    def render_metrics(self) -> str:
        with self._lock:
            c = self._c
            created = self._created
            lines: list[str] = []
            model = self.model

            def labels(engine: int, extra: dict[str, str] | None = None) -> str:
                parts = {"engine": str(engine), "model_name": model, **(extra or {})}
                return ",".join(f'{key}="{val}"' for key, val in parts.items())

            def counter(name: str, help_: str, samples: list[tuple[str, float]]) -> None:
                lines.append(f"# HELP {name}_total {help_}")
                lines.append(f"# TYPE {name}_total counter")
                lines.extend(f"{name}_total{{{lab}}} {float(v)!r}" for lab, v in samples)
                lines.append(f"# HELP {name}_created {help_}")
                lines.append(f"# TYPE {name}_created gauge")
                lines.extend(f"{name}_created{{{lab}}} {created!r}" for lab, _ in samples)

            engines = range(self.num_engines)
            hide = self.hide_sd if self.scrapes >= self.hide_sd_from_scrape else None
            lines.append("# HELP vllm:num_requests_running Number of requests in model execution batches.")
            lines.append("# TYPE vllm:num_requests_running gauge")
            lines.extend(f"vllm:num_requests_running{{{labels(e)}}} {float(self._running[e])!r}" for e in engines)
            counter(PROMPT_TOKENS, "Number of prefill tokens processed.",
                    [(labels(e), c["prompt_tokens"][e]) for e in engines])
            counter(GENERATION_TOKENS, "Number of generation tokens processed.",
                    [(labels(e), c["generation_tokens"][e]) for e in engines])
            counter(REQUEST_SUCCESS, "Count of successfully processed requests.",
                    [(labels(e, {"finished_reason": r}), c["success"][e][r]) for e in engines for r in FINISH_REASONS])
            if hide is None:
                counter(DRAFTS, "Number of spec decoding drafts.", [(labels(e), c["drafts"][e]) for e in engines])
                counter(DRAFT_TOKENS, "Number of draft tokens.", [(labels(e), c["draft_tokens"][e]) for e in engines])
                counter(ACCEPTED, "Number of accepted tokens.", [(labels(e), c["accepted"][e]) for e in engines])
            if hide != "all":
                counter(ACCEPTED_PER_POS, "Accepted tokens per draft position.",
                        [(labels(e, {"position": str(i)}), c["accepted_per_pos"][e][i]) for e in engines for i in range(self.k)])
                if self.draft_per_pos:
                    counter(DRAFT_TOKENS_PER_POS, "Draft tokens per draft position.",
                            [(labels(e, {"position": str(i)}), c["draft_per_pos"][e][i]) for e in engines for i in range(self.k)])
            # a histogram, as vLLM exposes many (its _bucket/_sum/_count samples must not confuse anyone)
            lines.append("# HELP vllm:e2e_request_latency_seconds Histogram of e2e request latency in seconds.")
            lines.append("# TYPE vllm:e2e_request_latency_seconds histogram")
            for e in engines:
                n = sum(c["success"][e].values())
                for le in ("0.3", "1.0", "+Inf"):
                    lines.append(f'vllm:e2e_request_latency_seconds_bucket{{{labels(e)},le="{le}"}} {float(n)!r}')
                lines.append(f"vllm:e2e_request_latency_seconds_count{{{labels(e)}}} {float(n)!r}")
                lines.append(f"vllm:e2e_request_latency_seconds_sum{{{labels(e)}}} {0.01 * n!r}")
            return "\n".join(lines) + "\n"

    # ---- generation --------------------------------------------------------------------------------
    def _plan(self, prompt: str, max_tokens: int) -> Plan:
        rng = random.Random(f"{self.seed}|{prompt}")
        n = max(1, min(self.output_tokens, max_tokens))
        finish = "length" if max_tokens <= self.output_tokens else "stop"
        chunks = [1]
        acc: list[int] = []
        dr: list[int] = []
        remaining = n - 1
        while remaining > 0:
            if rng.random() < self.no_draft_prob:
                a, d = 0, 0  # the drafter proposed nothing: a plain decode step, not an SD step
            else:
                d = self.k
                a = 0
                while a < d and rng.random() < self.alpha:
                    a += 1
                a = min(a, remaining - 1)
            acc.append(a)
            dr.append(d)
            chunks.append(a + 1)
            remaining -= a + 1
        return Plan(len(prompt.split()) + 3, chunks, acc, dr, finish)

    def _reported(self, acc: list[int], dr: list[int]) -> dict[str, Any]:
        """The per-request stats as the server tells them (a lie when lie_extra_accepted is set)."""
        told = list(acc)
        extra = self.lie_extra_accepted
        for i, (a, d) in enumerate(zip(told, dr)):
            if extra <= 0:
                break
            if d > 0 and a < d:
                bump = min(extra, d - a)
                told[i] += bump
                extra -= bump
        return sd_stats(told, dr, self.k, self.detailed)

    # ---- handlers ----------------------------------------------------------------------------------
    @web.middleware
    async def _middleware(self, request: web.Request, handler: Any) -> web.StreamResponse:
        task = asyncio.current_task()
        assert task is not None
        self._handlers.add(task)
        try:
            return await handler(request)
        except ConnectionError:
            # the client went away mid-response (it timed out, or gave up on the run): nothing to answer
            raise asyncio.CancelledError from None
        except (asyncio.CancelledError, web.HTTPException):
            raise
        except Exception as exc:  # noqa: BLE001
            self.problems.append(f"{request.method} {request.path}: {exc!r}")
            raise
        finally:
            self._handlers.discard(task)

    def _log(self, request: web.Request, body: Any = None, index: int | None = None) -> Received:
        rec = Received(index, request.method, request.path, dict(request.headers), body)
        with self._lock:
            self.log.append(rec)
        return rec

    def _authorized(self, request: web.Request) -> bool:
        return self.api_key is None or request.headers.get("Authorization") == f"Bearer {self.api_key}"

    async def _health(self, request: web.Request) -> web.StreamResponse:
        self._log(request)
        return web.Response(status=200)

    async def _models(self, request: web.Request) -> web.StreamResponse:
        self._log(request)
        if not self._authorized(request):
            return web.json_response({"error": "Unauthorized"}, status=401)
        return web.json_response({
            "object": "list",
            "data": [{"id": self.model, "object": "model", "created": int(self._created), "owned_by": "vllm",
                      "root": self.model, "parent": None, "max_model_len": 2048, "permission": []}],
        })

    async def _metrics(self, request: web.Request) -> web.StreamResponse:
        self._log(request)
        with self._lock:
            self.scrapes += 1
            scrape = self.scrapes
        if self.restart_on_scrape is not None and scrape == self.restart_on_scrape:
            self.restart()
        idle = self.restart_on_idle_scrape
        with self._lock:
            due = idle is not None and self._n_finished >= idle and self._in_flight == 0
            if due:
                self.restart_on_idle_scrape = None  # once
        if due:
            self.restart()
        if self.garbage_metrics:
            return web.Response(text="<html>oops</html>\n{not: prometheus}\n", content_type="text/html")
        return web.Response(text=self.render_metrics(), content_type="text/plain", charset="utf-8",
                            headers={"X-Scrape": str(scrape)})

    async def _chat(self, request: web.Request) -> web.StreamResponse:
        return await self._completion(request, chat=True)

    async def _completions(self, request: web.Request) -> web.StreamResponse:
        return await self._completion(request, chat=False)

    def _choose_fault(self, request: web.Request, body: dict[str, Any], index: int, chat: bool) -> str | None:
        if FAULT_HEADER in request.headers:
            return request.headers[FAULT_HEADER]
        text = ""
        if chat:
            users = [m for m in body.get("messages") or [] if isinstance(m, dict) and m.get("role") == "user"]
            content = users[-1].get("content") if users else ""
            text = content if isinstance(content, str) else json.dumps(content)
        else:
            prompt = body.get("prompt")
            text = prompt.rsplit("User:", 1)[-1] if isinstance(prompt, str) else ""
        if MARKER in text:
            return text.split(MARKER, 1)[1].split()[0].strip(".,;:!?\"'")
        return self.schedule.get(index, self.default_fault)

    async def _completion(self, request: web.Request, chat: bool) -> web.StreamResponse:
        streaming: list[int] = []  # the engine streaming this request, once it streams
        with self._lock:
            self._in_flight += 1
        try:
            return await self._answer(request, chat, streaming)
        finally:
            with self._lock:
                self._in_flight -= 1
                for engine in streaming:
                    self._running[engine] -= 1

    def _start_streaming(self, engine: int, streaming: list[int]) -> None:
        with self._lock:
            self._running[engine] += 1
            self.max_running = max(self.max_running, sum(self._running))
        streaming.append(engine)

    def token_ids(self, prompt: str, n: int) -> list[int]:
        """The ids of the n tokens generated for `prompt`: deterministic, like greedy decoding."""
        rng = random.Random(f"token ids|{self.seed}|{prompt}")
        return [rng.randrange(100, 32000) for _ in range(n)]

    async def _answer(self, request: web.Request, chat: bool, streaming: list[int]) -> web.StreamResponse:
        try:
            body = await request.json()
        except ValueError:
            self._log(request, None)
            return _error(400, "request body is not JSON", "BadRequestError")
        with self._lock:
            index = self._n_completions
            self._n_completions += 1
        rec = self._log(request, body, index)
        if not self._authorized(request):
            rec.outcome = "rejected"
            return web.json_response({"error": "Unauthorized"}, status=401)
        fault = self._choose_fault(request, body, index, chat)
        if fault == "none":
            fault = None
        rec.fault = fault
        if fault is not None and fault not in REQUEST_FAULTS:
            self.problems.append(f"unknown fault {fault!r} in request {index}")
            rec.outcome = "rejected"
            return _error(400, f"fault server: unknown fault {fault!r}", "BadRequestError")
        if fault in PRE_ENGINE:
            rec.outcome = "rejected"
            return await self._pre_engine_fault(request, fault)
        if not body.get("stream"):
            rec.outcome = "rejected"
            return _error(400, "fault server only streams; send stream=true", "BadRequestError")

        if chat:
            prompt = json.dumps(body.get("messages"), sort_keys=True)
        else:
            prompt = body.get("prompt") if isinstance(body.get("prompt"), str) else json.dumps(body.get("prompt"))
        max_tokens = int(body.get("max_tokens") or 16)
        plan = self._plan(prompt, max_tokens)
        engine = index % self.num_engines
        ids = self.token_ids(prompt, plan.output_tokens) if body.get("return_token_ids") else None
        opts = body.get("stream_options") or {}
        include_usage = bool(opts.get("include_usage")) and fault != "no_usage"
        continuous = include_usage and bool(opts.get("continuous_usage_stats"))
        created = int(time.time())
        rid = f"chatcmpl-fault-{index}" if chat else f"cmpl-fault-{index}"

        def event(choices: list[dict[str, Any]], usage: dict[str, Any] | None = None, **extra: Any) -> bytes:
            obj: dict[str, Any] = {
                "id": rid, "object": "chat.completion.chunk" if chat else "text_completion",
                "created": created, "model": self.model, "choices": choices,
            }
            if usage is not None:
                obj["usage"] = usage
            obj.update(extra)
            return b"data: " + json.dumps(obj).encode() + b"\n\n"

        def usage(done: int) -> dict[str, Any]:
            return {"prompt_tokens": plan.prompt_tokens, "total_tokens": plan.prompt_tokens + done,
                    "completion_tokens": done}

        def choice(text: Any, finish: str | None, token_ids: list[int] | None = None) -> dict[str, Any]:
            if chat:
                out = {"index": 0, "delta": {"content": text}, "logprobs": None, "finish_reason": finish}
            else:
                out = {"index": 0, "text": text, "logprobs": None, "finish_reason": finish, "stop_reason": None}
            if token_ids is not None:
                out["token_ids"] = token_ids
            return out

        resp = web.StreamResponse(status=200, headers={"Content-Type": "text/event-stream; charset=utf-8",
                                                        "Cache-Control": "no-cache"})
        await resp.prepare(request)
        self._start_streaming(engine, streaming)
        if chat:
            role = {"index": 0, "delta": {"role": "assistant", "content": ""}, "logprobs": None, "finish_reason": None}
            await resp.write(event([role], usage(0) if continuous else None))
        mid = max(1, len(plan.chunk_tokens) // 2)
        done = 0
        word = 0
        for i, n in enumerate(plan.chunk_tokens):
            if fault in MIDSTREAM and i == mid:
                steps = i - 1  # chunk 0 came from prefill; chunk j >= 1 from decode step j-1
                self._account(plan.per_step_accepted[:steps], plan.per_step_drafted[:steps], engine=engine,
                              reason="abort", prompt_tokens=plan.prompt_tokens, output_tokens=done)
                rec.outcome = "aborted"
                return await self._midstream_fault(request, resp, fault, event, choice, usage(done))
            text = "".join(f" w{word + j}" for j in range(n))
            chunk_ids = ids[word:word + n] if ids is not None else None
            word += n
            done += n
            last = i == len(plan.chunk_tokens) - 1
            finish: Any = plan.finish_reason if last else None
            if last and fault == "bad_finish_reason":
                finish = 1
            await resp.write(event([choice(text, finish, chunk_ids)],
                                   usage(done) if continuous else None))
            if fault == "slow":
                await asyncio.sleep(self.slow_chunk_s)
        true = sd_stats(plan.per_step_accepted, plan.per_step_drafted, self.k)
        told = self._reported(plan.per_step_accepted, plan.per_step_drafted)
        if self.restart_after_requests is not None and self._n_finished == self.restart_after_requests:
            self.restart()
        self._account(plan.per_step_accepted, plan.per_step_drafted, engine=engine, reason=plan.finish_reason,
                      prompt_tokens=plan.prompt_tokens, output_tokens=plan.output_tokens)
        for _ in range(self.foreign_per_request):
            self._account(plan.per_step_accepted, plan.per_step_drafted, engine=engine, reason=plan.finish_reason,
                          prompt_tokens=plan.prompt_tokens, output_tokens=plan.output_tokens, real=False)
        with self._lock:
            self._n_finished += 1
            self.reported_totals.add(told)
            self.finished.append((index, true, told))
        if include_usage:
            extra = {"metrics": {"speculative_decoding": told}} if self.per_request_stats else {}
            final_usage: dict[str, Any] = usage(plan.output_tokens)
            if fault == "bad_usage_type":
                final_usage = {key: str(val) for key, val in final_usage.items()}
            await resp.write(event([], final_usage, **extra))
        rec.outcome = "ok"
        if fault != "incomplete":
            await resp.write(b"data: [DONE]\n\n")
        await resp.write_eof()
        return resp

    async def _pre_engine_fault(self, request: web.Request, fault: str) -> web.StreamResponse:
        if fault == "timeout":
            await asyncio.sleep(self.stall_s)  # the client gives up first; the handler is then cancelled
            return _error(504, "fault server: stalled", "Timeout")
        if fault == "http_400":
            return _error(400, "This model's maximum context length is 2048 tokens. However, you requested "
                               "4096 tokens. Please reduce the length of the messages or completion.",
                          "BadRequestError")
        if fault == "http_401_echo_key":
            presented = request.headers.get("Authorization", "").removeprefix("Bearer ")
            return _error(401, f"Incorrect API key provided: {presented}. You can find your API key in your "
                               "account settings.", "AuthenticationError")
        if fault == "http_429":
            resp = _error(429, "Too many requests: rate limit exceeded, retry later", "RateLimitError")
            resp.headers["Retry-After"] = "1"
            return resp
        if fault == "http_500":
            return _error(500, "EngineCore encountered an issue. See stack trace (above) for the root cause.",
                          "InternalServerError")
        assert fault == "disconnect"
        _reset(request)
        raise asyncio.CancelledError  # nothing more to send on a dead connection

    async def _midstream_fault(
        self, request: web.Request, resp: web.StreamResponse, fault: str, event: Any, choice: Any,
        usage: dict[str, Any],
    ) -> web.StreamResponse:
        if fault == "stall":
            await asyncio.sleep(self.stall_s)
            await resp.write_eof()
            return resp
        if fault == "reset":
            await asyncio.sleep(0.05)  # let the chunks written so far reach the client first
            _reset(request)
            raise asyncio.CancelledError
        if fault == "malformed":
            await resp.write(b'data: {"id": "chatcmpl-x", "object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {"content": "tru\n\n')
        elif fault == "malformed_deep":
            await resp.write(b"data: " + b"[" * 100_000 + b"]" * 100_000 + b"\n\n")
        elif fault == "malformed_bigint":
            await resp.write(b'data: {"choices": [], "usage": {"completion_tokens": ' + b"7" * 5000 + b"}}\n\n")
        elif fault == "bad_content_type":
            await resp.write(event([choice(12345, None)], usage))
        elif fault == "stream_error":
            err = {"error": {"object": "error", "message": "EngineCore encountered an issue: CUDA error: "
                             "an illegal memory access was encountered", "type": "InternalServerError",
                             "param": None, "code": 500}}
            await resp.write(b"data: " + json.dumps(err).encode() + b"\n\n")
        if fault == "bad_content_type":
            # a server this broken still finishes its stream properly
            await resp.write(event([], usage))
        await resp.write(b"data: [DONE]\n\n")
        await resp.write_eof()
        return resp

    # ---- helpers for tests -------------------------------------------------------------------------
    def completion_requests(self) -> list[Received]:
        return [r for r in self.log if r.index is not None]

    def scrape(self) -> str:
        """The /metrics text right now (without counting a scrape)."""
        return self.render_metrics()


def _error(status: int, message: str, type_: str) -> web.Response:
    """vLLM's error body."""
    return web.json_response(
        {"error": {"message": message, "type": type_, "param": None, "code": status}, "object": "error"},
        status=status,
    )


def _reset(request: web.Request) -> None:
    """Close the connection with a TCP RST (SO_LINGER 0), as a crashed proxy or server would."""
    transport = request.transport
    if transport is None:
        return
    sock = transport.get_extra_info("socket")
    if sock is not None:
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        except OSError:
            pass
    transport.abort()


@pytest.fixture
def fault_server() -> Iterator[FaultServer]:
    """A fresh fault server (defaults) for one test; stopped and checked for internal problems after."""
    server = FaultServer().start()
    try:
        yield server
    finally:
        server.stop()
    assert not server.problems, f"the fault server itself misbehaved: {server.problems}"


# ---- helpers to drive specmeter against it -----------------------------------------------------------
def conversations(turns: list[list[str]] | list[str], prefix: str = "c") -> list[Any]:
    """Conversations from turn lists (a plain string is a one-turn conversation)."""
    from specmeter.data.model import Conversation

    out = []
    for i, t in enumerate(turns):
        out.append(Conversation(id=f"{prefix}{i:03d}", category=f"cat{i % 2}", turns=[t] if isinstance(t, str) else t))
    return out


def _attach_execution(url: str, baseline_url: str | None, convs: list[Any], k: int, api_key: str | None,
                      workload: Any, repeats: int, interleave: bool, load: dict[str, Any]) -> Any:
    from specmeter.config import EngineSpec, LoadSpec, SpecConfig
    from specmeter.plans.run import run_plan as build_run_plan
    from specmeter.runner import Execution
    from specmeter.schemas.plan import WorkloadSelection

    load.setdefault("warmup", 0)
    load.setdefault("max_tokens", 32)
    spec = SpecConfig(method="ngram", num_speculative_tokens=k)
    plan = build_run_plan(EngineSpec(endpoint=url), spec, LoadSpec(**load), baseline=baseline_url is not None,
                          baseline_endpoint=baseline_url,
                          workload=workload or WorkloadSelection(dataset="fault-server-test"),
                          repeats=repeats, interleave=interleave)
    return Execution(plan=plan, conversations=convs, api_key=api_key,
                     command=["specmeter", "run", "--endpoint", url])


def attach_plan(url: str, convs: list[Any], k: int = 4, api_key: str | None = None, **load: Any) -> Any:
    """An attach-mode Execution against `url`: one configuration, ngram K=k (id "ngram-k<k>"), no baseline
    (warmup 0 unless given)."""
    return _attach_execution(url, None, convs, k, api_key, None, 1, False, load)


def attach_pair(url: str, baseline_url: str, convs: list[Any], k: int = 4, workload: Any = None,
                repeats: int = 1, interleave: bool = False, **load: Any) -> Any:
    """An attach-mode Execution of two configurations: ngram K=k at `url`, then the baseline at
    `baseline_url` (warmup 0 unless given). `workload`: the WorkloadSelection the plan stores."""
    return _attach_execution(url, baseline_url, convs, k, None, workload, repeats, interleave, load)


class RecordingReporter(Reporter):
    """A silent reporter that keeps every finished record and point it is told about."""

    def __init__(self) -> None:
        self.records: list[Any] = []
        self.points: list[tuple[Any, Any]] = []  # (PlannedConfig, PointResult) as each point finished
        self.started: list[tuple[str, str, int, int | None]] = []  # (config id, point id, repeat, requests)
        self.total_requests: int | None = None
        self.notes: list[str] = []

    def plan_start(self, plan: Any, total_requests: int | None) -> None:
        self.total_requests = total_requests

    def point_start(self, config: Any, point: Any, repeat: int, total: int | None) -> None:
        self.started.append((config.id, point.id, repeat, total))

    def request_done(self, record: Any) -> None:
        self.records.append(record)

    def point_done(self, config: Any, result: Any) -> None:
        self.points.append((config, result))

    def note(self, message: str) -> None:
        self.notes.append(message)


def run_plan(ex: Any, root: Any) -> tuple[Any, BaseException | None, RecordingReporter]:
    """specmeter.runner.execute of the Execution `ex` into `root`; returns (summary or None, the exception
    or None, reporter)."""
    from specmeter.runner import execute
    from specmeter.store import RunStore

    reporter = RecordingReporter()
    try:
        return execute(ex, RunStore(root), reporter), None, reporter
    except Exception as exc:  # noqa: BLE001 - the tests look at it
        return None, exc, reporter


def only_config(summary: Any) -> Any:
    """The one configuration an attach_plan run measured."""
    (config,) = summary.configs
    return config


def point_requests(convs: list[Any], concurrency: int) -> int:
    """Requests a closed-loop point of `concurrency` sends for `convs` (the workload cycled up to the floor)."""
    from specmeter.config import ConcurrencyPoint, LoadSpec
    from specmeter.load.point import count_requests, point_conversations

    return count_requests(point_conversations(convs, ConcurrencyPoint(concurrency=concurrency), LoadSpec()))


def negative_numbers(obj: Any, path: str = "$") -> list[str]:
    """Paths of every negative number in a JSON-like object."""
    out: list[str] = []
    if isinstance(obj, dict):
        for key, val in obj.items():
            out += negative_numbers(val, f"{path}.{key}")
    elif isinstance(obj, list):
        for i, val in enumerate(obj):
            out += negative_numbers(val, f"{path}[{i}]")
    elif isinstance(obj, (int, float)) and not isinstance(obj, bool) and obj < 0:
        out.append(f"{path}={obj}")
    return out
