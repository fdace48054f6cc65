"""Tables of what analysis decided: where speculation stops paying and what to run at each point, the
head-to-head comparisons behind each choice, how many rounds each point took, and the verified table."""

from __future__ import annotations

from specmeter.report.grid import Grid, fmt, grid, point_label, ratio_text
from specmeter.schemas.analysis import HeadToHead, VerifyPoint
from specmeter.schemas.results import RunSummary


def decision_table(summary: RunSummary) -> Grid | None:
    a = summary.analysis
    if not a.crossovers and not a.choices:
        return None
    t = grid("Where speculation stops paying, and what to run at each point", ("what", "answer"))
    for c in a.crossovers:
        at = "" if c.input_len is None else f", {c.input_len} input tokens"
        t.add_row(f"crossover {c.config_id} ({c.axis}{at})", c.note)
    if a.crossovers and a.choices:
        t.add_section()
    for ch in a.choices:
        why = "head to head below" if ch.evidence else ch.reason  # runs of 0.1 kept only the reason
        node = f" among {ch.node_group}'s configurations (one node)" if ch.node_group else ""
        t.add_row(f"best at {point_label(summary, ch.point_id)}{node}", f"{ch.best_config_id} (K={ch.best_k}): {why}")
    return t


def crossover_lines(summary: RunSummary) -> list[str]:
    """Where each configuration stops paying, one line each (the decision table's first part)."""
    return [f"crossover ({c.axis}" + ("" if c.input_len is None else f", {c.input_len} input tokens") + f"): {c.note}"
            for c in summary.analysis.crossovers]


def head_to_head_table(summary: RunSummary) -> Grid | None:
    """The comparisons behind each choice: from the cheapest up, each against the choice so far."""
    rows = [(ch, h) for ch in summary.analysis.choices for h in ch.evidence]
    if not rows:
        return None
    t = grid("Head to head: each costlier configuration against the choice so far, on the requests both ran "
             "(it replaces the choice only when the whole interval clears 1 + min gain; a tie, the interval ending "
             "inside the indifference zone, keeps the choice)",
             ("point", "challenger", "against", "ratio [interval]", "needs", "outcome", "chosen"),
             left={"point", "challenger", "against", "outcome", "chosen"})
    for ch, h in rows:
        ratio = fmt(h.ratio.value, "{:.3f}x")
        if h.low is not None and h.high is not None:
            ratio += f" [{h.low:.3f}, {h.high:.3f}]"
        outcome = f"tie ({h.at_most()})" if h.outcome == "tie" else h.outcome.replace("_", " ")
        t.add_row(point_label(summary, ch.point_id), h.config_id, h.against, ratio, f"> {h.threshold:.2f}",
                  outcome, ch.best_config_id if h is ch.evidence[-1] else "")
    return t


def verification_table(summary: RunSummary) -> Grid | None:
    rows = summary.analysis.verification
    if not rows and not summary.plan.carried:
        return None
    t = grid("The dynamic config, run: against the baseline and the sweep's best static config at each point, and "
             "the engine's own adaptive mode where the sweep measured it (same requests, interleaved)",
             ("point", "engine batch", "table K", "drafted K (steps)", "followed", "vs baseline tok/s",
              "vs baseline TPOT", "best static", "vs static tok/s", "vs static TPOT", "the table"),
             left={"point", "drafted K (steps)", "followed", "best static", "the table"}, no_wrap={"best static"})
    for v in rows:
        d = v.drafted
        drafted = " ".join(f"K{k}:{n}" for k, n in d.drafted.items()) or "-"
        followed = "-" if d.followed is None else ("yes" if d.followed else "NO: " + d.note)
        base, static = v.vs_baseline, v.vs_static
        expected = "-" if d.expected_k is None else str(d.expected_k)
        t.add_row(point_label(summary, v.point_id), fmt(d.engine_batch, "{:.1f}"), expected, drafted,
                  followed, ratio_text(base.output_throughput) if base else "-", ratio_text(base.tpot) if base else "-",
                  v.static_id or "-", ratio_text(static.output_throughput) if static else "-",
                  ratio_text(static.tpot) if static else "-", _judgement(v))
    for point_id, why in summary.plan.carried.items():  # not run again: the sweep's evidence stands there
        t.add_row(point_label(summary, point_id), *["-"] * 9, f"holds: not run again, {why}")
    return t


def _judgement(v: VerifyPoint) -> str:
    """Does the table hold at this point, head to head against the best static K and the engine's own adaptive
    speculation (and does acceptance recover after its K = 0 steps)?"""
    verdicts = [_head_to_head(v), *([_against_adaptive(v.vs_adaptive)] if v.vs_adaptive is not None else [])]
    if v.recovery is not None and v.recovery.recovered is False:
        verdicts.append(v.recovery.note)
    return "; ".join(verdicts)


def _head_to_head(v: VerifyPoint) -> str:
    if v.challenge is None:
        return "-"
    if v.challenge.outcome == "beats":
        if v.drafted.expected_k is not None:
            return f"WRONG: K={v.static_k} beats K={v.drafted.expected_k}"
        return "holds (same K wins: the dynamic mode's cost)"
    return _holds(v.challenge)


def _against_adaptive(h: HeadToHead) -> str:
    if h.outcome == "beats":
        return f"WRONG: the engine's adaptive mode ({h.config_id}) beats it"
    return f"{_holds(h)} against the engine's adaptive mode ({h.config_id})"


def _holds(h: HeadToHead) -> str:
    if h.outcome == "tie":
        return f"holds (a tie, {h.at_most()})"
    return "holds" if h.outcome == "does_not_beat" else "holds (not settled)"


def sampling_table(summary: RunSummary) -> Grid | None:
    """Per point: the rounds and requests it took, the confidence its decisions read, and why it stopped."""
    rows = [s for s in summary.sampling if s.precision == "adaptive"]
    if not rows:
        return None
    t = grid("Sequential sampling: rounds until every decision at the point settled (alpha spent over the looks), "
             "no open one was likely to end as a win, or as one beyond the indifference zone (futile), or a budget "
             "ran out",
             ("point", "rounds", "requests / config", "confidence", "stopped", "rested", "why"),
             left={"point", "stopped", "rested", "why"})
    for s in rows:
        rested = ", ".join(f"{cid} from round {r}" for cid, r in s.rested_from().items()) or "-"
        aside = s.looks[-1].disturbed if s.looks else []
        why = (s.why or "-") + (f" (set aside, other work disturbed them: {'; '.join(aside)})" if aside else "")
        t.add_row(point_label(summary, s.point_id), str(s.rounds), str(s.requests), f"{s.confidence:.2%}",
                  s.stopped or "running", rested, why)
    return t
