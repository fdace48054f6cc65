"""CSV export: the stored records, point results, speedups and recommendation as flat tables for a
spreadsheet or pandas. The column names are a contract (docs/csv.md documents every one), so they live in the
tuples below; every value is copied from what the run stored, never recomputed."""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable, Sequence
from pathlib import Path

from specmeter.load.kinds import kind_of
from specmeter.report.outputs import Output
from specmeter.rundir.run_data import RunData
from specmeter.rundir.store import atomic_write_text
from specmeter.schemas.analysis import Ratio, Speedup
from specmeter.schemas.metrics import Distribution
from specmeter.schemas.plan import Plan
from specmeter.schemas.records import RequestRecord
from specmeter.schemas.results import ConfigResult, PointResult, RunSummary
from specmeter.schemas.sd import SDCounts

REQUESTS = "requests.csv"
POINTS = "points.csv"
SPEEDUPS = "speedups.csv"
RECOMMENDATION = "recommendation.csv"
VERIFY_SUBDIR = "verify"

Cell = str | int | float | bool | None

REQUEST_COLUMNS: tuple[str, ...] = (
    "config_id", "role", "spec", "workload", "point_id", "repeat", "conversation_id", "turn", "category", "phase",
    "warmup", "ok", "error_kind", "http_status", "finish_reason", "queued_s", "scheduled_s", "start_s", "ttft_s",
    "e2e_s", "tpot_s", "prompt_tokens", "output_tokens", "chunks", "sd_source", "sd_steps", "sd_drafted",
    "sd_accepted", "sd_al", "sd_ar",
)

_DISTS = ("ttft", "tpot", "e2e")
_STATS = ("p50", "p90", "p99", "mean")

POINT_COLUMNS: tuple[str, ...] = (
    "config_id", "role", "spec", "workload", "point_id", "load_kind", "load_value", "repeat", "started_s",
    "num_requests", "num_ok", "wall_s", "output_tokens", "output_tok_s", "steady_tok_s", "steady_share", "req_s",
    *(f"{d}_{s}_s" for d in _DISTS for s in _STATS),
    "engine_batch_mean", "engine_batch_max", "sd_al", "sd_ar", "sd_per_position", "sd_source",
    "speedup_tok_s", "speedup_tok_s_ci95_low", "speedup_tok_s_ci95_high", "speedup_verdict", "resumed",
    "synthetic_set_per_position", "synthetic_expected_per_position", "synthetic_expected_al", "synthetic_within",
    "slo", "goodput_req_s", "goodput_ci95_low", "goodput_ci95_high", "slo_met_share",
    "sd_tree", "sd_per_depth", "sd_histogram",
)

_RATIOS = ("output_tok_s", "tpot", "ttft", "e2e")

SPEEDUP_COLUMNS: tuple[str, ...] = (
    "config_id", "baseline_id", "point_id", "load_kind", "load_value",
    *(f"{r}_{part}" for r in _RATIOS for part in ("ratio", "ci95_low", "ci95_high")),
    "decided_on", "verdict", "paired_requests", "same_work", "note", "synthetic",
)

RECOMMENDATION_COLUMNS: tuple[str, ...] = ("round", "answer", "verification", "drafter", "start", "end", "k", "bases")


