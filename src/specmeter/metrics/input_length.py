"""Acceptance per input-length bucket, read as acceptance per category is (metrics/categories.py): from the
per-request SD stats, each bucket's AL step-weighted with its bootstrap interval, its AR and per-position rates.

A drafter's guesses land differently on a long context than on a short one (more text to copy from for n-gram
and suffix drafters, a longer context for a draft model to track), and a production trace mixes lengths, so the
trace's answer can hide a bucket where acceptance falls. The length is the prompt as the engine counted it (its
usage's prompt_tokens, chat template included): what it prefilled, for any point, whatever made the prompt. The
edges are fixed powers of two, not quantiles of the run, so two runs' (two drafters') buckets are the same
lengths and a bucket's rows compare across runs.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence

from specmeter.metrics.categories import acceptance_row
from specmeter.schemas.metrics import LengthBreakdown, LengthBucket
from specmeter.schemas.records import RequestRecord
from specmeter.schemas.sd import SDCounts

# Each bucket's largest length: <= 256, 257-512, ..., 8193-16384, then > 16384 tokens.
LENGTH_EDGES = (256, 512, 1024, 2048, 4096, 8192, 16384)


def bucket_of(tokens: int) -> tuple[int, int | None]:
    """The bucket a prompt of `tokens` falls in: its smallest and largest length (None: no upper edge)."""
    i = bisect.bisect_left(LENGTH_EDGES, tokens)
    low = 0 if i == 0 else LENGTH_EDGES[i - 1] + 1
    return low, LENGTH_EDGES[i] if i < len(LENGTH_EDGES) else None


def bucket_label(low: int, high: int | None) -> str:
    """'<= 256', '257-512', '> 16384': prompt tokens."""
    if low == 0:
        return f"<= {high}"
    return f"> {low - 1}" if high is None else f"{low}-{high}"


def length_breakdown(records: Sequence[RequestRecord]) -> LengthBreakdown | None:
    """None when no measured request carries per-request SD stats (as category_breakdown)."""
    by_bucket: dict[tuple[int, int | None], list[SDCounts]] = {}
    unknown = 0
    for r in records:
        if r.warmup or r.sd is None:
            continue
        if r.prompt_tokens is None:
            unknown += 1
            continue
        by_bucket.setdefault(bucket_of(r.prompt_tokens), []).append(r.sd)
    if not by_bucket and not unknown:
        return None
    buckets = [LengthBucket(low=low, high=high, acceptance=acceptance_row(bucket_label(low, high), items))
               for (low, high), items in sorted(by_bucket.items(), key=lambda kv: kv[0][0])]
    return LengthBreakdown(buckets=buckets, unknown=unknown)
