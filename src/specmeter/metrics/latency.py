"""Latency and throughput of one load level, from per-request records (warmup excluded)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from pydantic import BaseModel, Field

from specmeter.load.records import RequestRecord
from specmeter.metrics.stats import Distribution, summarize


class LatencySummary(BaseModel):
    """Numbers a serving engineer reads first. Times in seconds."""

    num_requests: int
    num_ok: int
    errors_by_kind: dict[str, int] = Field(default_factory=dict)
    wall_s: float
    output_tokens: int
    prompt_tokens: int
    output_tokens_per_s: float | None = Field(description="Sum of output tokens / wall time of the level.")
    requests_per_s: float | None
    ttft_s: Distribution
    tpot_s: Distribution = Field(description="Per request: (E2E - TTFT) / (output tokens - 1).")
    inter_chunk_s: Distribution = Field(description="Gaps between streamed chunks (a chunk may hold many tokens).")
    itl_per_token_s: Distribution = Field(description="Each chunk gap / tokens in that chunk.")
    e2e_s: Distribution
    queued_s: Distribution = Field(description="Client-side wait for a slot: not server latency.")
    tokens_per_chunk: float | None = Field(description="Mean output tokens per streamed chunk.")


def summarize_latency(records: Sequence[RequestRecord], wall_s: float) -> LatencySummary:
    measured = [r for r in records if not r.warmup]
    ok = [r for r in measured if r.ok]
    out_tokens = sum(r.output_tokens or 0 for r in ok)
    prompt_tokens = sum(r.prompt_tokens or 0 for r in ok)
    gaps: list[float] = []
    itl: list[float] = []
    chunk_tok = chunks = 0
    for r in ok:
        gaps.extend(r.inter_chunk_gaps())
        itl.extend(r.per_token_itl())
        if r.chunk_tokens is not None:
            chunk_tok += sum(r.chunk_tokens)
            chunks += len(r.chunk_tokens)
    return LatencySummary(
        num_requests=len(measured),
        num_ok=len(ok),
        errors_by_kind=dict(Counter(r.error_kind for r in measured if r.error_kind)),
        wall_s=wall_s,
        output_tokens=out_tokens,
        prompt_tokens=prompt_tokens,
        output_tokens_per_s=out_tokens / wall_s if wall_s > 0 else None,
        requests_per_s=len(ok) / wall_s if wall_s > 0 else None,
        ttft_s=summarize([r.ttft_s for r in ok if r.ttft_s is not None]),
        tpot_s=summarize([t for r in ok if (t := r.tpot_s) is not None]),
        inter_chunk_s=summarize(gaps, ci=False),
        itl_per_token_s=summarize(itl, ci=False),
        e2e_s=summarize([r.e2e_s for r in ok if r.e2e_s is not None]),
        queued_s=summarize([r.queued_s for r in measured], ci=False),
        tokens_per_chunk=chunk_tok / chunks if chunks else None,
    )
