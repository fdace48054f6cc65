"""Prometheus /metrics snapshots: parsed by exact sample name, summed over engine labels, differenced.

Counters come with `_created` twins holding Unix timestamps; matching names exactly (never by
substring) keeps those out. A counter that went down between snapshots means the server restarted:
that is reported as a reason, never turned into a negative or silently partial delta.
"""

from __future__ import annotations

import math
from collections import defaultdict

from prometheus_client.parser import text_string_to_metric_families
from pydantic import BaseModel, Field

from specmeter.common.errors import EngineError

# Labels that identify replicas of one logical series (vLLM: one `engine` label per DP rank).
REPLICA_LABELS = frozenset({"engine", "dp_rank", "rank", "pid"})


def series_key(labels: dict[str, str]) -> str:
    """Canonical key of a series after dropping replica labels: 'position=0' or ''."""
    kept = sorted((k, v) for k, v in labels.items() if k not in REPLICA_LABELS and k != "model_name")
    return ",".join(f"{k}={v}" for k, v in kept)


class Snapshot(BaseModel):
    """Sample values keyed by exact sample name, then by series key (replicas summed)."""

    taken_at: float = Field(description="Monotonic clock when the scrape finished.")
    samples: dict[str, dict[str, float]] = Field(default_factory=dict)

    def value(self, name: str, key: str = "") -> float | None:
        return self.samples.get(name, {}).get(key)

    def series(self, name: str) -> dict[str, float]:
        return dict(self.samples.get(name, {}))

    def has(self, name: str) -> bool:
        return name in self.samples


def parse_exposition(text: str, taken_at: float = 0.0) -> Snapshot:
    """Parse Prometheus text exposition into a Snapshot; raise EngineError on malformed text."""
    acc: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    try:
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                value = float(sample.value)
                if math.isnan(value):
                    continue
                acc[sample.name][series_key(dict(sample.labels))] += value
    except Exception as exc:  # the parser raises ValueError/TypeError/IndexError on garbage
        first = text.strip().splitlines()[0][:80] if text.strip() else "<empty>"
        detail = " ".join(str(exc).split())  # keep the error on one line
        raise EngineError(
            f"/metrics returned text that is not Prometheus exposition ({type(exc).__name__}: {detail}); "
            f"first line: {first!r}; check that --endpoint points at the engine's server"
        ) from exc
    return Snapshot(taken_at=taken_at, samples={k: dict(v) for k, v in acc.items()})


class CounterDelta(BaseModel):
    """after - before for a set of counters; `invalid_reason` set when the delta cannot be trusted."""

    values: dict[str, dict[str, float]] = Field(default_factory=dict)
    missing: list[str] = Field(default_factory=list)
    invalid_reason: str | None = None
    impossible: bool = Field(default=False, description="Invalid because a counter is not a finite number (a server "
                             "that lies), not because the server restarted.")

    @property
    def valid(self) -> bool:
        return self.invalid_reason is None

    def value(self, name: str, key: str = "") -> float:
        return self.values.get(name, {}).get(key, 0.0)

    def series(self, name: str) -> dict[str, float]:
        return dict(self.values.get(name, {}))


def counter_delta(before: Snapshot, after: Snapshot, names: list[str]) -> CounterDelta:
    """Difference named counters; series new in `after` count from zero (vLLM creates lazily)."""
    out = CounterDelta()
    decreased: list[str] = []
    unreal: list[str] = []  # +Inf or -Inf: no count
    restarted = _restarted_series(before, after, names)
    for name in names:
        if not after.has(name):
            out.missing.append(name)
            continue
        b = before.series(name)
        series: dict[str, float] = {}
        for key, value in after.series(name).items():
            if not (math.isfinite(value) and math.isfinite(b.get(key, 0.0))):
                unreal.append(f"{name}{{{key}}}" if key else name)
                continue
            d = value - b.get(key, 0.0)
            if d < 0:
                decreased.append(f"{name}{{{key}}}" if key else name)
            series[key] = d
        for key in b:
            if key not in series:
                decreased.append(f"{name}{{{key}}} (series vanished)")
        out.values[name] = series
    if unreal:
        out.invalid_reason = "counters are not finite numbers (the server reports Inf): " + ", ".join(unreal[:4])
        out.impossible = True
    elif decreased:
        out.invalid_reason = (
            "counters went down between snapshots (the server restarted during the run): "
            + ", ".join(decreased[:4])
        )
    elif restarted:
        out.invalid_reason = (
            "counters were re-created between snapshots (their _created time changed: the server restarted "
            "during the run): " + ", ".join(restarted[:4])
        )
    return out


def _restarted_series(before: Snapshot, after: Snapshot, names: list[str]) -> list[str]:
    """Counters whose `_created` twin changed: a restart even when later traffic hid the drop.

    Replicas are summed per series, so a changed sum of creation times is a changed member."""
    out: list[str] = []
    for name in names:
        if not name.endswith("_total"):
            continue
        created = name[: -len("_total")] + "_created"
        b, a = before.series(created), after.series(created)
        for key, value in a.items():
            if key in b and value != b[key]:
                out.append(f"{name}{{{key}}}" if key else name)
    return out


def gauge_sum(text: str, name: str) -> float | None:
    """Sum of one metric's samples over all its series, by exact name, without parsing the whole page:
    cheap enough to poll during a point without disturbing the client's timing. None when absent."""
    total, found = 0.0, False
    plain, labelled = name + " ", name + "{"
    for line in text.splitlines():
        if line.startswith(plain) or line.startswith(labelled):
            try:
                value = float(line.rsplit(" ", 1)[1])
            except (IndexError, ValueError):
                continue
            if not math.isfinite(value):  # NaN or Inf: no batch size (and no valid JSON in the capture)
                continue
            total += value
            found = True
    return total if found else None


def position_list(series: dict[str, float]) -> list[int]:
    """{'position=0': 5, 'position=1': 3} -> [5, 3] (missing positions count as 0)."""
    by_pos: dict[int, float] = {}
    for key, value in series.items():
        for part in key.split(","):
            name, _, raw = part.partition("=")
            if name == "position" and raw.isdigit():
                by_pos[int(raw)] = by_pos.get(int(raw), 0.0) + value
    if not by_pos:
        return []
    return [round(by_pos.get(i, 0.0)) for i in range(max(by_pos) + 1)]
