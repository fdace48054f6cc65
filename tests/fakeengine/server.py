"""The fake engine: an OpenAI-compatible streaming server (aiohttp, in a thread of the test process) that
generates deterministic speculative steps, counts them the way an engine does, and shows them in one
engine's shapes (its personality: vLLM unless told otherwise), with faults on demand.

It serves GET /health, /v1/models, the personality's statistics endpoints (/metrics ...), and
POST /v1/chat/completions and /v1/completions as SSE streams: content chunks (delta.content or text, with
the chunk's `token_ids` when the request asks `return_token_ids`), continuous usage when asked, the
personality's per-request SD numbers, a final usage chunk with choices [] (stream_options.include_usage),
then `data: [DONE]`. The counters advance by exactly the generated steps, so per-request sums and counter
deltas agree unless a server-wide fault says otherwise.

Per-request faults: fakeengine.faults. Server-wide faults are attributes (also constructor keywords):
`restart_after_requests`, `restart_on_scrape`, `restart_on_idle_scrape` (counters back to zero: a restart;
every read of the Prometheus text is a scrape, specmeter's running-gauge polls during a point too), `hide_sd`
/ `hide_sd_from_scrape` (SD series missing), `foreign_per_request` (phantom requests counted: other clients),
`lie_extra_accepted` (per-request stats claim more than the counters got), `per_request_stats` (False: none
in responses), `garbage_metrics` (the Prometheus endpoint answers something else), `echo_auth` (the caller's
Authorization header repeated in every stream's closing usage chunk and in the Prometheus text),
`impossible_metrics` (accepted > drafted, +Inf counters or a NaN running gauge in the Prometheus text).

The server records every request it got (`log`), the true and the reported SD totals, and any internal
problem (`problems`, which the fixtures check)."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from typing import Any

from aiohttp import web

from fakeengine import chunks, faults, vllm
from fakeengine.counters import Counters
from fakeengine.personality import Personality
from fakeengine.steps import Plan, Tally, plan_request, sd_stats, token_ids
from fakeengine.stream import Received, Stream
from fakeengine.threaded import ThreadedServer
from fakeengine.vllm import VLLM


class FakeEngine(ThreadedServer):
    def __init__(
        self, personality: Personality | None = None, *, k: int = 4, model: str = "fake/target-model",
        output_tokens: int = 24, alpha: float = 0.6, no_draft_prob: float | None = None, num_engines: int = 1,
        prior_requests: int = 0, api_key: str | None = None, seed: int = 0, stall_s: float = 4.0,
        slow_chunk_s: float = 0.02, step_s: float = 0.0, batch_step_s: float = 0.0, max_lifetime_s: float = 60.0,
        tree_nodes: int | None = None, speculative: bool = True, collapse_after_zero: bool = False,
        **server_faults: Any,
    ) -> None:
        """`k` drafts per step, each accepted with probability `alpha`; `output_tokens` per reply (or
        max_tokens, if fewer); `no_draft_prob`: share of decode steps that draft nothing (the personality's
        default if None); `num_engines` replicas (data parallel; vLLM only); `prior_requests` counted before
        the test (traffic of an engine that has run a while); `api_key` required on /v1/*; `stall_s` the stall
        of the timeout faults, `slow_chunk_s` the pause after each chunk under the "slow" fault, `step_s` after
        each step otherwise, plus `batch_step_s` for every request streaming at that moment (a step of a larger
        batch takes longer, as a real engine's does). `tree_nodes`: every step drafts a tree of that many nodes
        and depth `k` and accepts one path of it (tree drafts: SGLang's EAGLE topk > 1, TensorRT-LLM's trees).
        `speculative=False`: a server started without a speculative config (a baseline), which shows no SD series
        and no per-request SD stats; its steps' timing is as set. `collapse_after_zero`: a request accepts nothing
        after its first step that drafted nothing (fakeengine.steps.plan_request)."""
        super().__init__(max_lifetime_s)
        self.personality = personality or VLLM()
        if num_engines > 1 and self.personality.replica_label is None:
            raise TypeError(f"the {self.personality.name} personality shows one engine; num_engines must be 1")
        self.k, self.model, self.output_tokens, self.alpha = k, model, output_tokens, alpha
        self.tree_nodes, self.collapse_after_zero = tree_nodes, collapse_after_zero
        self.no_draft_prob = self.personality.no_draft_prob if no_draft_prob is None else no_draft_prob
        self.num_engines, self.api_key, self.seed = num_engines, api_key, seed
        self.stall_s, self.slow_chunk_s, self.step_s, self.batch_step_s = stall_s, slow_chunk_s, step_s, batch_step_s

        # per-request fault selection (fakeengine.faults)
        self.schedule: dict[int, str] = {}
        self.default_fault: str | None = None
        # server-wide faults
        self.restart_after_requests: int | None = None  # zero the counters once this many requests finished
        self.restart_on_scrape: int | None = None  # zero the counters just before the n-th scrape (1-based)
        # zero the counters just before the first scrape that finds this many completion requests finished and
        # none in flight: after all of a point's traffic, before its closing snapshot (the gauge polls during a
        # point make scrape numbers unpredictable)
        self.restart_on_idle_scrape: int | None = None
        self.hide_sd: str | None = None  # "all": no SD series; "required": only per-position ones
        self.hide_sd_from_scrape: int = 0  # hiding starts at this scrape (1-based; 0: always)
        self.foreign_per_request: int = 0  # phantom requests counted per real finished request
        self.lie_extra_accepted: int = 0  # per-request stats claim this many more accepted tokens than counted
        self.per_request_stats: bool = True  # False: like vLLM without --per-request-spec-decode-metrics
        self.garbage_metrics: bool = False  # the Prometheus endpoint answers 200 with text that is not that
        self.echo_auth: bool = False  # a debugging proxy: the Authorization header sent back in payloads and scrapes
        # impossible numbers in the Prometheus text: "accepted_over_drafted" (more accepted tokens than drafted),
        # "inf_counters" (the draft-token counter +Inf), "nan_gauge" (the running-requests gauge NaN)
        self.impossible_metrics: str | None = None
        self.max_num_seqs: int | None = None  # requests streamed at once; the rest wait their turn (a full engine)
        self.answer_model: str | None = None  # the model its chunks name, where not `model` (a proxy routing elsewhere)
        if not speculative:  # a server without a speculative config, as vLLM shows one: no SD series, no stats
            self.hide_sd, self.per_request_stats = "all", False
        for key, value in server_faults.items():  # any of the attributes above, e.g. foreign_per_request=1
            if not hasattr(self, key) or key.startswith("_"):
                raise TypeError(f"FakeEngine has no setting {key!r}")
            setattr(self, key, value)

        # observations
        self.log: list[Received] = []
        self.problems: list[str] = []  # unexpected server-side exceptions / unknown faults
        self.scrapes = 0
        self.restarts = 0
        self.true_totals = Tally()  # what the counters were advanced by (real requests, incl. aborted)
        self.reported_totals = Tally()  # what the per-request stats claimed (finished requests)
        self.max_running = 0  # the most requests streaming at once, over the server's life

        self.lock = threading.RLock()
        self._n_completions = 0
        self._n_finished = 0
        self._in_flight = 0  # completion requests received and not yet answered in full
        self._slots: asyncio.Semaphore | None = None  # max_num_seqs, made in the server's own event loop
        self.counters: list[Counters] = []  # one per engine replica, since the last (re)start
        self._created = time.time()
        self._zero_counters()
        self.personality.bind(self)
        for i in range(prior_requests):  # an engine that has been running for a while
            plan = self._plan(f"prior traffic {i}", 32)
            self._account(plan, engine=i % num_engines, reason=plan.finish_reason,
                          output_tokens=plan.output_tokens, real=False)

    # ---- counters ----------------------------------------------------------------------------------
    def _zero_counters(self) -> None:
        self.counters = [Counters(k=self.k, tree=self.tree_nodes is not None) for _ in range(self.num_engines)]
        self._created = time.time()

    def restart(self) -> None:
        """What an engine restart does to its counters: every one back to zero, new _created stamps."""
        with self.lock:
            running = [c.running for c in self.counters]
            self._zero_counters()
            for c, n in zip(self.counters, running):
                c.running = n
            self.restarts += 1

    def running(self) -> int:
        """Requests the engine is streaming right now."""
        with self.lock:
            return sum(c.running for c in self.counters)

    def _account(self, plan: Plan, *, engine: int, reason: str, output_tokens: int, steps: int | None = None,
                 real: bool = True) -> None:
        """Count a request that ended (with `reason`) after `steps` of its plan's steps (all if None)."""
        acc, dr = plan.per_step_accepted[:steps], plan.per_step_drafted[:steps]
        with self.lock:
            c = self.counters[engine]
            c.add_steps(acc, dr)
            c.success[reason] += 1
            c.generation_tokens += output_tokens
            c.prompt_tokens += plan.prompt_tokens
            if real:
                self.true_totals.add(sd_stats(acc, dr, self.k))

    def scrape(self) -> str:
        """The personality's Prometheus text for the counters right now (without counting a scrape)."""
        with self.lock:
            hide = self.hide_sd if self.scrapes >= self.hide_sd_from_scrape else None
            text = self.personality.render(self.counters, self._created, hide)
        return self._impossible(text) if self.impossible_metrics else text

    def _impossible(self, text: str) -> str:
        """The text with one metric's values made impossible (impossible_metrics says which, and how; vLLM's names)."""
        # every scrape claims 1,000 more accepted tokens: any delta holds more accepted than drafted
        metric, how = {"accepted_over_drafted": (vllm.ACCEPTED, lambda v: f"{float(v) + 1000.0 * self.scrapes}"),
                       "inf_counters": (vllm.DRAFT_TOKENS, lambda v: "+Inf"),
                       "nan_gauge": (vllm.RUNNING, lambda v: "NaN")}[self.impossible_metrics or ""]
        out = []
        for line in text.splitlines():
            name = line.split("{", 1)[0].split(" ", 1)[0]
            if not line.startswith("#") and name in (metric, metric + "_total"):
                head, value = line.rsplit(" ", 1)
                line = f"{head} {how(value)}"
            out.append(line)
        return "\n".join(out) + "\n"

    # ---- generation --------------------------------------------------------------------------------
    def _plan(self, prompt: str, max_tokens: int) -> Plan:
        return plan_request(str(self.seed), prompt, max_tokens, output_tokens=self.output_tokens, k=self.k,
                            alpha=self.alpha, no_draft_prob=self.no_draft_prob, tree_nodes=self.tree_nodes,
                            collapse_after_zero=self.collapse_after_zero)

    def token_ids(self, prompt: str, n: int) -> list[int]:
        """The ids of the n tokens generated for `prompt`: deterministic, like greedy decoding."""
        return token_ids(str(self.seed), prompt, n)

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
        return sd_stats(told, dr, self.k)

    # ---- handlers ----------------------------------------------------------------------------------
    def middlewares(self) -> list[Any]:
        return [self._middleware]

    def routes(self, app: web.Application) -> None:
        app.router.add_get("/health", self._health)
        app.router.add_get("/v1/models", self._models)
        self.personality.routes(app, self._prometheus)
        app.router.add_post("/v1/chat/completions", self._chat)
        app.router.add_post("/v1/completions", self._completions)
        if self.personality.server_header is not None:
            header = self.personality.server_header

            async def stamp(request: web.Request, response: web.StreamResponse) -> None:
                response.headers["Server"] = header

            app.on_response_prepare.append(stamp)

    @web.middleware
    async def _middleware(self, request: web.Request, handler: Any) -> web.StreamResponse:
        task = asyncio.current_task()
        assert task is not None
        self.track(task)
        try:
            response: web.StreamResponse = await handler(request)
            return response
        except ConnectionError:
            # the client went away mid-response (it timed out, or gave up on the run): nothing to answer
            raise asyncio.CancelledError from None
        except (asyncio.CancelledError, web.HTTPException):
            raise
        except Exception as exc:  # any other failure is the fake's own: recorded, then raised
            self.problems.append(f"{request.method} {request.path}: {exc!r}")
            raise
        finally:
            self.untrack(task)

    def record(self, request: web.Request, body: Any = None, index: int | None = None) -> Received:
        """Log a request the server got."""
        rec = Received(index, request.method, request.path, dict(request.headers), body)
        with self.lock:
            self.log.append(rec)
        return rec

    def _authorized(self, request: web.Request) -> bool:
        return self.api_key is None or request.headers.get("Authorization") == f"Bearer {self.api_key}"

    async def _health(self, request: web.Request) -> web.StreamResponse:
        self.record(request)
        return web.Response(status=200)

    async def _models(self, request: web.Request) -> web.StreamResponse:
        self.record(request)
        if not self._authorized(request):
            return web.json_response({"error": "Unauthorized"}, status=401)
        card = chunks.model_card(self.model, self.personality.owned_by, int(self._created), 2048)
        return web.json_response({"object": "list", "data": [card]})

    async def _prometheus(self, request: web.Request) -> web.StreamResponse:
        self.record(request)
        with self.lock:
            self.scrapes += 1
            scrape = self.scrapes
        if self.restart_on_scrape is not None and scrape == self.restart_on_scrape:
            self.restart()
        idle = self.restart_on_idle_scrape
        with self.lock:
            due = idle is not None and self._n_finished >= idle and self._in_flight == 0
            if due:
                self.restart_on_idle_scrape = None  # once
        if due:
            self.restart()
        if self.garbage_metrics:
            return web.Response(text="<html>oops</html>\n{not: prometheus}\n", content_type="text/html")
        text = self.scrape()
        if self.echo_auth:
            text = f"# request Authorization: {request.headers.get('Authorization', '')}\n" + text
        return web.Response(text=text, content_type="text/plain", charset="utf-8", headers={"X-Scrape": str(scrape)})

    async def _chat(self, request: web.Request) -> web.StreamResponse:
        return await self._completion(request, chat=True)

    async def _completions(self, request: web.Request) -> web.StreamResponse:
        return await self._completion(request, chat=False)

    async def _completion(self, request: web.Request, chat: bool) -> web.StreamResponse:
        streaming: list[int] = []  # the engine streaming this request, once it streams
        with self.lock:
            self._in_flight += 1
        try:
            if self.max_num_seqs is None:
                return await self._answer(request, chat, streaming)
            if self._slots is None:
                self._slots = asyncio.Semaphore(self.max_num_seqs)
            async with self._slots:  # queued before its first byte: the wait shows in TTFT, as on a full engine
                return await self._answer(request, chat, streaming)
        finally:
            with self.lock:
                self._in_flight -= 1
            self._stop_streaming(streaming)  # a request cut short stops here

    def _start_streaming(self, engine: int, streaming: list[int]) -> None:
        with self.lock:
            self.counters[engine].running += 1
            self.max_running = max(self.max_running, sum(c.running for c in self.counters))
        streaming.append(engine)

    def _stop_streaming(self, streaming: list[int]) -> None:
        with self.lock:
            for engine in streaming:
                self.counters[engine].running -= 1
        streaming.clear()

    async def _answer(self, request: web.Request, chat: bool, streaming: list[int]) -> web.StreamResponse:
        try:
            body = await request.json()
        except ValueError:
            self.record(request, None)
            return faults.error(400, "request body is not JSON", "BadRequestError")
        with self.lock:
            index = self._n_completions
            self._n_completions += 1
        rec = self.record(request, body, index)
        if not self._authorized(request):
            rec.outcome = "rejected"
            return web.json_response({"error": "Unauthorized"}, status=401)
        fault = faults.marked_fault(request, body, chat) or self.schedule.get(index, self.default_fault)
        fault = None if fault == "none" else fault
        rec.fault = fault
        if fault is not None and fault not in faults.REQUEST_FAULTS:
            self.problems.append(f"unknown fault {fault!r} in request {index}")
            rec.outcome = "rejected"
            return faults.error(400, f"fault server: unknown fault {fault!r}", "BadRequestError")
        if fault in faults.PRE_ENGINE:
            rec.outcome = "rejected"
            return await faults.pre_engine(request, fault, self.stall_s)
        if not body.get("stream"):
            rec.outcome = "rejected"
            return faults.error(400, "the fake engine only streams; send stream=true", "BadRequestError")

        if chat:
            prompt = json.dumps(body.get("messages"), sort_keys=True)
        else:
            prompt = body.get("prompt") if isinstance(body.get("prompt"), str) else json.dumps(body.get("prompt"))
        plan = self._plan(prompt, int(body.get("max_tokens") or 16))
        engine = index % self.num_engines
        ids = self.token_ids(prompt, plan.output_tokens) if body.get("return_token_ids") else None
        opts = body.get("stream_options") or {}
        include_usage = bool(opts.get("include_usage")) and fault != "no_usage"
        continuous = include_usage and bool(opts.get("continuous_usage_stats"))
        p = self.personality

        resp = web.StreamResponse(status=200, headers={"Content-Type": "text/event-stream; charset=utf-8",
                                                        "Cache-Control": "no-cache"})
        if p.close_after_stream:
            resp.force_close()
        await resp.prepare(request)
        self._start_streaming(engine, streaming)
        s = Stream(self, request, resp, chat, index, plan, continuous)
        if chat:
            await s.write([s.choice(p.role_content, role=True)], s.usage_so_far() if continuous else None)
        finish: Any = 1 if fault == "bad_finish_reason" else plan.finish_reason
        mid = max(1, len(plan.chunk_tokens) // 2)
        for i, n in enumerate(plan.chunk_tokens):
            if fault in faults.MIDSTREAM and i == mid:
                # chunk 0 came from prefill, chunk j >= 1 from decode step j-1: i-1 steps were made
                self._account(plan, engine=engine, reason="abort", output_tokens=s.done, steps=i - 1)
                rec.outcome = "aborted"
                return await faults.midstream(s, fault, self.stall_s)
            if i > 0:
                p.on_step(plan.per_step_accepted[i - 1], plan.per_step_drafted[i - 1])
            last = i == len(plan.chunk_tokens) - 1
            pieces = [1] * n if p.one_token_per_chunk else [n]
            for j, m in enumerate(pieces):
                text = "".join(f" w{s.done + x}" for x in range(m))
                chunk_ids = ids[s.done:s.done + m] if ids is not None else None
                s.done += m
                ends = last and j == len(pieces) - 1 and not p.finish_apart
                await s.content(text, finish if ends else None, chunk_ids)
            pause = self.slow_chunk_s if fault == "slow" else self.step_s + self.batch_step_s * self.running()
            if pause > 0:
                await asyncio.sleep(pause)
        if p.finish_apart:
            await s.write([s.choice(None, finish)], s.usage_so_far() if continuous else None)
        # as in vLLM, the scheduler lets a request go before its last output reaches the client: a client that has
        # read [DONE] sees it gone from the running gauge
        self._stop_streaming(streaming)
        await self._finish(s, rec, engine, body, fault, include_usage)
        return resp

    async def _finish(self, s: Stream, rec: Received, engine: int, body: dict[str, Any], fault: str | None,
                      include_usage: bool) -> None:
        """Count a request streamed in full, then send its SD numbers, usage and end."""
        plan = s.plan
        told = self._reported(plan.per_step_accepted, plan.per_step_drafted)
        if self.restart_after_requests is not None and self._n_finished == self.restart_after_requests:
            self.restart()
        for n in range(1 + self.foreign_per_request):
            self._account(plan, engine=engine, reason=plan.finish_reason, output_tokens=plan.output_tokens,
                          real=n == 0)
        with self.lock:
            self._n_finished += 1
            self.reported_totals.add(told)
        before, usage_extra = ([], {})
        if self.per_request_stats:
            before, usage_extra = self.personality.sd_payload(told, body, plan.output_tokens)
        for extra in before:
            await s.write([], **extra)
        if include_usage:
            final_usage: dict[str, Any] = chunks.usage(plan.prompt_tokens, plan.output_tokens)
            if fault == "bad_usage_type":
                final_usage = {key: str(val) for key, val in final_usage.items()}
            if fault == "zero_usage":
                final_usage = chunks.usage(plan.prompt_tokens, 0)
            if self.echo_auth:
                usage_extra = {**usage_extra, "request_headers": {"Authorization": s.request.headers.get(
                    "Authorization", "")}}
            await s.write([], final_usage, **usage_extra)
        rec.outcome = "ok"
        if fault != "incomplete":
            await s.resp.write(chunks.DONE)
        await s.resp.write_eof()

    # ---- helpers for tests -------------------------------------------------------------------------
    def completion_requests(self) -> list[Received]:
        return [r for r in self.log if r.index is not None]
