"""Pooling SD records, and the iid-acceptance
expectations used as ground truth in tests. The record itself (and the AL/AR/a_i/c_i math on it)
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


def expected_acceptance_length(alpha: float, k: int) -> float:
    """Expected AL for iid per-token acceptance alpha and draft length k (Leviathan et al., eq. 1)."""
    if alpha == 1.0:
        return float(k + 1)
    return (1.0 - alpha ** (k + 1)) / (1.0 - alpha)


def expected_speedup(alpha: float, k: int, cost_ratio: float) -> float:
    """Expected walltime speedup in the memory-bound regime; cost_ratio = draft step / target step."""
    return expected_acceptance_length(alpha, k) / (k * cost_ratio + 1.0)
