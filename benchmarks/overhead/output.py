"""The tables: every tool against specmeter at each point, the cost of recording, and the trace case."""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from overhead.measures import Row
from overhead.tools import Specmeter, SpecmeterUnrecorded


def add_ratios(rows: list[Row]) -> None:
    base = {r.point: r for r in rows if r.tool == Specmeter.name and r.error is None}
    for r in rows:
        b = base.get(r.point)
        if b is None or r.error is not None:
            continue
        # A slope at or below 0 is start-up noise swamping too few chunks (raise --requests): no ratio.
        if r.cpu_us_per_chunk and b.cpu_us_per_chunk and r.cpu_us_per_chunk > 0 and b.cpu_us_per_chunk > 0:
            r.cpu_ratio = r.cpu_us_per_chunk / b.cpu_us_per_chunk
        if r.chunks_per_s and b.chunks_per_s:
            r.chunks_ratio = r.chunks_per_s / b.chunks_per_s


def _ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a is not None and b is not None and a > 0 and b > 0 else None


@dataclass
class RecordingCost:
    """specmeter's figures over the same run's with nothing recorded, at one point (above 1: recording costs)."""

    point: str
    rates: tuple[float, float] | None  # open loop at each tool's own capacity: (recorded, unrecorded) req/s
    cpu: float | None
    chunks_per_s: float | None
    ttft_err_mean: float | None
    ttft_err_p99: float | None
    gap_err_mean: float | None
    gap_err_p99: float | None


def recording_costs(rows: Sequence[Row]) -> list[RecordingCost]:
    ok = {(r.tool, r.point): r for r in rows if r.error is None}
    out = []
    for point in dict.fromkeys(r.point for r in rows):
        rec, bare = ok.get((Specmeter.name, point)), ok.get((SpecmeterUnrecorded.name, point))
        if rec is None or bare is None:
            continue
        t, tb = rec.ttft_err_ms or {}, bare.ttft_err_ms or {}
        g, gb = rec.gap_err_ms or {}, bare.gap_err_ms or {}
        out.append(RecordingCost(
            point, (rec.rate, bare.rate) if rec.rate and bare.rate and rec.rate != bare.rate else None,
            _ratio(rec.cpu_us_per_chunk, bare.cpu_us_per_chunk), _ratio(rec.chunks_per_s, bare.chunks_per_s),
            _ratio(t.get("mean"), tb.get("mean")), _ratio(t.get("p99"), tb.get("p99")),
            _ratio(g.get("mean"), gb.get("mean")), _ratio(g.get("p99"), gb.get("p99"))))
    return out


@dataclass
class TraceCost:
    """One tool's figures at the trace case over its own at the open loop, same run (above 1: the trace's peak
    costs that much more); send lag p99 in ms at both, since an open loop's can be 0."""

    tool: str
    point: str
    cpu: float | None
    ttft_err_p99: float | None
    gap_err_p99: float | None
    send_lag_p99_ms: tuple[float | None, float | None]
    failed: int
    # the share of a core the tool's marginal CPU took (CPU per chunk x chunks/s), trace / open: a trace sends
    # fewer chunks a second than its peak, so costs a client pays per second (progress, scrapes) weigh on each more
    core_share: tuple[float | None, float | None] = (None, None)


def trace_costs(rows: Sequence[Row]) -> list[TraceCost]:
    ok = [r for r in rows if r.error is None]
    out = []
    for r in ok:
        if not r.point.startswith("trace "):
            continue
        base = next((b for b in ok if b.tool == r.tool and b.point.startswith("open")), None)
        if base is None:
            continue

        def p99(s: dict[str, float] | None) -> float | None:
            return None if s is None else s.get("p99")

        out.append(TraceCost(r.tool, r.point, _ratio(r.cpu_us_per_chunk, base.cpu_us_per_chunk),
                             _ratio(p99(r.ttft_err_ms), p99(base.ttft_err_ms)),
                             _ratio(p99(r.gap_err_ms), p99(base.gap_err_ms)),
                             (p99(r.send_lag_ms), p99(base.send_lag_ms)), r.failed,
                             (_share(r), _share(base))))
    return out


def _share(r: Row) -> float | None:
    return None if r.cpu_us_per_chunk is None or r.chunks_per_s is None else r.cpu_us_per_chunk * r.chunks_per_s / 1e6


