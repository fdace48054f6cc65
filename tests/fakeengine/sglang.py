"""SGLang: one counter of speculative steps (verify calls) and no token counters, windowed gauges, and the
per-request `sglext.spec_tokens_details` (asked for with `return_spec_tokens_details`) in a chunk of its own
before the usage chunk; the finish_reason comes in a chunk of its own, every chunk says `"usage": null`."""

from __future__ import annotations

from typing import Any, ClassVar

from fakeengine.counters import Counters, Exposition
from fakeengine.personality import Hide, Personality

VERIFY_CALLS = "sglang:spec_verify_calls"
GENERATION_TOKENS = "sglang:generation_tokens"
PROMPT_TOKENS = "sglang:prompt_tokens"
REQUESTS = "sglang:num_requests"
RUNNING = "sglang:num_running_reqs"
ACCEPT_LENGTH = "sglang:spec_accept_length"  # windowed in SGLang: never to be differenced
REQUEST_FLAG = "return_spec_tokens_details"


class SGLang(Personality):
    name = "sglang"
    owned_by = "sglang"
    finish_apart = True
    null_usage = True
    choice_extra: ClassVar[dict[str, Any]] = {"matched_stop": None}

    def render(self, replicas: list[Counters], created: float, hide: Hide) -> str:
        (c,) = replicas
        model = {"model_name": self.server.model}
        rank = {**model, "tp_rank": "0"}
        x = Exposition(created)
        if hide is None:
            x.counter(VERIFY_CALLS, "The number of speculative verify calls.", [(model, c.drafts)])
        x.counter(GENERATION_TOKENS, "Number of generation tokens processed.", [(model, c.generation_tokens)])
        x.counter(PROMPT_TOKENS, "Number of prefill tokens processed.", [(model, c.prompt_tokens)])
        x.counter(REQUESTS, "Number of requests processed.", [(model, c.finished)])
        x.gauge(RUNNING, "The number of running requests.", [(rank, c.running)])
        accept_length = 1.0 + c.accepted / c.drafts if c.drafts else 0.0
        x.gauge(ACCEPT_LENGTH, "The average acceptance length of speculative decoding.", [(rank, accept_length)])
        return x.text()

    def sd_payload(self, told: dict[str, Any], body: dict[str, Any], output_tokens: int
                   ) -> tuple[list[dict[str, Any]], dict[str, Any]]:
        if not body.get(REQUEST_FLAG):
            return [], {}
        steps, accepted, drafted = told["num_spec_steps"], told["num_accepted_draft_tokens"], told["num_draft_tokens"]
        details = {
            "spec_accept_rate": accepted / drafted if drafted else 0.0,
            "spec_accept_length": output_tokens / steps if steps else 0.0,  # completion tokens per verify call
            "spec_cap_length": 0.0, "spec_block_accept_length": 0.0,
            "spec_num_correct_drafts": accepted, "spec_num_proposed_drafts": drafted,
            "spec_verify_ct": steps, "spec_correct_drafts_histogram": told["acceptance_histogram"],
            "spec_cap_lens_histogram": [],
        }
        sglext = {"routed_experts": None, "cached_tokens_details": None, "spec_tokens_details": details}
        return [{"sglext": sglext}], {}
