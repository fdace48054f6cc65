"""The report's tables as plain data (title, columns, rows of text), built from the stored results and the
stored decisions of analysis: every output (console, HTML) draws the same tables and none decides anything."""

from __future__ import annotations

from collections.abc import Iterator

from specmeter.analysis.drafter_weights import untrained_drafters
from specmeter.data.random_tokens import SYNTHETIC_BIAS
from specmeter.load.turns import runs_whole
from specmeter.report.decisions import (
    decision_table,
    head_to_head_table,
    sampling_table,
    verification_table,
)
from specmeter.report.drafters import drafter_table
from specmeter.report.grid import VERDICTS, Grid, Note, fmt, grid, ms, point_label, ratio_text
from specmeter.report.host import host_line
from specmeter.report.jobs import jobs_notes, jobs_table
from specmeter.report.phases import phase_table
from specmeter.report.placement import placement_notes, placement_table
from specmeter.report.pooled import pooled_sd as pooled_sd  # re-exported: the plots read it from here
from specmeter.report.ramp import ramp_notes, ramp_tables
from specmeter.report.replicas import replica_table
from specmeter.report.search import search_tables
from specmeter.report.traffic import batch_time_table, length_table
from specmeter.report.trees import NOT_A_CHAIN, ar_text, tree_notes, tree_table
from specmeter.schemas.analysis import Speedup
from specmeter.schemas.metrics import Goodput
from specmeter.schemas.planner import Calibration
from specmeter.schemas.results import ConfigResult, PointResult, RunSummary


def _rates(values: list[float], tree: bool = False) -> str:
    """Per-position rates; a tree has none (report/trees.py: what it is read by instead)."""
    if tree:
        return NOT_A_CHAIN
    return " ".join(f"{v:.2f}" for v in values) if values else "-"


def _rows(summary: RunSummary) -> Iterator[tuple[ConfigResult, PointResult]]:
    """Every measured (configuration, point, repeat), in plan order of points."""
    order = {p.id: i for i, p in enumerate(summary.plan.points)}
    for config in summary.configs:
        for pr in sorted(config.points, key=lambda p: (order.get(p.point_id, 0), p.repeat)):
            yield config, pr


def _repeat(summary: RunSummary, pr: PointResult) -> str:
    """Which repeat (or adaptive round) of its point a row is, where the point ran more than one."""
    sampled = summary.sampled(pr.point_id)
    several = summary.plan.repeats > 1 or (sampled is not None and sampled.rounds > 1)
    return f" #{pr.repeat + 1}" if several else ""


def plan_table(summary: RunSummary) -> Grid:
    plan = summary.plan
    points = ", ".join(p.label() for p in plan.points)
    if plan.load.search:
        points += " (" + ", ".join(f"{s.key} chosen by a load search" for s in plan.load.search) + ")"
    turns = any(all(runs_whole(p, c.engine.max_num_seqs) for c in plan.configs) for p in plan.points)
    interleaved = "; interleaved" + (" (in turns, a wave of requests at a time)" if turns else "")
    extra = (f"; {plan.repeats} repeats" if plan.repeats > 1 else "") + (interleaved if plan.interleave else "")
    located = any(c.ran_on is not None for c in summary.configs)  # Slurm: name the node of every number
    t = grid(f"Plan ({plan.kind}): {points}{extra}",
             ("configuration", "role", "speculation", "workload", "server start s", "KV cache tokens", "status",
              *(("ran on",) if located else ())))
    for cfg in plan.configs:
        res = summary.config(cfg.id)
        status = "not run"
        if res is not None:
            status = "server failed" if res.server_error else f"{len(res.points)} point(s)"
        where = (res.ran_on.label() if res is not None and res.ran_on is not None else "-",) if located else ()
        t.add_row(cfg.id, cfg.role.value, cfg.label, cfg.workload, fmt(res.startup_s if res else None, "{:.0f}"),
                  "-" if res is None or res.kv_capacity_tokens is None else f"{res.kv_capacity_tokens:,}", status,
                  *where)
    return t


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
            t.add_row(config.config_id, point.label(), fmt(c.acceptance_length), ar_text(c),
                      _rates(c.per_position_rate, c.tree), _rates(c.conditional_rate, c.tree), steps, source, check)
    return t if t.row_count else None


