"""Pooling SD records. The record itself (and the AL/AR/a_i/c_i math on it)
is `specmeter.schemas.sd.SDCounts`. Definitions: shared/REFERENCE.md section 1.
"""

from __future__ import annotations

from collections.abc import Iterable

from specmeter.schemas.sd import SDCounts, Source


def _add_lists(a: list[int] | None, b: list[int] | None) -> list[int] | None:
    if a is None or b is None:
        return None
    n = max(len(a), len(b))
    return [(a[i] if i < len(a) else 0) + (b[i] if i < len(b) else 0) for i in range(n)]


def sum_counts(items: Iterable[SDCounts], source: Source = "per_request") -> SDCounts:
    """Pool counts over steps (the step-weighted aggregate). Optional lists stay None if any is, and so
    does the step count: a sum over requests of which one has no step count has none. Counts of tree drafts
    pool as tree drafts."""
    steps: int | None = 0
    drafted = accepted = 0
    per_pos: list[int] | None = []
    drafted_pos: list[int] | None = []
    hist: list[int] | None = []
    tree = False
    for it in items:
        tree = tree or it.tree
        steps = None if steps is None or it.num_steps is None else steps + it.num_steps
        drafted += it.num_draft_tokens
        accepted += it.num_accepted_tokens
        per_pos = _add_lists(per_pos, it.accepted_per_pos)
        drafted_pos = _add_lists(drafted_pos, it.drafted_per_pos)
        hist = _add_lists(hist, it.histogram)
    return SDCounts(
        source=source,
        num_steps=steps,
        num_draft_tokens=drafted,
        num_accepted_tokens=accepted,
        accepted_per_pos=per_pos or [],
        drafted_per_pos=drafted_pos if drafted_pos else None,
        histogram=hist if hist else None,
        tree=tree,
    )
