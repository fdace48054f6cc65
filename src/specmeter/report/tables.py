"""The report's tables as plain data (title, columns, rows of text), built from the stored results and the
stored decisions of analysis: every output (console, HTML) draws the same tables and none decides anything."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Literal

from specmeter.metrics.sd import sum_counts
from specmeter.schemas.analysis import Ratio, Speedup
from specmeter.schemas.results import ConfigResult, PointResult, RunSummary
from specmeter.schemas.sd import SDCounts

Align = Literal["left", "right"]


@dataclass
class Column:
    name: str
    align: Align = "left"
    wrap: bool = True


@dataclass
class Grid:
    """One table: cells are display text (a newline is a line break inside the cell); `sections` holds the row
    indices where a new group of rows begins (drawn as a rule)."""

    title: str
    columns: list[Column]
    rows: list[list[str]] = field(default_factory=list)
    sections: list[int] = field(default_factory=list)

    def add_row(self, *cells: str) -> None:
        assert len(cells) == len(self.columns), (self.title, cells)
        self.rows.append(list(cells))

    def add_section(self) -> None:
        self.sections.append(len(self.rows))

    @property
    def row_count(self) -> int:
        return len(self.rows)


@dataclass(frozen=True)
class Note:
    """A line under the tables; `warn` marks what can make a number wrong or incomplete."""

    text: str
    warn: bool = False


def grid(title: str, names: tuple[str, ...] | list[str], left: set[str] | None = None, right: set[str] | None = None,
         no_wrap: set[str] | None = None) -> Grid:
    """A grid whose columns are right-aligned when named in `right`, or when not named in `left`."""
    def align(n: str) -> Align:
        if right is not None:
            return "right" if n in right else "left"
        return "left" if left is None or n in left else "right"
    return Grid(title, [Column(n, align(n), n not in (no_wrap or set())) for n in names])


VERDICTS = {"pays": "SD pays", "slows": "SD slows serving", "unclear": "no clear difference"}


def fmt(value: float | None, fmt: str = "{:.2f}", scale: float = 1.0) -> str:
    return "-" if value is None else fmt.format(value * scale)


def ms(value: float | None) -> str:
    return fmt(value, "{:.1f}", 1000.0)


def _rates(values: list[float]) -> str:
    return " ".join(f"{v:.2f}" for v in values) if values else "-"


def _point(summary: RunSummary, point_id: str) -> str:
    found = summary.plan.load.point(point_id)
    return found.label() if found is not None else point_id


def _rows(summary: RunSummary) -> Iterator[tuple[ConfigResult, PointResult]]:
    """Every measured (configuration, point, repeat), in plan order of points."""
    order = {p.id: i for i, p in enumerate(summary.plan.points)}
    for config in summary.configs:
        for pr in sorted(config.points, key=lambda p: (order.get(p.point_id, 0), p.repeat)):
            yield config, pr


def _repeat(summary: RunSummary, pr: PointResult) -> str:
    return f" #{pr.repeat + 1}" if summary.plan.repeats > 1 else ""


def plan_table(summary: RunSummary) -> Grid:
    plan = summary.plan
    points = ", ".join(p.label() for p in plan.points)
    extra = (f"; {plan.repeats} repeats" if plan.repeats > 1 else "") + ("; interleaved" if plan.interleave else "")
    t = grid(f"Plan ({plan.kind}): {points}{extra}",
             ("configuration", "role", "speculation", "workload", "server start s", "status"))
    for cfg in plan.configs:
        res = summary.config(cfg.id)
        status = "not run"
        if res is not None:
            status = "server failed" if res.server_error else f"{len(res.points)} point(s)"
        t.add_row(cfg.id, cfg.role.value, cfg.label, cfg.workload,
                  fmt(res.startup_s if res else None, "{:.0f}"), status)
    return t


def pooled_sd(config: ConfigResult, point_id: str) -> tuple[SDCounts | None, str]:
    """SD of a point pooled over its repeats (counts add up exactly), and where the numbers came from."""
    heads = [(pr.sd.headline, pr.sd.reference) for pr in config.repeats(point_id) if pr.sd.available]
    counts = [h for h, _ in heads if h is not None]
    if not counts:
        return None, "-"
    pooled = counts[0] if len(counts) == 1 else sum_counts(counts, source=counts[0].source)
    return pooled, "/".join(sorted({ref or "-" for _, ref in heads}))


def sd_table(summary: RunSummary) -> Grid | None:
    cols = ("configuration", "point", "AL", "AR", "per-position a_i", "conditional c_i", "steps", "source", "check")
    t = grid("Speculative decoding (from the engine; pooled over repeats)", cols, right={"AL", "AR", "steps"},
             no_wrap=set(cols) - {"per-position a_i", "conditional c_i"})
    for config in summary.configs:
        for point in summary.plan.points:
            c, source = pooled_sd(config, point.id)
            if c is None:
                continue
            checks = {pr.sd.agree for pr in config.repeats(point.id)}
            check = "DIFFER" if False in checks else "agree" if True in checks else "-"
            steps = "n/a" if c.num_steps is None else str(c.num_steps)
            t.add_row(config.config_id, point.label(), fmt(c.acceptance_length), fmt(c.acceptance_rate),
                      _rates(c.per_position_rate), _rates(c.conditional_rate), steps, source, check)
    return t if t.row_count else None


def category_table(summary: RunSummary) -> Grid | None:
    """Per-category acceptance of the first point that has it (acceptance barely moves with load)."""
    for config, pr in _rows(summary):
        cb = pr.categories
        if cb is None:
            continue
        t = grid(f"Acceptance per category ({config.config_id}, {_point(summary, pr.point_id)}, per-request stats)",
                 ("category", "requests", "AL steps", "AL req-mean", "AR", "per-position a_i", "conditional c_i"),
                 left={"category", "per-position a_i", "conditional c_i"})
        for row in cb.categories:
            t.add_row(row.category, str(row.requests), fmt(row.al_step_weighted), fmt(row.al_request_mean),
                      fmt(row.acceptance_rate), _rates(row.per_position_rate), _rates(row.conditional_rate))
        t.add_section()
        t.add_row("macro avg", "-", fmt(cb.macro_al), "-", fmt(cb.macro_ar), "", "")
        p = cb.pooled
        t.add_row("pooled", str(p.requests), fmt(p.al_step_weighted), fmt(p.al_request_mean),
                  fmt(p.acceptance_rate), _rates(p.per_position_rate), _rates(p.conditional_rate))
        return t
    return None


def throughput_table(summary: RunSummary) -> Grid:
    t = grid("Throughput (warmup excluded; steady: over the window the load was fully applied)",
             ("configuration", "point", "ok/sent", "out tok/s", "steady tok/s", "steady share", "engine batch",
              "req/s", "tok/chunk", "wall s"), left={"configuration", "point"})
    for config, pr in _rows(summary):
        la, st, rb = pr.latency, pr.steady, pr.running_batch
        t.add_row(
            config.config_id, _point(summary, pr.point_id) + _repeat(summary, pr), f"{la.num_ok}/{la.num_requests}",
            fmt(la.output_tokens_per_s, "{:.1f}"), fmt(st.output_tokens_per_s if st else None, "{:.1f}"),
            fmt(st.share if st else None, "{:.0%}"), fmt(rb.steady_mean if rb and rb.steady_mean is not None
                                                        else rb.mean if rb else None, "{:.1f}"),
            fmt(la.requests_per_s), fmt(la.tokens_per_chunk), fmt(la.wall_s, "{:.1f}"),
        )
    return t


def latency_table(summary: RunSummary) -> Grid:
    t = grid("Latency, ms (ICL: gap between chunks; ITL: gap per token in the chunk)",
             ("configuration", "point", "TTFT p50", "TTFT p99", "TPOT mean", "TPOT p50", "TPOT p99", "ICL p50",
              "ITL p50", "E2E p50", "E2E p99"), left={"configuration", "point"})
    for config, pr in _rows(summary):
        la = pr.latency
        t.add_row(
            config.config_id, _point(summary, pr.point_id) + _repeat(summary, pr), ms(la.ttft_s.p50),
            ms(la.ttft_s.p99), ms(la.tpot_s.mean), ms(la.tpot_s.p50), ms(la.tpot_s.p99),
            ms(la.inter_chunk_s.p50), ms(la.itl_per_token_s.p50), ms(la.e2e_s.p50), ms(la.e2e_s.p99),
        )
    return t


def ratio_text(r: Ratio) -> str:
    if r.value is None:
        return "-"
    text = f"{r.value:.2f}x"
    if r.ci95_low is not None and r.ci95_high is not None:
        text += f" [{r.ci95_low:.2f}, {r.ci95_high:.2f}]"
    if r.median is not None and r.mad is not None:
        text += f" med {r.median:.2f} ±{r.mad:.2f}"
    return text


def _apart(summary: RunSummary, s: Speedup) -> str:
    """How far apart in time the two sides were measured (first repeat): drift hides in that gap."""
    cand, base = summary.config(s.config_id), summary.config(s.baseline_id)
    a = cand.point(s.point_id) if cand else None
    b = base.point(s.point_id) if base else None
    if a is None or b is None or a.started_s is None or b.started_s is None:
        return "-"
    return f"{abs(a.started_s - b.started_s) / 60:.1f} min"


def speedup_table(summary: RunSummary) -> Grid | None:
    speedups = summary.analysis.speedups
    if not speedups:
        return None
    reps = " (median ± MAD over repeats)" if summary.plan.repeats > 1 else ""
    t = grid(f"Speedup over the baseline, same requests (95% paired-bootstrap CI{reps})",
             ("configuration", "point", "output tok/s", "TPOT", "TTFT", "E2E", "sides apart", "verdict"),
             left={"configuration", "point", "verdict"})
    for s in speedups:
        verdict = VERDICTS.get(s.verdict or "", "-")
        if s.decided_on == "tpot":
            verdict += " (on TPOT)"
        if not s.same_work:
            verdict += " (unequal work!)"
        t.add_row(s.config_id, _point(summary, s.point_id), ratio_text(s.output_throughput), ratio_text(s.tpot),
                  ratio_text(s.ttft), ratio_text(s.e2e), _apart(summary, s), verdict)
    return t


def decision_table(summary: RunSummary) -> Grid | None:
    a = summary.analysis
    if not a.crossovers and not a.choices:
        return None
    t = grid("Where speculation stops paying, and what to run at each point", ("what", "answer"))
    for c in a.crossovers:
        t.add_row(f"crossover {c.config_id} ({c.axis})", c.note)
    if a.crossovers and a.choices:
        t.add_section()
    for ch in a.choices:
        why = "head to head below" if ch.evidence else ch.reason  # runs of 0.1 kept only the reason
        t.add_row(f"best at {_point(summary, ch.point_id)}", f"{ch.best_config_id} (K={ch.best_k}): {why}")
    return t


def head_to_head_table(summary: RunSummary) -> Grid | None:
    """The comparisons behind each choice: from the cheapest up, each against the choice so far."""
    rows = [(ch, h) for ch in summary.analysis.choices for h in ch.evidence]
    if not rows:
        return None
    t = grid("Head to head: each costlier configuration against the choice so far, on the requests both ran "
             "(it replaces the choice only when the whole interval clears 1 + min gain)",
             ("point", "challenger", "against", "ratio [interval]", "needs", "outcome", "chosen"),
             left={"point", "challenger", "against", "outcome", "chosen"})
    for ch, h in rows:
        ratio = fmt(h.ratio.value, "{:.3f}x")
        if h.low is not None and h.high is not None:
            ratio += f" [{h.low:.3f}, {h.high:.3f}]"
        t.add_row(_point(summary, ch.point_id), h.config_id, h.against, ratio, f"> {h.threshold:.2f}",
                  h.outcome.replace("_", " "), ch.best_config_id if h is ch.evidence[-1] else "")
    return t


def verification_table(summary: RunSummary) -> Grid | None:
    rows = summary.analysis.verification
    if not rows:
        return None
    t = grid("The dynamic config, run: against the baseline and the sweep's best static config at each point "
             "(same requests, interleaved)",
             ("point", "engine batch", "table K", "drafted K (steps)", "followed", "vs baseline tok/s",
              "vs baseline TPOT", "best static", "vs static tok/s", "vs static TPOT"),
             left={"point", "drafted K (steps)", "followed", "best static"}, no_wrap={"best static"})
    for v in rows:
        d = v.drafted
        drafted = " ".join(f"K{k}:{n}" for k, n in d.drafted.items()) or "-"
        followed = "-" if d.followed is None else ("yes" if d.followed else "NO: " + d.note)
        base, static = v.vs_baseline, v.vs_static
        expected = "-" if d.expected_k is None else str(d.expected_k)
        t.add_row(_point(summary, v.point_id), fmt(d.engine_batch, "{:.1f}"), expected, drafted,
                  followed, ratio_text(base.output_throughput) if base else "-", ratio_text(base.tpot) if base else "-",
                  v.static_id or "-", ratio_text(static.output_throughput) if static else "-",
                  ratio_text(static.tpot) if static else "-")
    return t


def lossless_table(summary: RunSummary) -> Grid | None:
    checks = summary.analysis.lossless
    if not checks:
        return None
    t = grid("Lossless check at temperature 0: candidate outputs vs the baseline's",
             ("configuration", "compared", "identical", "basis", "first mismatches (point conversation#turn @ index)"),
             right={"compared", "identical"})
    for c in checks:
        shown = ", ".join(f"{m.point_id} {m.conversation_id}#{m.turn} @{m.first_diff}" for m in c.mismatches[:3])
        more = f" (+{c.compared - c.matched - 3} more)" if c.compared - c.matched > 3 else ""
        t.add_row(c.config_id, str(c.compared), fmt(c.match_rate, "{:.0%}"), c.basis, (shown + more) or "-")
    return t


def workload_bias_table(summary: RunSummary) -> Grid | None:
    """compare-workloads: real data against random tokens of matched lengths, per point."""
    plan = summary.plan
    real = next((c for c in plan.configs if c.role.value == "candidate" and c.workload == "main"), None)
    rnd = next((c for c in plan.configs if c.role.value == "candidate" and c.workload == "random"), None)
    if real is None or rnd is None:
        return None
    speed = {(s.config_id, s.point_id): s.output_throughput.value for s in summary.analysis.speedups}
    real_res, rnd_res = summary.config(real.id), summary.config(rnd.id)
    if real_res is None or rnd_res is None:
        return None
    t = grid("Real data vs random tokens of matched lengths (synthetic bias)",
             ("point", "AL real", "AL random", "SD tok/s real", "SD tok/s random", "speedup real", "speedup random",
              "random overstates speedup by"), left=set())
    for pr in real_res.points:
        rp = rnd_res.point(pr.point_id, pr.repeat)
        if rp is None:
            continue
        a, b = pr.sd.headline, rp.sd.headline
        s_real, s_rnd = speed.get((real.id, pr.point_id)), speed.get((rnd.id, pr.point_id))
        bias = f"{(s_rnd / s_real - 1) * 100:+.0f}%" if s_real and s_rnd else "-"
        t.add_row(_point(summary, pr.point_id), fmt(a.acceptance_length if a else None),
                  fmt(b.acceptance_length if b else None), fmt(pr.latency.output_tokens_per_s, "{:.1f}"),
                  fmt(rp.latency.output_tokens_per_s, "{:.1f}"), fmt(s_real, "{:.2f}x"), fmt(s_rnd, "{:.2f}x"), bias)
    return t


def notes(summary: RunSummary) -> list[Note]:
    """Everything the run carries that a reader must know to trust its numbers: failures and disagreements
    are warnings; how a number was produced is information."""
    out: list[Note] = []
    for config in summary.configs:
        if config.server_error:
            out.append(Note(f"{config.config_id}: server failed to start: {config.server_error}", warn=True))
    if any(c.workload == "random" for c in summary.plan.configs):
        out.append(Note("random-token workload: random prompts are the contrast, not the answer; acceptance on "
                        "them says little about real traffic", warn=True))
    missing: dict[str, str] = {}
    first_stall: dict[str, PointResult] = {}  # configuration -> the first point, in run order, where it drafted nothing
    for config, pr in _rows(summary):
        earlier = first_stall.get(config.config_id)
        if pr.sd.stalled and (earlier is None or (pr.started_s or 0.0) < (earlier.started_s or 0.0)):
            first_stall[config.config_id] = pr
    for config, pr in _rows(summary):
        sd = pr.sd
        where = f"{config.config_id} @ {_point(summary, pr.point_id)}{_repeat(summary, pr)}"
        if config.role.value != "baseline":
            missing.update(sd.not_available)
        if first_stall.get(config.config_id) is pr:
            out.append(Note(f"{where}: speculation stopped here (and at every later point without drafts): "
                            f"{sd.reason}; no acceptance is reported for it", warn=True))
        elif not sd.available and not sd.stalled:
            out.append(Note(f"{where}: no SD metrics: {sd.reason}", warn=config.role.value != "baseline"))
        else:
            if sd.agreement:
                out.append(Note(f"{where}: {sd.agreement}", warn=sd.agree is False))
            if sd.counters_invalid_reason:
                out.append(Note(f"{where}: counter deltas not used: {sd.counters_invalid_reason}", warn=True))
            if sd.foreign_traffic:
                out.append(Note(f"{where}: {sd.foreign_traffic}", warn=True))
        if pr.resumed:
            out.append(Note(f"{where}: finished by resume on a new server: its wall time and throughput span two "
                            "servers", warn=True))
        elif pr.steady is None:
            out.append(Note(f"{where}: the load never reached steady state (fewer requests than slots?)", warn=True))
        if pr.latency.errors_by_kind:
            errs = ", ".join(f"{k} {v}" for k, v in sorted(pr.latency.errors_by_kind.items()))
            out.append(Note(f"{where}: failed requests: {errs}", warn=True))
    for what, why in missing.items():
        out.append(Note(f"{what}: not available from this engine ({why})"))
    for s in summary.analysis.speedups:
        if s.note:
            out.append(Note(f"speedup {s.config_id} @ {_point(summary, s.point_id)}: {s.note}", warn=not s.same_work))
    for c in summary.analysis.lossless:
        if c.matched < c.compared:
            out.append(Note(f"lossless check: {c.compared - c.matched} of {c.compared} outputs of {c.config_id} differ "
                            f"from the baseline's at temperature 0", warn=True))
    if summary.analysis.lossless_note:
        out.append(Note(summary.analysis.lossless_note, warn=True))
    if summary.status != "complete":
        out.append(Note(f"run {summary.status}: {summary.incomplete_reason or ''}", warn=True))
    return out


def summary_tables(summary: RunSummary) -> list[Grid]:
    """The run's tables in reading order: what ran, acceptance, speed, the verdicts, the checks."""
    tables = (plan_table(summary), sd_table(summary), category_table(summary), throughput_table(summary),
              latency_table(summary), speedup_table(summary), decision_table(summary), head_to_head_table(summary),
              verification_table(summary),
              lossless_table(summary), workload_bias_table(summary))
    return [t for t in tables if t is not None]