def _yes_no(value: bool | None) -> str:
    return "-" if value is None else "yes" if value else "NO"


def synthetic_table(summary: RunSummary) -> Grid | None:
    """Synthetic acceptance: the rates set, what the engine's counts should show once the steps that drafted
    fewer positions are accounted for, and what they show (analysis of summarize; nothing recomputed here)."""
    t = grid("Synthetic acceptance, measured against set (per step over every step; the expected rates account "
             "for steps that drafted fewer than K; 99% over all positions and AL)",
             ("configuration", "point", "set a_i", "drafted share", "expected a_i", "measured a_i", "AL set",
              "AL expected", "AL measured", "steps", "within sampling error"),
             left={"configuration", "point", "set a_i", "drafted share", "expected a_i", "measured a_i",
                   "within sampling error"})
    for config, pr in _rows(summary):
        check = pr.sd.synthetic
        if check is None:
            continue
        pos = check.positions
        within = _yes_no(check.within)
        if check.all_accepted is not None:
            within += f"; every draft accepted: {_yes_no(check.all_accepted)}"
        t.add_row(config.config_id, point_label(summary, pr.point_id) + _repeat(summary, pr),
                  _rates([p.set_rate for p in pos]), _rates([p.drafted_share for p in pos]),
                  _rates([p.expected for p in pos]), _rates([p.measured for p in pos]), fmt(check.set_al),
                  fmt(check.expected_al), f"{check.measured_al:.2f} (z {fmt(check.al_z)})", str(check.steps), within)
    return t if t.row_count else None


def category_tables(summary: RunSummary) -> list[Grid]:
    """Per-category acceptance of each configuration, at its first point that has it (acceptance barely moves
    with load): every drafter's, so the categories where one drafter falls behind another show."""
    out: list[Grid] = []
    for config in summary.configs:
        pr = next((pr for c, pr in _rows(summary) if c is config and pr.categories is not None), None)
        if pr is None or pr.categories is None:
            continue
        cb = pr.categories
        where = point_label(summary, pr.point_id)
        t = grid(f"Acceptance per category ({config.config_id}, {where}, per-request stats)",
                 ("category", "requests", "AL steps", "AL req-mean", "AR", "per-position a_i", "conditional c_i"),
                 left={"category", "per-position a_i", "conditional c_i"})
        tree = cb.pooled.counts.tree
        for row in [*cb.categories, None, cb.pooled]:
            if row is None:
                t.add_section()
                t.add_row("macro avg", "-", fmt(cb.macro_al), "-", fmt(cb.macro_ar), "", "")
                continue
            t.add_row("pooled" if row is cb.pooled else row.category, str(row.requests), fmt(row.al_step_weighted),
                      fmt(row.al_request_mean), ar_text(row.counts), _rates(row.per_position_rate, tree),
                      _rates(row.conditional_rate, tree))
        out.append(t)
    return out


def throughput_table(summary: RunSummary) -> Grid:
    slo = summary.plan.load.slo
    good = slo is not None and any(pr.goodput is not None for _, pr in _rows(summary))
    title = "Throughput (warmup excluded; steady: over the window the load was fully applied)"
    columns = ["configuration", "point", "ok/sent", "out tok/s", "steady tok/s", "steady share", "engine batch",
               "req/s", "tok/chunk", "wall s"]
    if good and slo is not None:
        title += f"; goodput: requests/s that met {slo.label()} (95% CI)"
        columns[8:8] = ["goodput req/s", "met SLO"]
    t = grid(title, columns, left={"configuration", "point"})
    for config, pr in _rows(summary):
        la, st, rb = pr.latency, pr.steady, pr.running_batch
        cells = [
            config.config_id, point_label(summary, pr.point_id) + _repeat(summary, pr),
            f"{la.num_ok}/{la.num_requests}",
            fmt(la.output_tokens_per_s, "{:.1f}"), fmt(st.output_tokens_per_s if st else None, "{:.1f}"),
            fmt(st.share if st else None, "{:.0%}"), fmt(rb.steady_mean if rb and rb.steady_mean is not None
                                                        else rb.mean if rb else None, "{:.1f}"),
            fmt(la.requests_per_s), fmt(la.tokens_per_chunk), fmt(la.wall_s, "{:.1f}"),
        ]
        if good:
            cells[8:8] = [goodput_text(pr.goodput), fmt(pr.goodput.share if pr.goodput else None, "{:.0%}")]
        t.add_row(*cells)
    return t


