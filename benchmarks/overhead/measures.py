"""What benchmarks/client_overhead.py measures: load points, a tool's per-request records, the runs of a tool at
a point, and the row they add up to (marginal CPU per chunk, sustained chunks/s, errors against the server's log)."""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Literal


@dataclass(frozen=True)
class Point:
    """One load point. Rows of the same `label` are compared with specmeter's (ratios); an open point at a
    fraction of each tool's own capacity has one label and a rate per tool."""

    kind: Literal["closed", "capacity", "open", "trace"]
    requests: int  # N: the point runs N, then 2N requests
    gap_s: float
    ttft_s: float
    concurrency: int | None = None
    rate: float | None = None  # a trace: its peak rate
    group: str | None = None
    schedule: tuple[float, ...] = field(default=(), repr=False)  # a trace: 2N send offsets, s (N runs the first N)

    @property
    def label(self) -> str:
        if self.group:
            return self.group
        if self.kind == "open":
            return f"open {self.rate:g}/s"
        return f"{'capacity ' if self.kind == 'capacity' else ''}c{self.concurrency}"


@dataclass
class Measured:
    """One request as the tool reported it. key: how to find it in the server's log."""

    key: tuple[str, str | int]  # ("rid", x-request-id) | ("marker", N of req-N) | ("seq", server seq)
    ok: bool
    ttft_s: float | None
    gaps_s: list[float] | None = None  # per chunk, when the tool keeps them
    mean_gap_s: float | None = None  # otherwise its per-request mean

    def mean_gap(self) -> float | None:
        if self.gaps_s:
            return sum(self.gaps_s) / len(self.gaps_s)
        return self.mean_gap_s


@dataclass
class Run:
    """One tool process at one point with one request count."""

    requests: int
    cpu_s: float
    wall_s: float
    chunks: int  # content chunks the server wrote
    span_s: float  # first request byte in to last chunk out, at the server
    sustained_cps: float  # chunks/s the server wrote over the middle 80% of the run's chunks (no ramp, no drain)
    served: int  # streamed requests in the server's log
    failed: int  # the tool's failed requests, plus streams the server saw cut
    matched: int  # tool records found in the server's log
    server_cpu_s: float = 0.0  # the paced server's own CPU during the run (is it the bottleneck?)
    ttft_err: list[float] = field(default_factory=list)
    gap_err: list[float] = field(default_factory=list)
    mean_gap_err: list[float] = field(default_factory=list)
    send_lag: list[float] = field(default_factory=list)


@dataclass
class Row:
    tool: str
    point: str
    requests: int
    rate: float | None = None  # open loop: requests/s asked for
    error: str | None = None
    cpu_us_per_chunk: float | None = None
    fixed_cpu_s: float | None = None  # start-up and teardown: cpu_N - N's chunks x the marginal cost
    chunks_per_s: float | None = None
    cpu_ratio: float | None = None
    chunks_ratio: float | None = None
    server_busy: float | None = None  # server CPU / span, marginal: near 1.0 the server, not the tool, limits
    ttft_err_ms: dict[str, float] | None = None
    gap_err_ms: dict[str, float] | None = None
    gap_err_kind: str | None = None  # "per chunk" or "per-request mean"
    mean_gap_err_ms: dict[str, float] | None = None
    send_lag_ms: dict[str, float] | None = None
    failed: int = 0
    runs: list[dict[str, Any]] = field(default_factory=list)


def percentile(xs: Sequence[float], q: float) -> float:
    """Nearest-rank percentile (q in [0, 1]); xs non-empty."""
    s = sorted(xs)
    return s[min(len(s) - 1, max(0, math.ceil(q * len(s)) - 1))]


def stats_ms(xs: Sequence[float], qs: Iterable[tuple[str, float]] = (("p99", 0.99),)) -> dict[str, float] | None:
    if not xs:
        return None
    out = {"mean": 1e3 * sum(xs) / len(xs)}
    out.update({name: 1e3 * percentile(xs, q) for name, q in qs})
    out["n"] = len(xs)
    return out


def send_lags(arrivals: Sequence[float], rate: float) -> list[float]:
    """Lateness of each arrival against a fixed-interval schedule (request i due i/rate after the start).
    The start is unknown to the server, so the schedule is anchored where it fits best: the least lateness
    is 0. Arrivals are taken in order (every tool sends its requests in order)."""
    return schedule_lags(arrivals, [i / rate for i in range(len(arrivals))])


def schedule_lags(arrivals: Sequence[float], schedule: Sequence[float]) -> list[float]:
    """Lateness of each arrival against any schedule (offsets from its start, in order), anchored as send_lags
    anchors a fixed interval's: the least lateness is 0. The k-th arrival is the k-th send."""
    late = [t - due for t, due in zip(sorted(arrivals), sorted(schedule))]
    base = min(late, default=0.0)
    return [x - base for x in late]


def peak_rate(arrivals: Sequence[float], window_s: float = 1.0) -> float:
    """Requests a second in the busiest `window_s` of a schedule (a window opening at an arrival)."""
    ts = sorted(arrivals)
    most, j = 0, 0
    for i, t in enumerate(ts):
        while j < len(ts) and ts[j] < t + window_s:
            j += 1
        most = max(most, j - i)
    return most / window_s


