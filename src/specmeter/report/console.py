"""Console report: rich tables a person reads at a glance."""

from __future__ import annotations

from rich.console import Console, Group
from rich.table import Table
from rich.text import Text

from specmeter.metrics.sd import SDCounts
from specmeter.results import LevelResult, PhaseResult, RunSummary


def _f(value: float | None, fmt: str = "{:.2f}", scale: float = 1.0) -> str:
    return "-" if value is None else fmt.format(value * scale)


def _ms(value: float | None) -> str:
    return _f(value, "{:.1f}", 1000.0)


def _rates(values: list[float]) -> str:
    return " ".join(f"{v:.2f}" for v in values) if values else "-"


def sd_table(summary: RunSummary) -> Table | None:
    rows: list[tuple[PhaseResult, LevelResult, SDCounts]] = []
    for phase in summary.phases:
        for lv in phase.levels:
            if lv.sd.available and lv.sd.headline is not None:
                rows.append((phase, lv, lv.sd.headline))
    if not rows:
        return None
    t = Table(title="Speculative decoding (from the engine)", title_justify="left")
    for col in ("phase", "conc", "AL", "AR", "per-position a_i", "conditional c_i", "steps", "source", "check"):
        t.add_column(col, justify="right" if col in {"conc", "AL", "AR", "steps"} else "left",
                     no_wrap=col not in {"per-position a_i", "conditional c_i"})
    for phase, lv, c in rows:
        check = "agree" if lv.sd.agree else ("DIFFER" if lv.sd.agree is False else "-")
        t.add_row(
            phase.name, str(lv.concurrency), _f(c.acceptance_length), _f(c.acceptance_rate),
            _rates(c.per_position_rate), _rates(c.conditional_rate), str(c.num_steps),
            lv.sd.reference or "-", check,
        )
    return t


def throughput_table(summary: RunSummary) -> Table:
    t = Table(title="Throughput (warmup excluded)", title_justify="left")
    for col in ("phase", "speculation", "conc", "ok/sent", "out tok/s", "req/s", "tok/chunk", "wall s"):
        t.add_column(col, justify="left" if col in {"phase", "speculation"} else "right")
    for phase in summary.phases:
        for lv in phase.levels:
            la = lv.latency
            t.add_row(
                phase.name, phase.spec_label, str(lv.concurrency), f"{la.num_ok}/{la.num_requests}",
                _f(la.output_tokens_per_s, "{:.1f}"), _f(la.requests_per_s), _f(la.tokens_per_chunk),
                _f(la.wall_s, "{:.1f}"),
            )
    return t


def latency_table(summary: RunSummary) -> Table:
    t = Table(title="Latency, ms (ICL: gap between chunks; ITL: gap per token in the chunk)", title_justify="left")
    cols = ("phase", "conc", "TTFT p50", "TTFT p99", "TPOT mean", "TPOT p50", "TPOT p99", "ICL p50",
            "ITL p50", "E2E p50", "E2E p99")
    for col in cols:
        t.add_column(col, justify="left" if col == "phase" else "right")
    for phase in summary.phases:
        for lv in phase.levels:
            la = lv.latency
            t.add_row(
                phase.name, str(lv.concurrency), _ms(la.ttft_s.p50), _ms(la.ttft_s.p99), _ms(la.tpot_s.mean),
                _ms(la.tpot_s.p50), _ms(la.tpot_s.p99), _ms(la.inter_chunk_s.p50), _ms(la.itl_per_token_s.p50),
                _ms(la.e2e_s.p50), _ms(la.e2e_s.p99),
            )
    return t


def category_table(summary: RunSummary) -> Table | None:
    """Per-category acceptance of the first level that has it (acceptance barely moves with load)."""
    for phase in summary.phases:
        for lv in phase.levels:
            cb = lv.categories
            if cb is None:
                continue
            t = Table(
                title=f"Acceptance per category ({phase.name}, concurrency {lv.concurrency}, per-request stats)",
                title_justify="left",
            )
            for col in ("category", "requests", "AL steps", "AL req-mean", "AR", "per-position a_i", "conditional c_i"):
                t.add_column(col, justify="left" if col in {"category", "per-position a_i", "conditional c_i"} else "right")
            for row in cb.categories:
                t.add_row(row.category, str(row.requests), _f(row.al_step_weighted), _f(row.al_request_mean),
                          _f(row.acceptance_rate), _rates(row.per_position_rate), _rates(row.conditional_rate))
            t.add_section()
            t.add_row("macro avg", "-", _f(cb.macro_al), "-", _f(cb.macro_ar), "", "")
            p = cb.pooled
            t.add_row("pooled", str(p.requests), _f(p.al_step_weighted), _f(p.al_request_mean),
                      _f(p.acceptance_rate), _rates(p.per_position_rate), _rates(p.conditional_rate))
            return t
    return None