def goodput_text(g: Goodput | None) -> str:
    """Requests/s that met the SLO, with its interval."""
    if g is None or g.requests_per_s is None:
        return "-"
    if g.ci95_low is None or g.ci95_high is None:
        return f"{g.requests_per_s:.2f}"
    return f"{g.requests_per_s:.2f} [{g.ci95_low:.2f}, {g.ci95_high:.2f}]"


def latency_table(summary: RunSummary) -> Grid:
    t = grid("Latency, ms (ICL: gap between chunks; ITL: gap per token in the chunk)",
             ("configuration", "point", "TTFT p50", "TTFT p99", "TPOT mean", "TPOT p50", "TPOT p99", "ICL p50",
              "ITL p50", "E2E p50", "E2E p99"), left={"configuration", "point"})
    for config, pr in _rows(summary):
        la = pr.latency
        t.add_row(
            config.config_id, point_label(summary, pr.point_id) + _repeat(summary, pr), ms(la.ttft_s.p50),
            ms(la.ttft_s.p99), ms(la.tpot_s.mean), ms(la.tpot_s.p50), ms(la.tpot_s.p99),
            ms(la.inter_chunk_s.p50), ms(la.itl_per_token_s.p50), ms(la.e2e_s.p50), ms(la.e2e_s.p99),
        )
    return t


def _apart(summary: RunSummary, s: Speedup) -> str:
    """How far apart in time the two sides were measured (first repeat): drift hides in that gap."""
    cand, base = summary.config(s.config_id), summary.config(s.baseline_id)
    a = cand.point(s.point_id) if cand else None
    b = base.point(s.point_id) if base else None
    if a is None or b is None or a.started_s is None or b.started_s is None:
        return "-"
    return f"{abs(a.started_s - b.started_s) / 60:.1f} min"


def _speedups(summary: RunSummary) -> tuple[list[Speedup], str, set[str]] | None:
    """What both speedup tables read: the stored speedups, the repeats' note for the title, and the configurations
    with synthetic acceptance (their verdicts say so); None where there is no speedup."""
    if not summary.analysis.speedups:
        return None
    reps = " (median ± MAD over repeats)" if summary.plan.repeats > 1 else ""
    return summary.analysis.speedups, reps, {c.id for c in summary.plan.configs if c.spec.synthetic}


def speedup_table(summary: RunSummary) -> Grid | None:
    found = _speedups(summary)
    if found is None:
        return None
    speedups, reps, synthetic = found
    t = grid(f"Speedup over the baseline, same requests (95% paired-bootstrap CI{reps})",
             ("configuration", "point", "output tok/s", "TPOT", "TTFT", "E2E", "sides apart", "verdict"),
             left={"configuration", "point", "verdict"})
    for s in speedups:
        t.add_row(s.config_id, point_label(summary, s.point_id), ratio_text(s.output_throughput), ratio_text(s.tpot),
                  ratio_text(s.ttft), ratio_text(s.e2e), _apart(summary, s), _verdict(summary, s, synthetic))
    return t


def _verdict(summary: RunSummary, s: Speedup, synthetic: set[str]) -> str:
    """The stored verdict in words, with what qualifies it."""
    verdict = VERDICTS.get(s.verdict or "", "-")
    if s.config_id in synthetic:
        verdict += " (synthetic acceptance: a measurement, not deployable)"
    if s.decided_on == "tpot":
        verdict += " (on TPOT)"
    if not s.same_work:
        verdict += " (unequal work!)"
    if any(g.fills and {g.config_id, g.against} == {s.config_id, s.baseline_id} for g in summary.analysis.capacity):
        verdict += " (unequal KV capacity!)"
    return verdict


