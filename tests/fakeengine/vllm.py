"""vLLM (V1 engine, 0.10 to 0.32): counters per engine replica (label `engine`) with `_created` twins, and
`metrics.speculative_decoding` in the final usage chunk (--per-request-spec-decode-metrics)."""

from __future__ import annotations

from typing import Any

from fakeengine.counters import FINISH_REASONS, Counters, Exposition
from fakeengine.personality import Hide, Personality

DRAFTS = "vllm:spec_decode_num_drafts"
DRAFT_TOKENS = "vllm:spec_decode_num_draft_tokens"
ACCEPTED = "vllm:spec_decode_num_accepted_tokens"
ACCEPTED_PER_POS = "vllm:spec_decode_num_accepted_tokens_per_pos"
DRAFT_TOKENS_PER_POS = "vllm:spec_decode_num_draft_tokens_per_pos"
REQUEST_SUCCESS = "vllm:request_success"
GENERATION_TOKENS = "vllm:generation_tokens"
PROMPT_TOKENS = "vllm:prompt_tokens"
RUNNING = "vllm:num_requests_running"
E2E_LATENCY = "vllm:e2e_request_latency_seconds"


class VLLM(Personality):
    """`detailed`: per-step lists in the per-request stats (`detailed`, else `summary`); `draft_per_pos`: the
    newest builds' per-position draft counter."""

    name = "vllm"
    owned_by = "vllm"
    no_draft_prob = 0.1
    replica_label = "engine"

    def __init__(self, *, detailed: bool = True, draft_per_pos: bool = False) -> None:
        self.detailed = detailed
        self.draft_per_pos = draft_per_pos

    def render(self, replicas: list[Counters], created: float, hide: Hide) -> str:
        model = self.server.model
        x = Exposition(created)

        def labels(engine: int, **extra: str) -> dict[str, str]:
            return {"engine": str(engine), "model_name": model, **extra}

        per_engine = list(enumerate(replicas))
        positions = range(self.server.k)
        x.gauge(RUNNING, "Number of requests in model execution batches.",
                [(labels(e), c.running) for e, c in per_engine])
        x.counter(PROMPT_TOKENS, "Number of prefill tokens processed.",
                  [(labels(e), c.prompt_tokens) for e, c in per_engine])
        x.counter(GENERATION_TOKENS, "Number of generation tokens processed.",
                  [(labels(e), c.generation_tokens) for e, c in per_engine])
        x.counter(REQUEST_SUCCESS, "Count of successfully processed requests.",
                  [(labels(e, finished_reason=r), c.success[r]) for e, c in per_engine for r in FINISH_REASONS])
        if hide is None:
            x.counter(DRAFTS, "Number of spec decoding drafts.", [(labels(e), c.drafts) for e, c in per_engine])
            x.counter(DRAFT_TOKENS, "Number of draft tokens.", [(labels(e), c.draft_tokens) for e, c in per_engine])
            x.counter(ACCEPTED, "Number of accepted tokens.", [(labels(e), c.accepted) for e, c in per_engine])
        if hide != "all":
            x.counter(ACCEPTED_PER_POS, "Accepted tokens per draft position.",
                      [(labels(e, position=str(i)), c.accepted_per_pos[i]) for e, c in per_engine for i in positions])
            if self.draft_per_pos:
                x.counter(DRAFT_TOKENS_PER_POS, "Draft tokens per draft position.",
                          [(labels(e, position=str(i)), c.draft_per_pos[i]) for e, c in per_engine for i in positions])
        # a histogram, as vLLM exposes many (its _bucket/_sum/_count samples must not confuse anyone)
        x.histogram(E2E_LATENCY, "Histogram of e2e request latency in seconds.",
                    [(labels(e), c.finished, 0.01 * c.finished) for e, c in per_engine])
        return x.text()

    def sd_payload(self, told: dict[str, Any], body: dict[str, Any], output_tokens: int
                   ) -> tuple[list[dict[str, Any]], dict[str, Any]]:
        stats = dict(told)
        if not self.detailed:
            stats.pop("per_step_accepted", None)
            stats.pop("per_step_drafted", None)
        return [], {"metrics": {"speculative_decoding": stats}}
