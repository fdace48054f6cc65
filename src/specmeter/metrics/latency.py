"""Latency and throughput of one load point, from per-request records (warmup excluded)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from specmeter.metrics.stats import summarize
from specmeter.schemas.metrics import LatencySummary
from specmeter.schemas.records import RequestRecord


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
