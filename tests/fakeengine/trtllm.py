"""TensorRT-LLM's trtllm-serve: GET /metrics is a JSON list of per-iteration stats, one per decode step,
cleared by every read; Prometheus text (when the build serves it) is at /prometheus/metrics, labelled
engine_type and model_name; responses carry no SD numbers.

Builds differ: `per_position=False` serves no per-position counters, `prometheus=False` no
/prometheus/metrics at all; `capacity` bounds the JSON list (the oldest iterations are evicted silently,
like the tee buffer of `iter_stats_max_iterations`, counted in `evicted`); each of the next `garble_next`
reads of the list answers something that is not JSON (after clearing it), counted in `garbled`."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from aiohttp import web

from fakeengine.counters import FINISH_REASONS, Counters, Exposition
from fakeengine.personality import Hide, Personality

if TYPE_CHECKING:
    from fakeengine.server import FakeEngine

PROMETHEUS_PATH = "/prometheus/metrics"
DRAFT_TOKENS = "trtllm_spec_decode_num_draft_tokens"
ACCEPTED = "trtllm_spec_decode_num_accepted_tokens"
DRAFTED_PER_POS = "trtllm_spec_decode_drafted_tokens"
ACCEPTED_PER_POS = "trtllm_spec_decode_accepted_tokens"
REQUEST_SUCCESS = "trtllm_request_success"
GENERATION_TOKENS = "trtllm_generation_tokens"
RUNNING = "trtllm_num_requests_running"


class TensorRTLLM(Personality):
    name = "trtllm"
    owned_by = "tensorrt_llm"
    null_usage = True
    metrics_path = PROMETHEUS_PATH

    def __init__(self, *, per_position: bool = True, prometheus: bool = True, capacity: int | None = None) -> None:
        self.per_position = per_position
        self.serves_prometheus = prometheus
        self.capacity = capacity
        self.iterations: list[dict[str, Any]] = []
        self.evicted = 0
        self.garble_next = 0
        self.garbled = 0
        self._iter = 0

    def bind(self, server: FakeEngine) -> None:
        super().bind(server)
        self._lock = server.lock

    def routes(self, app: web.Application, prometheus: Any) -> None:
        app.router.add_get("/metrics", self._iteration_stats)
        if self.serves_prometheus:
            app.router.add_get(PROMETHEUS_PATH, prometheus)

    async def _iteration_stats(self, request: web.Request) -> web.Response:
        self.server.record(request)
        with self._lock:
            drained, self.iterations = self.iterations, []
            if self.garble_next:
                self.garble_next -= 1
                self.garbled += 1
                return web.Response(text="<html>busy</html>", content_type="text/html")
        return web.json_response(drained)

    def on_step(self, accepted: int, drafted: int) -> None:
        self.record_iteration(accepted, drafted)

    def record_iteration(self, accepted: int, drafted: int | None = None) -> None:
        """One iteration (a decode step of one request) in the JSON list, K drafted unless `drafted` says."""
        drafted = self.server.k if drafted is None else drafted
        with self._lock:
            self._iter += 1
            self.iterations.append({
                "iter": self._iter, "iterLatencyMS": 3.0, "numActiveRequests": self.server.running(),
                "numQueuedRequests": 0, "numCompletedRequests": 0,
                "specDecodingStats": {"numDraftTokens": drafted, "numAcceptedTokens": accepted,
                                      "numRequestsWithDraftTokens": 1 if drafted else 0,
                                      "acceptanceLength": 1.0 + accepted, "iterLatencyMS": 1.0,
                                      "draftOverhead": 0.3},
            })
            if self.capacity is not None and len(self.iterations) > self.capacity:
                self.evicted += len(self.iterations) - self.capacity
                del self.iterations[:-self.capacity]

    def render(self, replicas: list[Counters], created: float, hide: Hide) -> str:
        (c,) = replicas
        base = {"engine_type": "trtllm", "model_name": self.server.model}
        x = Exposition(created)
        if hide is None:
            x.counter(DRAFT_TOKENS, "Number of draft tokens.", [(base, c.draft_tokens)])
            x.counter(ACCEPTED, "Number of accepted draft tokens.", [(base, c.accepted)])
        if self.per_position and hide != "all":
            x.counter(DRAFTED_PER_POS, "Drafted tokens per position.",
                      [({**base, "token_position": str(i)}, n) for i, n in enumerate(c.draft_per_pos)])
            x.counter(ACCEPTED_PER_POS, "Accepted tokens per position.",
                      [({**base, "token_position": str(i)}, n) for i, n in enumerate(c.accepted_per_pos)])
        x.counter(REQUEST_SUCCESS, "Finished requests.",
                  [({**base, "finished_reason": r}, c.success[r]) for r in FINISH_REASONS])
        x.counter(GENERATION_TOKENS, "Generated tokens.", [(base, c.generation_tokens)])
        x.gauge(RUNNING, "Requests running.", [(base, c.running)])
        return x.text()

    def sd_payload(self, told: dict[str, Any], body: dict[str, Any], output_tokens: int
                   ) -> tuple[list[dict[str, Any]], dict[str, Any]]:
        return [], {}  # released builds put no SD numbers in responses