def trace_table(costs: Sequence[TraceCost]) -> list[str]:
    if not costs:
        return []
    lines = ["", "The trace case: each tool at a trace's peak rate over the same tool at the open loop, same run "
             "(above 1: the trace costs that much more; send lag against each one's own schedule).", "",
             "| point | tool | CPU per chunk | TTFT err p99 | gap err p99 | send lag ms p99 (trace / open) "
             "| share of a core (trace / open) | failed |",
             "|" + "---|" * 8]
    for c in costs:
        lag = f"{_f(c.send_lag_p99_ms[0])} / {_f(c.send_lag_p99_ms[1])}"
        share = f"{_f(c.core_share[0], '.2f')} / {_f(c.core_share[1], '.2f')}"
        lines.append(f"| {c.point} | {c.tool} | {_f(c.cpu, '.2f')} | {_f(c.ttft_err_p99, '.2f')} "
                     f"| {_f(c.gap_err_p99, '.2f')} | {lag} | {share} | {c.failed} |")
    return lines


def _f(x: float | None, fmt: str = ".1f") -> str:
    return "-" if x is None else format(x, fmt)


def _pair(s: dict[str, float] | None, a: str, b: str, fmt: str = ".2f") -> str:
    return "-" if s is None else f"{format(s[a], fmt)} / {format(s[b], fmt)}"


def markdown(rows: Sequence[Row], meta: dict[str, Any]) -> str:
    head = ("| point | tool | N / 2N | CPU µs/chunk | x specmeter | chunks/s | x specmeter | TTFT err ms mean / p99 "
            "| gap err ms mean / p99 | mean-gap err ms mean / p99 | send lag ms p50 / p99 | failed |")
    lines = [head, "|" + "---|" * 12]
    for r in rows:
        where = r.point if r.rate is None or r.point.endswith("/s") else f"{r.point} ({r.rate:g}/s)"
        if r.error is not None:
            error = r.error.replace("|", "/")
            lines.append(f"| {where} | {r.tool} | {r.requests} / {2 * r.requests} | {error} |" + " |" * 8)
            continue
        gap = _pair(r.gap_err_ms, "mean", "p99") + (" †" if r.gap_err_kind == "per-request mean" else "")
        lines.append(
            f"| {where} | {r.tool} | {r.requests} / {2 * r.requests} | {_f(r.cpu_us_per_chunk)} "
            f"| {_f(r.cpu_ratio, '.2f')} | {_f(r.chunks_per_s, '.0f')} | {_f(r.chunks_ratio, '.2f')} "
            f"| {_pair(r.ttft_err_ms, 'mean', 'p99')} | {gap} | {_pair(r.mean_gap_err_ms, 'mean', 'p99')} "
            f"| {_pair(r.send_lag_ms, 'p50', 'p99', '.1f')} | {r.failed} |")
    s = meta["settings"]
    busy = max((r.server_busy for r in rows if r.server_busy is not None), default=None)
    versions = ", ".join(f"{k} {v}" for k, v in meta["versions"].items())
    notes = [
        "",
        f"{s['chunks']} chunks per request, {s['gap_ms']:g} ms apart (first after {s['ttft_ms']:g} ms); capacity "
        f"points stream with no gap. {meta['machine']}. {versions}."
        + (f" The paced server used at most {100 * busy:.0f}% of a core." if busy is not None else ""),
        "CPU: the tool's whole process tree, marginal between N and 2N requests (start-up cancels); x: ratio to "
        "specmeter's at the same point (CPU: lower is cheaper; chunks/s: higher is faster).",
        "Errors are |tool's measurement - the server's own write times|. † GuideLLM keeps no per-chunk times: its "
        "gap error is the per-request mean gap's. Send lag: open loop, against i/rate (anchored at the earliest).",
    ]
    extra = s.get("extra_args") or {}
    if extra:
        notes.append("Extra arguments: " + "; ".join(f"{k}: {' '.join(v)}" for k, v in extra.items()) + ".")
    return "\n".join(lines + notes + recording_table(recording_costs(rows)) + trace_table(trace_costs(rows)))


def recording_table(costs: Sequence[RecordingCost]) -> list[str]:
    if not costs:
        return []
    lines = ["", f"The cost of recording: {Specmeter.name} over {SpecmeterUnrecorded.name}, same run (requests.jsonl "
             "through the store's writer, and the progress bars; above 1: recording costs that much more).", "",
             "| point | CPU per chunk | chunks/s | TTFT err mean | TTFT err p99 | gap err mean | gap err p99 |",
             "|" + "---|" * 7]
    for c in costs:
        where = c.point + (f" ({c.rates[0]:g} vs {c.rates[1]:g}/s)" if c.rates else "")
        lines.append(f"| {where} | " + " | ".join(_f(x, ".2f") for x in (
            c.cpu, c.chunks_per_s, c.ttft_err_mean, c.ttft_err_p99, c.gap_err_mean, c.gap_err_p99)) + " |")
    return lines