def pays_table(summary: RunSummary) -> Grid | None:
    """Where speculation pays, in brief: per configuration and point the speedup its verdict was decided on
    (output throughput, or TPOT where the verdict says so), with its interval; the speedup table holds every
    metric."""
    found = _speedups(summary)
    if found is None:
        return None
    speedups, reps, synthetic = found
    t = grid(f"Where speculation pays: speedup over the baseline, same requests (95% CI{reps})",
             ("configuration", "point", "speedup", "verdict"), right={"speedup"})
    for s in speedups:
        ratio = s.tpot if s.decided_on == "tpot" else s.output_throughput
        t.add_row(s.config_id, point_label(summary, s.point_id), ratio_text(ratio), _verdict(summary, s, synthetic))
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
        t.add_row(point_label(summary, pr.point_id), fmt(a.acceptance_length if a else None),
                  fmt(b.acceptance_length if b else None), fmt(pr.latency.output_tokens_per_s, "{:.1f}"),
                  fmt(rp.latency.output_tokens_per_s, "{:.1f}"), fmt(s_real, "{:.2f}x"), fmt(s_rnd, "{:.2f}x"), bias)
    return t


SD_COUNTS = "SD counts"  # the check of per-request SD sums against the engine's counters, at each point


def notes(summary: RunSummary) -> list[Note]:
    """Everything the run carries that a reader must know to trust its numbers: failures and disagreements
    are warnings; how a number was produced is information."""
    out: list[Note] = []

    def at(config: ConfigResult, pr: PointResult, body: str, warn: bool = False, check: str | None = None) -> Note:
        """A note about one point (and repeat) of a configuration."""
        point = point_label(summary, pr.point_id) + _repeat(summary, pr)
        return Note(f"{config.config_id} @ {point}: {body}", warn, config.config_id, point, check)

    for config in summary.configs:
        if config.server_error:
            out.append(Note(f"{config.config_id}: server failed to start: {config.server_error}", warn=True))
    out += [Note(line, warn=True) for line in summary.analysis.offload]
    out += [Note(line, warn=True) for line in untrained_drafters(summary)]
    if (host := host_line(summary)) is not None:
        out.append(Note(host[0], warn=host[1]))
    if any(c.workload == "random" for c in summary.plan.configs):
        out.append(Note(SYNTHETIC_BIAS, warn=True))
    for cfg in summary.plan.configs:
        if cfg.spec.synthetic:
            out.append(Note(f"{cfg.id}: synthetic acceptance ({cfg.label}): the engine accepts drafts at random with "
                            "set rates instead of verifying them (benchmarking only: outputs are not valid text, "
                            "every cost is real); never chosen, recommended or checked for losslessness"))
    for config, pr in _rows(summary):
        check = pr.sd.synthetic
        if check is not None and (check.note or check.within is False):
            what = "outside sampling error" if check.within is False else "measured against set"
            out.append(at(config, pr, f"synthetic acceptance {what}" + (f": {check.note}" if check.note else ""),
                          warn=check.within is False))
    missing: dict[str, str] = {}
    first_stall: dict[str, PointResult] = {}  # configuration -> the first point, in run order, where it drafted nothing
    for config, pr in _rows(summary):
        earlier = first_stall.get(config.config_id)
        if pr.sd.stalled and (earlier is None or (pr.started_s or 0.0) < (earlier.started_s or 0.0)):
            first_stall[config.config_id] = pr
    for config, pr in _rows(summary):
        sd = pr.sd
        if config.role.value != "baseline":
            missing.update(sd.not_available)
        if first_stall.get(config.config_id) is pr:
            out.append(at(config, pr, "speculation stopped here (and at every later point without drafts): "
                          f"{sd.reason}; no acceptance is reported for it", warn=True))
        elif not sd.available and not sd.stalled:
            out.append(at(config, pr, f"no SD metrics: {sd.reason}", warn=config.role.value != "baseline"))
        else:
            if sd.agreement:
                out.append(at(config, pr, sd.agreement, warn=sd.agree is False, check=SD_COUNTS))
            if sd.counters_invalid_reason:
                out.append(at(config, pr, f"counter deltas not used: {sd.counters_invalid_reason}", warn=True))
            if sd.foreign_traffic:
                out.append(at(config, pr, sd.foreign_traffic, warn=True))
        if pr.resumed:
            out.append(at(config, pr, "finished by resume on a new server: its wall time and throughput span two "
                          "servers", warn=True))
        elif pr.steady is None:
            out.append(at(config, pr, "the load never reached steady state (fewer requests than slots?)", warn=True))
        if pr.latency.errors_by_kind:
            errs = ", ".join(f"{k} {v}" for k, v in sorted(pr.latency.errors_by_kind.items()))
            out.append(at(config, pr, f"failed requests: {errs}", warn=True))
    for what, why in missing.items():
        out.append(Note(f"{what}: not available from this engine ({why})"))
    if (late := schedule_note(summary)) is not None:
        out.append(late)
    for s in summary.analysis.speedups:
        if s.note:
            what, where = f"speedup {s.config_id}", point_label(summary, s.point_id)
            out.append(Note(f"{what} @ {where}: {s.note}", not s.same_work, what, where))
    for c in summary.analysis.lossless:
        if c.matched < c.compared:
            out.append(Note(f"lossless check: {c.compared - c.matched} of {c.compared} outputs of {c.config_id} differ "
                            f"from the baseline's at temperature 0", warn=True))
    if summary.analysis.lossless_note:
        out.append(Note(summary.analysis.lossless_note, warn=True))
    out += [Note(f"KV capacity: {g.note}", warn=g.fills) for g in summary.analysis.capacity]
    if summary.plan.placement is not None and summary.plan.placement.mode != "cpu":
        out += placement_notes(summary.plan.placement, summary.plan.configs[0].engine.kind)
    out += tree_notes(summary)
    out += ramp_notes(summary)
    out += jobs_notes(summary)
    if summary.status != "complete":
        out.append(Note(f"run {summary.status}: {summary.incomplete_reason or ''}", warn=True))
    return out


