"""TensorRT-LLM's JSON iteration stats (GET /metrics with `enable_iter_perf_stats: true`): the per-iteration
`specDecodingStats` (numDraftTokens, numAcceptedTokens, numRequestsWithDraftTokens, acceptanceLength), cleared
by every read, accumulated over a run into SDCounts. They hold the step count that builds without the
per-position Prometheus counters lack (trtllm.py has the facts and where they come from).
"""

from __future__ import annotations

import json
from typing import Any, TypeGuard

from specmeter.schemas.sd import SDCounts
from specmeter.telemetry.feed import IterationFeed

ITERATION_STATS_PATH = "/metrics"


def _get(d: dict[str, Any], *names: str) -> Any:
    for name in names:
        if name in d:
            return d[name]
    return None


def iteration_entries(payload: Any) -> list[dict[str, Any]]:
    """The iteration stats in one /metrics answer: a JSON list of objects (or, from old builds, of JSON
    strings); anything else in it is skipped."""
    if isinstance(payload, (str, bytes)):
        try:
            payload = json.loads(payload)
        except ValueError:
            return []
    items = payload if isinstance(payload, list) else [payload]
    out: list[dict[str, Any]] = []
    for item in items:
        if isinstance(item, str):
            try:
                item = json.loads(item)
            except ValueError:
                continue
        if isinstance(item, dict):
            out.append(item)
    return out


class IterationStats(IterationFeed):
    """Iteration stats accumulated over a run from successive /metrics reads (each read clears what it
    returns, so every read between the run's start and end must be fed here). Iterations are keyed by
    their `iter` number: a stat read twice counts once, and iteration numbers missing between the first
    seen (or the last one the `mark` read before the run showed) and the last seen are counted as
    `missing` (evicted before a read: the totals are then incomplete)."""

    path = ITERATION_STATS_PATH

    def __init__(self) -> None:
        super().__init__()
        self._by_iter: dict[int, tuple[int, int, int | None]] = {}
        self._unnumbered: list[tuple[int, int, int | None]] = []
        self._before: int | None = None  # the last iteration read before the run

    def mark(self, payload: Any) -> None:
        numbers = [it for entry in iteration_entries(payload) if _is_int(it := _get(entry, "iter", "iteration"))]
        if numbers:
            self._before = max(numbers)

    def add(self, payload: Any) -> None:
        for entry in iteration_entries(payload):
            spec = _get(entry, "specDecodingStats", "spec_decoding_stats")
            row = _spec_row(spec) if isinstance(spec, dict) else (0, 0, 0)
            it = _get(entry, "iter", "iteration")
            if _is_int(it):
                self._by_iter[it] = row
            else:
                self._unnumbered.append(row)

    @property
    def missing(self) -> int:
        if not self._by_iter:
            return 0
        first = min(self._by_iter)
        if self._before is not None and first > self._before:  # (lower numbers: the server restarted)
            first = self._before + 1
        return max(self._by_iter) - first + 1 - len(self._by_iter)

    @property
    def missed(self) -> int:
        return self.missing

    def counts(self) -> SDCounts | None:
        """Run totals as SDCounts (steps = requests that had draft tokens, summed over iterations; None
        when a build gives neither that count nor an acceptance length to recover it from)."""
        rows = [*self._by_iter.values(), *self._unnumbered]
        if not rows:
            return None
        drafted = sum(r[0] for r in rows)
        accepted = sum(r[1] for r in rows)
        steps: int | None = 0
        for r in rows:
            steps = None if steps is None or r[2] is None else steps + r[2]
        if accepted > drafted:
            return None
        return SDCounts(source="counters", num_steps=steps, num_draft_tokens=drafted, num_accepted_tokens=accepted)


def _is_int(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def _spec_row(spec: dict[str, Any]) -> tuple[int, int, int | None]:
    """(drafted, accepted, steps) of one iteration's specDecodingStats (camelCase or snake_case)."""
    def num(*names: str) -> float | None:
        value = _get(spec, *names)
        return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None

    drafted = num("numDraftTokens", "num_draft_tokens") or 0.0
    accepted = num("numAcceptedTokens", "num_accepted_tokens") or 0.0
    if drafted <= 0:
        return 0, 0, 0  # an iteration that drafted nothing has no speculative step
    requests = num("numRequestsWithDraftTokens", "num_requests_with_draft_tokens")
    if requests is None:
        # acceptanceLength = (accepted + requests) / requests, so requests = accepted / (AL - 1)
        al = num("acceptanceLength", "acceptance_length")
        if al is not None and al > 1.0 and accepted > 0:
            requests = accepted / (al - 1.0)
            if abs(requests - round(requests)) > 1e-3:
                return round(drafted), round(accepted), None
    return round(drafted), round(accepted), None if requests is None else round(requests)