def trace_schedule(arrivals: Sequence[float], count: int, peak: float) -> tuple[float, ...]:
    """`count` send offsets from a trace's arrivals, sped up (or slowed) so its busiest second (on the trace's own
    clock, a shorter stretch once sped up) offers `peak` requests a second: the trace's own burstiness at a rate
    the bench chose. A trace shorter than `count` is replayed again after itself (its span and one mean gap later),
    as often as it takes."""
    ts = sorted(arrivals)
    factor = peak / peak_rate(ts)
    span = ts[-1] - ts[0]
    period = span + (span / (len(ts) - 1) if len(ts) > 1 else 1.0)
    return tuple(((ts[i % len(ts)] - ts[0]) + (i // len(ts)) * period) / factor for i in range(count))


def compare(log: list[dict[str, Any]], records: list[Measured]) -> tuple[list[float], list[float], list[float], int]:
    """(TTFT errors, per-gap errors, per-request mean-gap errors, matched) of the tool's records against
    the server's log. Duplicate keys (a warm-up request) resolve to the latest entry."""
    index: dict[tuple[str, str | int], dict[str, Any]] = {}
    for e in log:
        index[("seq", e["seq"])] = e
        if e.get("rid") is not None:
            index[("rid", e["rid"])] = e
        if e.get("marker") is not None:
            index[("marker", e["marker"])] = e
    ttft_err: list[float] = []
    gap_err: list[float] = []
    mean_gap_err: list[float] = []
    matched = 0
    for m in records:
        truth = index.get(m.key)
        if truth is None or not m.ok or not truth["sends"]:
            continue
        matched += 1
        sends: list[float] = truth["sends"]
        if m.ttft_s is not None:
            ttft_err.append(abs(m.ttft_s - (sends[0] - truth["arrival"])))
        true_gaps = [b - a for a, b in itertools.pairwise(sends)]
        if m.gaps_s is not None and len(m.gaps_s) == len(true_gaps):
            gap_err.extend(abs(a - b) for a, b in zip(m.gaps_s, true_gaps))
        mg = m.mean_gap()
        if mg is not None and true_gaps:
            mean_gap_err.append(abs(mg - sum(true_gaps) / len(true_gaps)))
    return ttft_err, gap_err, mean_gap_err, matched


def sustained_rate(sends: Sequence[float], trim: float = 0.1) -> float:
    """Chunks/s over the middle of a run: from the chunk `trim` of the way in to the one `trim` from the end."""
    ts = sorted(sends)
    lo, hi = int(trim * len(ts)), int((1 - trim) * len(ts)) - 1
    return (hi - lo) / (ts[hi] - ts[lo]) if hi > lo and ts[hi] > ts[lo] else 0.0


def fit_line(xs: Sequence[float], ys: Sequence[float]) -> tuple[float, float] | None:
    """Least-squares (intercept, slope); None when the xs do not vary. With two points: the marginal."""
    n = len(xs)
    mx, my = sum(xs) / n, sum(ys) / n
    var = sum((x - mx) ** 2 for x in xs)
    if var == 0:
        return None
    b = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / var
    return my - b * mx, b


def summarize(tool: str, point: Point, runs: Sequence[Run]) -> Row:
    """Runs of N and 2N requests (maybe repeated): CPU per chunk is the slope of the tool's CPU over the chunks
    the server wrote, so start-up, which every run pays once, is the intercept and cancels."""
    row = Row(tool=tool, point=point.label, requests=point.requests, rate=point.rate,
              runs=[{k: v for k, v in asdict(r).items() if not isinstance(v, list)} for r in runs])
    chunks = [float(r.chunks) for r in runs]
    cpu = fit_line(chunks, [r.cpu_s for r in runs])
    if cpu is not None:
        row.fixed_cpu_s, per_chunk = cpu
        row.cpu_us_per_chunk = 1e6 * per_chunk
    largest = [r.sustained_cps for r in runs if r.chunks == max(chunks) and r.sustained_cps > 0]
    if largest:
        row.chunks_per_s = sorted(largest)[len(largest) // 2]
    server = fit_line(chunks, [r.server_cpu_s for r in runs])
    if server is not None and row.chunks_per_s:
        row.server_busy = server[1] * row.chunks_per_s
    row.ttft_err_ms = stats_ms([x for r in runs for x in r.ttft_err])
    mean_gaps = [x for r in runs for x in r.mean_gap_err]
    row.mean_gap_err_ms = stats_ms(mean_gaps)
    gaps = [x for r in runs for x in r.gap_err]
    if gaps:
        row.gap_err_ms, row.gap_err_kind = stats_ms(gaps), "per chunk"
    elif mean_gaps:
        row.gap_err_ms, row.gap_err_kind = row.mean_gap_err_ms, "per-request mean"
    row.send_lag_ms = stats_ms([x for r in runs for x in r.send_lag], (("p50", 0.5), ("p99", 0.99)))
    row.failed = sum(r.failed for r in runs)
    return row