def spread(xs: Sequence[float | None], fmt: str = ".1f") -> str:
    """Median (min-max) of the values that exist."""
    v = sorted(x for x in xs if x is not None)
    if not v:
        return "-"
    med = format(statistics.median(v), fmt)
    return med if len(v) == 1 else f"{med} ({format(v[0], fmt)}-{format(v[-1], fmt)})"


def markdown_over_runs(runs: Sequence[Sequence[Row]], meta: dict[str, Any]) -> str:
    """Several runs of the same benchmark (each with its ratios added): per point and tool, the median and range
    of each figure over the runs, then the same for the cost of recording."""
    ok = [{(r.tool, r.point): r for r in run if r.error is None} for run in runs]
    cells = list(dict.fromkeys((r.tool, r.point) for run in runs for r in run))

    def over(cell: tuple[str, str], get: Callable[[Row], float | None], fmt: str = ".1f") -> str:
        return spread([get(found[cell]) if cell in found else None for found in ok], fmt)

    def stat(s: dict[str, float] | None, name: str) -> float | None:
        return None if s is None else s.get(name)

    lines = [f"Median (min-max) over {len(runs)} runs.", "",
             "| point | tool | CPU µs/chunk | x specmeter | chunks/s | x specmeter | TTFT err ms mean "
             "| TTFT err ms p99 | gap err ms mean | gap err ms p99 | send lag ms p50 | send lag ms p99 | failed |",
             "|" + "---|" * 13]
    for cell in cells:
        tool, point = cell
        failed = sum(found[cell].failed for found in ok if cell in found)
        missing = sum(cell not in found for found in ok)
        lines.append(f"| {point} | {tool} | " + " | ".join([
            over(cell, lambda r: r.cpu_us_per_chunk), over(cell, lambda r: r.cpu_ratio, ".2f"),
            over(cell, lambda r: r.chunks_per_s, ".0f"), over(cell, lambda r: r.chunks_ratio, ".2f"),
            over(cell, lambda r: stat(r.ttft_err_ms, "mean"), ".2f"), over(cell, lambda r: stat(r.ttft_err_ms, "p99")),
            over(cell, lambda r: stat(r.gap_err_ms, "mean"), ".2f"), over(cell, lambda r: stat(r.gap_err_ms, "p99")),
            over(cell, lambda r: stat(r.send_lag_ms, "p50")), over(cell, lambda r: stat(r.send_lag_ms, "p99")),
            f"{failed}" + (f" ({missing} of {len(runs)} runs failed)" if missing else "")]) + " |")
    costs = [{c.point: c for c in recording_costs(run)} for run in runs]
    points = list(dict.fromkeys(p for run_costs in costs for p in run_costs))
    if points:
        lines += ["", f"The cost of recording: {Specmeter.name} over {SpecmeterUnrecorded.name} in the same run, "
                  f"median (min-max) over the runs (above 1: recording costs that much more).", "",
                  "| point | CPU per chunk | chunks/s | TTFT err mean | TTFT err p99 | gap err mean | gap err p99 |",
                  "|" + "---|" * 7]
        fields = ("cpu", "chunks_per_s", "ttft_err_mean", "ttft_err_p99", "gap_err_mean", "gap_err_p99")
        for p in points:
            lines.append(f"| {p} | " + " | ".join(
                spread([getattr(c[p], f) if p in c else None for c in costs], ".2f") for f in fields) + " |")
    traces = [{(c.tool, c.point): c for c in trace_costs(run)} for run in runs]
    cases = list(dict.fromkeys(key for run_traces in traces for key in run_traces))
    if cases:
        lines += ["", "The trace case: each tool at a trace's peak rate over the same tool at the open loop in the "
                  "same run, median (min-max) over the runs (above 1: the trace costs that much more).", "",
                  "| point | tool | CPU per chunk | TTFT err p99 | gap err p99 | send lag ms p99 at the trace |",
                  "|" + "---|" * 6]
        for key in cases:
            found = [t[key] for t in traces if key in t]
            lines.append(f"| {key[1]} | {key[0]} | " + " | ".join(
                [spread([c.cpu for c in found], ".2f"), spread([c.ttft_err_p99 for c in found], ".2f"),
                 spread([c.gap_err_p99 for c in found], ".2f"), spread([c.send_lag_p99_ms[0] for c in found])])
                + " |")
    versions = ", ".join(f"{k} {v}" for k, v in meta["versions"].items())
    s = meta["settings"]
    lines += ["", f"{s['chunks']} chunks per request, {s['gap_ms']:g} ms apart; capacity points stream with no gap. "
              f"{meta['machine']}. {versions}."]
    return "\n".join(lines)
