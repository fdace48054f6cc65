"""The per-request record: what one request did, as measured by the client and told by the server.

Written to requests.jsonl as each request finishes, raw as the client saw it; every latency metric is derived
from it, and the per-request SD stats are parsed from its final payload when records are summarized.
"""

from __future__ import annotations

import itertools
from typing import Any, Literal

from pydantic import BaseModel, Field, computed_field

from specmeter.schemas.sd import SDCounts

ErrorKind = Literal[
    "timeout", "http_429", "http_4xx", "http_5xx", "connection", "malformed", "incomplete_stream",
    "stream_error", "cancelled", "wrong_model",
]


class RequestRecord(BaseModel):
    """Keyed by (config_id, point_id, repeat, conversation_id, turn, warmup): ids from the stored plan."""

    config_id: str = Field(description="The plan configuration that served it.")
    point_id: str = Field(description="The load point it was sent at.")
    repeat: int = Field(default=0, ge=0, description="Which repeat of the point.")
    conversation_id: str
    turn: int = 0
    category: str = "default"
    phase: str | None = Field(default=None, description="Its phase of a phase-shift workload (None: none).")
    warmup: bool = False
    ok: bool = False
    error_kind: ErrorKind | None = None
    error: str | None = None
    http_status: int | None = None

    queued_s: float = Field(default=0.0, description="Client-side wait for a concurrency slot (not server time).")
    scheduled_s: float | None = Field(default=None, description="Open loop: when the arrival process "
                                      "scheduled this send, seconds since the point started.")
    start_s: float = Field(default=0.0, description="Send time, seconds since the point started (monotonic).")
    ttft_s: float | None = None
    e2e_s: float | None = None
    chunk_offsets_s: list[float] = Field(
        default_factory=list, description="Arrival of each content chunk, seconds after send."
    )
    chunk_tokens: list[int] | None = Field(
        default=None, description="Tokens carried by each content chunk (from continuous usage), if known."
    )
    prompt_tokens: int | None = None
    output_tokens: int | None = Field(default=None, description="From the server's usage, never chunk counts.")
    finish_reason: str | None = None
    output_text: str = ""
    output_token_ids: list[int] | None = Field(default=None, description="Generated token ids, when the "
                                               "engine returns them (the lossless check compares these).")
    attempt: int = Field(default=0, ge=0, description="Which attempt at the point sent it (0; a resume adds one): "
                         "its times count from that attempt's start (captures/ holds each attempt's clock).")
    replica: str | None = Field(default=None, description="Attached to several replicas: the base URL of the one "
                                "that served it (None: one server).")
    final_payload: dict[str, Any] | None = Field(default=None, description="The stream's closing metadata (usage "
                                                 "and the engine's own per-request fields), as the server sent it.")
    # Parsed from final_payload by the engine's stats when records are summarized (metrics/requests.py); a run
    # written by specmeter 0.1.0 stored them here instead of final_payload.
    sd: SDCounts | None = None
    sd_raw: dict[str, Any] | None = None

    @property
    def key(self) -> tuple[str, str, int, str, int, bool]:
        """Identity in requests.jsonl: a resumed point re-sends a request under the same key."""
        return (self.config_id, self.point_id, self.repeat, self.conversation_id, self.turn, self.warmup)

    @property
    def end_s(self) -> float | None:
        return None if self.e2e_s is None else self.start_s + self.e2e_s

    @computed_field  # type: ignore[prop-decorator]
    @property
    def tpot_s(self) -> float | None:
        """(E2E - TTFT) / (output_tokens - 1): mean time per output token after the first."""
        if self.e2e_s is None or self.ttft_s is None or not self.output_tokens or self.output_tokens < 2:
            return None
        return (self.e2e_s - self.ttft_s) / (self.output_tokens - 1)

    def inter_chunk_gaps(self) -> list[float]:
        """Gaps between consecutive content chunks. Under SD a chunk may carry several tokens."""
        o = self.chunk_offsets_s
        return [b - a for a, b in itertools.pairwise(o)]

    def per_token_itl(self) -> list[float]:
        """Each inter-chunk gap divided by the tokens its later chunk carried (needs chunk_tokens)."""
        if self.chunk_tokens is None or len(self.chunk_tokens) != len(self.chunk_offsets_s):
            return []
        out: list[float] = []
        for gap, n in zip(self.inter_chunk_gaps(), self.chunk_tokens[1:]):
            if n > 0:
                out.append(gap / n)
        return out