# A spreadsheet reads a cell that starts with one of these as a formula (OWASP's CSV injection guidance).
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def _cell(value: Cell) -> str | int | float:
    """None -> empty cell, booleans as true/false, numbers as Python writes them (full precision), and text that
    a spreadsheet would run as a formula (a dataset's category `=HYPERLINK(...)`) behind a quote, as text."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str) and value.startswith(FORMULA_STARTS) and not _number(value):
        return "'" + value
    return value


def _number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _joined(values: Iterable[float | int | str]) -> str:
    return ";".join(str(v) for v in values)


def _text(columns: Sequence[str], rows: Iterable[Sequence[Cell]]) -> str:
    buf = io.StringIO()
    writer = csv.writer(buf)  # RFC 4180: CRLF rows, so a CR inside a cell is quoted too
    writer.writerow(columns)
    for row in rows:
        assert len(row) == len(columns), (columns, row)
        writer.writerow([_cell(v) for v in row])
    return buf.getvalue()


def _config_info(plan: Plan, results: dict[str, ConfigResult], config_id: str) -> tuple[str | None, ...]:
    """(role, spec label, workload) of a configuration: from its result, else from the plan."""
    res = results.get(config_id)
    if res is not None:
        return res.role.value, res.spec_label, res.workload
    cfg = next((c for c in plan.configs if c.id == config_id), None)
    return (cfg.role.value, cfg.label, cfg.workload) if cfg else (None, None, None)


def request_rows(summary: RunSummary, records: Sequence[RequestRecord]) -> list[list[Cell]]:
    """One row per request record, as stored (tpot_s is the record's own computed field, the one metrics use)."""
    results = {c.config_id: c for c in summary.configs}
    rows: list[list[Cell]] = []
    for r in records:
        sd = r.sd
        rows.append([
            r.config_id, *_config_info(summary.plan, results, r.config_id), r.point_id, r.repeat, r.conversation_id,
            r.turn, r.category, r.phase, r.warmup, r.ok, r.error_kind, r.http_status, r.finish_reason, r.queued_s,
            r.scheduled_s, r.start_s, r.ttft_s, r.e2e_s, r.tpot_s, r.prompt_tokens, r.output_tokens,
            len(r.chunk_offsets_s), sd.source if sd else None, sd.num_steps if sd else None,
            sd.num_draft_tokens if sd else None, sd.num_accepted_tokens if sd else None,
            sd.acceptance_length if sd else None, sd.acceptance_rate if sd else None,
        ])
    return rows


def _dist(d: Distribution) -> list[Cell]:
    return [d.p50, d.p90, d.p99, d.mean]


def _load(summary: RunSummary, point_id: str) -> tuple[str | None, int | float | None]:
    """(kind, value) of a load point: concurrency as an integer, a request rate in requests/s."""
    point = summary.plan.load.point(point_id)
    if point is None:
        return None, None
    return point.kind, kind_of(point).axis_value()


def _point_row(summary: RunSummary, config: ConfigResult, pr: PointResult, speedup: Speedup | None) -> list[Cell]:
    la, st, rb, head, synth = pr.latency, pr.steady, pr.running_batch, pr.sd.headline, pr.sd.synthetic
    tput = speedup.output_throughput if speedup else None
    return [
        config.config_id, config.role.value, config.spec_label, config.workload, pr.point_id,
        *_load(summary, pr.point_id), pr.repeat, pr.started_s, la.num_requests, la.num_ok, la.wall_s,
        la.output_tokens, la.output_tokens_per_s, st.output_tokens_per_s if st else None, st.share if st else None,
        la.requests_per_s, *_dist(la.ttft_s), *_dist(la.tpot_s), *_dist(la.e2e_s),
        rb.mean if rb else None, rb.max if rb else None,
        head.acceptance_length if head else None, head.acceptance_rate if head else None,
        _joined(head.per_position_rate) if head else None, pr.sd.reference,
        tput.value if tput else None, tput.ci95_low if tput else None, tput.ci95_high if tput else None,
        speedup.verdict if speedup else None, pr.resumed,
        _joined(p.set_rate for p in synth.positions) if synth else None,
        _joined(p.expected for p in synth.positions) if synth else None,
        synth.expected_al if synth else None, synth.within if synth else None,
        *((g.slo, g.requests_per_s, g.ci95_low, g.ci95_high, g.share) if (g := pr.goodput) else (None,) * 5),
        head.tree if head else None, _joined(head.per_depth_rate or []) if head else None,
        _joined(h.histogram) if (h := _with_histogram(pr)) is not None and h.histogram else None,
    ]


def _with_histogram(pr: PointResult) -> SDCounts | None:
    """The point's counts that carry an acceptance histogram: the headline's, else the per-request sums'."""
    return next((c for c in (pr.sd.headline, pr.sd.per_request) if c is not None and c.histogram), None)


def point_rows(summary: RunSummary) -> list[list[Cell]]:
    """One row per (configuration, point, repeat) in the summary, in plan order of points; the speedup columns
    repeat the point's stored speedup (pooled over repeats) on every repeat's row."""
    order = {p.id: i for i, p in enumerate(summary.plan.points)}
    speedups = {(s.config_id, s.point_id): s for s in summary.analysis.speedups}
    rows: list[list[Cell]] = []
    for config in summary.configs:
        for pr in sorted(config.points, key=lambda p: (order.get(p.point_id, len(order)), p.repeat)):
            rows.append(_point_row(summary, config, pr, speedups.get((config.config_id, pr.point_id))))
    return rows


def _ratio(r: Ratio) -> list[Cell]:
    return [r.value, r.ci95_low, r.ci95_high]


def speedup_rows(summary: RunSummary) -> list[list[Cell]]:
    """One row per stored speedup (candidate x point)."""
    synthetic = {c.id for c in summary.plan.configs if c.spec.synthetic}
    return [[s.config_id, s.baseline_id, s.point_id, *_load(summary, s.point_id), *_ratio(s.output_throughput),
             *_ratio(s.tpot), *_ratio(s.ttft), *_ratio(s.e2e), s.decided_on, s.verdict, s.paired_requests,
             s.same_work, s.note, s.config_id in synthetic] for s in summary.analysis.speedups]


def recommendation_rows(run: RunData) -> list[list[Cell]]:
    """One row per K range of each drafter, best drafter first: the answer's round first, then the earlier
    rounds (history, newest first), each as its latest state stores it."""
    if run.answer is None:
        return []
    rounds = run.answer.rounds
    return [[r.number, r is rounds[-1], r.verification, d.drafter, k.start, k.end, k.k, _joined(k.bases)]
            for r in reversed(rounds) for d in r.recommendation.drafters for k in d.ranges]


class CsvOutput(Output):
    """A directory of CSV files; a verification run stored beside the run goes into its verify/ subdirectory."""

    kind = "csv"

    def write(self, run: RunData) -> list[Path]:
        dest = self.dest if self.dest is not None else Path("csv")
        dest.mkdir(parents=True, exist_ok=True)
        files: list[tuple[str, Sequence[str], list[list[Cell]]]] = [
            (REQUESTS, REQUEST_COLUMNS, request_rows(run.summary, run.records)),
            (POINTS, POINT_COLUMNS, point_rows(run.summary)),
            (SPEEDUPS, SPEEDUP_COLUMNS, speedup_rows(run.summary)),
        ]
        if run.recommendation is not None:
            files.append((RECOMMENDATION, RECOMMENDATION_COLUMNS, recommendation_rows(run)))
        written: list[Path] = []
        for name, columns, rows in files:
            path = dest / name
            atomic_write_text(path, _text(columns, rows))
            written.append(path)
        if run.verification is not None:
            written += CsvOutput(dest / VERIFY_SUBDIR).write(run.verification)
        return written