def speedup_table(summary: RunSummary) -> Table | None:
    if not summary.speedup:
        return None
    t = Table(title="Speedup: SD vs the same engine with speculation off (95% CI)", title_justify="left")
    for col in ("workload", "conc", "output tok/s", "TPOT", "TTFT", "verdict"):
        t.add_column(col, justify="right" if col not in {"verdict", "workload"} else "left")
    for s in summary.speedup:
        thr = s.output_throughput
        verdict = "-"
        if thr.value is not None:
            if thr.ci95_low is not None and thr.ci95_low > 1.0:
                verdict = "SD pays"
            elif thr.ci95_high is not None and thr.ci95_high < 1.0:
                verdict = "SD slows serving"
            else:
                verdict = "no clear difference"
        if not s.same_work:
            verdict += " (unequal work!)"
        t.add_row(s.workload, str(s.concurrency), _ratio(thr.value, thr.ci95_low, thr.ci95_high),
                  _ratio(s.tpot.value, s.tpot.ci95_low, s.tpot.ci95_high),
                  _ratio(s.ttft.value, s.ttft.ci95_low, s.ttft.ci95_high), verdict)
    return t


def workload_bias_table(summary: RunSummary) -> Table | None:
    """compare-workloads: real data against random tokens of matched lengths, per concurrency."""
    if not any(p.workload == "random" for p in summary.phases):
        return None
    speed = {(s.workload, s.concurrency): s.output_throughput.value for s in summary.speedup}
    sd_by_workload = {p.workload: p for p in summary.phases if p.spec_label != "off"}
    real, rnd = sd_by_workload.get("main"), sd_by_workload.get("random")
    if real is None or rnd is None:
        return None
    t = Table(title="Real data vs random tokens of matched lengths (synthetic bias)", title_justify="left")
    for col in ("conc", "AL real", "AL random", "SD tok/s real", "SD tok/s random", "speedup real",
                "speedup random", "random overstates speedup by"):
        t.add_column(col, justify="right")
    for lv in real.levels:
        rl = rnd.level(lv.concurrency)
        if rl is None:
            continue
        a, b = lv.sd.headline, rl.sd.headline
        s_real, s_rnd = speed.get(("main", lv.concurrency)), speed.get(("random", lv.concurrency))
        bias = f"{(s_rnd / s_real - 1) * 100:+.0f}%" if s_real and s_rnd else "-"
        t.add_row(str(lv.concurrency), _f(a.acceptance_length if a else None), _f(b.acceptance_length if b else None),
                  _f(lv.latency.output_tokens_per_s, "{:.1f}"), _f(rl.latency.output_tokens_per_s, "{:.1f}"),
                  _ratio(s_real, None, None), _ratio(s_rnd, None, None), bias)
    return t


def _ratio(v: float | None, lo: float | None, hi: float | None) -> str:
    if v is None:
        return "-"
    return f"{v:.2f}x" + (f" [{lo:.2f}, {hi:.2f}]" if lo is not None and hi is not None else "")


def notes(summary: RunSummary) -> list[str]:
    out: list[str] = []
    for phase in summary.phases:
        for lv in phase.levels:
            sd = lv.sd
            where = f"{phase.name} @ concurrency {lv.concurrency}"
            if not sd.available:
                out.append(f"{where}: no SD metrics: {sd.reason}")
                continue
            if sd.agreement:
                out.append(f"{where}: {sd.agreement}")
            if sd.counters_invalid_reason:
                out.append(f"{where}: counter deltas not used: {sd.counters_invalid_reason}")
            if sd.foreign_traffic:
                out.append(f"{where}: {sd.foreign_traffic}")
            if lv.latency.errors_by_kind:
                errs = ", ".join(f"{k} {v}" for k, v in sorted(lv.latency.errors_by_kind.items()))
                out.append(f"{where}: failed requests: {errs}")
    for s in summary.speedup:
        if s.note:
            out.append(f"speedup @ concurrency {s.concurrency}: {s.note}")
    if summary.status != "complete":
        out.append(f"run {summary.status}: {summary.incomplete_reason or ''}")
    return out


def render(summary: RunSummary, console: Console | None = None) -> None:
    console = console or Console()
    parts: list[object] = []
    tables = (sd_table(summary), category_table(summary), throughput_table(summary), latency_table(summary),
              speedup_table(summary), workload_bias_table(summary))
    for table in tables:
        if table is not None:
            parts.append(table)
    console.print(Group(*parts))  # type: ignore[arg-type]
    for line in notes(summary):
        console.print(Text("• " + line, style="yellow" if "DIFFER" in line or "not" in line else "dim"))
