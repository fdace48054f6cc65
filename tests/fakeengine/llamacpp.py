"""llama.cpp's llama-server (--metrics): unlabelled counters without `_created` twins, a `Server: llama.cpp`
header, one token per streamed chunk, the finish_reason in a chunk of its own, and per-request `timings`
(draft_n and draft_n_accepted, left out when nothing was drafted) in the usage chunk. It closes the
connection after every streamed answer (tests/fixtures/llamacpp was captured from such a server)."""

from __future__ import annotations

from typing import Any

from fakeengine.counters import Counters, Exposition
from fakeengine.personality import Hide, Personality

PROMPT_TOKENS = "llamacpp:prompt_tokens"
TOKENS_PREDICTED = "llamacpp:tokens_predicted"
DRAFT_TOKENS = "llamacpp:spec_decode_num_draft_tokens"
ACCEPTED = "llamacpp:spec_decode_num_accepted_tokens"
DRAFTS = "llamacpp:spec_decode_num_drafts"
ACCEPTED_PER_POS = "llamacpp:spec_decode_num_accepted_tokens_per_pos"
PROCESSING = "llamacpp:requests_processing"


class LlamaCpp(Personality):
    name = "llamacpp"
    owned_by = "llamacpp"
    server_header = "llama.cpp"
    no_draft_prob = 0.1
    one_token_per_chunk = True
    finish_apart = True
    role_content = None
    close_after_stream = True
    created_twins = False

    def render(self, replicas: list[Counters], created: float, hide: Hide) -> str:
        (c,) = replicas
        x = Exposition(None)
        x.counter(PROMPT_TOKENS, "Number of prompt tokens processed, excluding cached tokens", [({}, c.prompt_tokens)])
        x.counter(TOKENS_PREDICTED, "Number of generation tokens processed", [({}, c.generation_tokens)])
        if hide is None:
            x.counter(DRAFT_TOKENS, "Speculative: Total draft tokens generated", [({}, c.draft_tokens)])
            x.counter(ACCEPTED, "Speculative: Total draft tokens accepted by the target model", [({}, c.accepted)])
            x.counter(DRAFTS, "Speculative: Total speculative decoding verification steps", [({}, c.drafts)])
        x.gauge(PROCESSING, "Number of requests processing", [({}, c.running)])
        if hide != "all":
            x.counter(ACCEPTED_PER_POS, "Accepted tokens per draft position",
                      [({"position": str(i)}, n) for i, n in enumerate(c.accepted_per_pos)])
        return x.text()

    def sd_payload(self, told: dict[str, Any], body: dict[str, Any], output_tokens: int
                   ) -> tuple[list[dict[str, Any]], dict[str, Any]]:
        timings: dict[str, Any] = {"predicted_n": output_tokens}
        if told["num_draft_tokens"]:
            timings["draft_n"] = told["num_draft_tokens"]
            timings["draft_n_accepted"] = told["num_accepted_draft_tokens"]
        return [], {"timings": timings}