def schedule_note(summary: RunSummary) -> Note | None:
    """How well the scheduled points (request rates, trace replays) kept their schedule, at the worst of them: a
    load sent late is another load than the one planned (None: nothing was scheduled)."""
    late = [(config, pr, err) for config, pr in _rows(summary)
            if (err := pr.schedule_error) is not None and err.p50 is not None and err.p99 is not None]
    if not late:
        return None
    config, worst, err = max(late, key=lambda row: row[2].p99 or 0.0)
    p50 = max(e.p50 or 0.0 for _, _, e in late)
    where = point_label(summary, worst.point_id) + _repeat(summary, worst)
    return Note(f"schedule error (each send after its scheduled time): p50 at most {p50 * 1e3:.1f} ms, p99 at most "
                f"{(err.p99 or 0.0) * 1e3:.1f} ms over {len(late)} scheduled points (the worst p99: "
                f"{config.config_id} @ {where})")


def summary_tables(summary: RunSummary, calibration: Calibration | None = None) -> list[Grid]:
    """The run's tables in reading order: what ran, acceptance, the drafters side by side (with what the step-cost
    model `calibration` fitted each costs), speed, the verdicts, the checks."""
    placement = summary.plan.placement
    placed = None if placement is None else placement_table(summary.plan.configs, placement)
    tables = (plan_table(summary), placed, jobs_table(summary), sd_table(summary), tree_table(summary),
              synthetic_table(summary), drafter_table(summary, calibration), *category_tables(summary),
              length_table(summary), phase_table(summary), throughput_table(summary), batch_time_table(summary),
              replica_table(summary), latency_table(summary), speedup_table(summary), decision_table(summary),
              head_to_head_table(summary),
              *search_tables(summary), *ramp_tables(summary), sampling_table(summary), verification_table(summary),
              lossless_table(summary), workload_bias_table(summary))
    return [t for t in tables if t is not None]
