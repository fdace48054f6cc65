"""A recommendation as plain data for every output: the evidence behind each range as a table, then the
lines that say what to deploy (the ready flags of the engine the sweep ran first)."""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass

from specmeter.report.grid import Grid, grid
from specmeter.rundir.answer import ANSWER_DIR, Answer, Round
from specmeter.schemas.proposal import Contest, ProposedK
from specmeter.schemas.recommend import (
    BatchShare,
    DeployConfig,
    DrafterRecommendation,
    KRange,
    Recommendation,
    Score,
    Segment,
    TraceGain,
)

BASIS = {"measured": "measured", "interpolated": "interpolated", "below_measured": "below the smallest measured",
         "unmeasured": "not measured: no claim", "predicted": "predicted (step-cost model)"}
OBJECTIVES = {"throughput": "output throughput (TPOT at request-rate points)", "tpot": "TPOT",
              "goodput": "goodput (requests/s meeting the SLO)"}


@dataclass(frozen=True)
class Line:
    """One line of the recommendation, as displayed; `config`: the flag in it that a reader copies as is;
    `emphasis`: the best drafter's."""

    text: str
    emphasis: bool = False
    config: str | None = None
    dim: bool = False


def _score(s: Score, goodput: bool) -> str:
    if s.value is None:
        return "-"
    unit = " req/s" if goodput else "x"
    text = f"{s.value:.2f}{unit}"
    if s.low is not None and s.high is not None:
        text += f" [{s.low:.2f}, {s.high:.2f}]"
    return text


def _span(seg: Segment | KRange | BatchShare) -> str:
    return str(seg.start) if seg.start == seg.end else f"{seg.start}-{seg.end}"


# Where a range's K comes from, said of the batch sizes it covers: "measured at 4", "interpolated at 3, 5-7".
_FROM = {"measured": "measured at", "interpolated": "interpolated at", "below_measured": "below the smallest "
         "measured batch at", "predicted": "predicted by the step-cost model at"}


def range_text(r: KRange, segments: list[Segment]) -> str:
    """One entry of the table in words: its batch sizes, its K, and where that K comes from at which of them,
    e.g. 'batch 17-64: drafting off, K=0 (not measured beyond 16: no claim)'."""
    inside = [s for s in segments if r.start <= s.start and s.end <= r.end]
    parts: list[str] = []
    for basis, what in _FROM.items():
        spans: list[list[int]] = []
        for seg in (s for s in inside if s.basis == basis):
            if spans and spans[-1][1] + 1 == seg.start:  # adjacent stretches read as one
                spans[-1][1] = seg.end
            else:
                spans.append([seg.start, seg.end])
        if spans:
            parts.append(f"{what} " + ", ".join(str(a) if a == b else f"{a}-{b}" for a, b in spans))
    beyond = next((s for s in inside if s.basis == "unmeasured"), None)
    if beyond is not None:
        parts.append("not measured" + (f" beyond {beyond.start - 1}" if beyond.start > 1 else "") + ": no claim")
    if not parts:  # a range whose segments are not stored (an edited file): its bases alone
        parts = [BASIS[b] for b in r.bases]
    measured = [s for s in inside if s.basis == "measured"]
    starts = max((s.instances for s in measured), default=1)
    beaten = [line for s in measured for line in s.beaten_on]
    if beaten:
        parts.append(f"not on every server start: {beaten[0]}" + (f" (+{len(beaten) - 1} more)" if beaten[1:] else ""))
    elif starts > 1:
        parts.append(f"held on each of {starts} server starts")
    k = f"K={r.k}" if r.k else "drafting off, K=0"
    return f"batch {_span(r)}: {k} ({'; '.join(parts)})"


def trace_text(g: TraceGain) -> str:
    """One trace point's answer in a line: 'On this trace at t1x (time at batch 1-3 (K=4): 70%, ...), the table
    buys 1.23x [1.15, 1.31] over no speculation (...)', or why that is not known."""
    if g.gain is None:
        return f"On this trace at {g.point_id}: {g.reason or 'not known'}"
    time = ", ".join(f"{_span(b)} (K={b.k}): {b.share:.0%}" for b in g.time)
    idle = f"; idle {g.idle_share:.0%} not counted" if g.idle_share else ""
    bounds = f" [{g.low:.2f}, {g.high:.2f}]" if g.low is not None and g.high is not None else ""
    measured = f"; speedups measured at the batch size itself for {g.measured_share:.0%} of that time" \
        if g.measured_share is not None and g.measured_share < 1 else ""
    return (f"On this trace at {g.point_id} (time at batch {time}{idle}), the table buys {g.gain:.2f}x{bounds} over "
            f"no speculation ({g.weighed_by}'s time at each batch size divided by its speedup; bounds with every "
            f"range at its bound at once, conservative{measured})")


def heading(rec: Recommendation) -> str:
    return (f"Recommendation from {rec.source_run} ({OBJECTIVES[rec.objective]}"
            + (f", SLO {rec.slo.label()}" if rec.slo else "") + f"; max_num_seqs {rec.max_num_seqs}, from "
            f"{rec.max_num_seqs_source.split(';')[0]})")


def _contest(c: Contest, k: int) -> str:
    """What the model predicted at one stretch: 'at c1 (batch 1.0): K=3 1.46x against K=4's 1.38x (+5.8%)'."""
    theirs = f"K={c.incumbent_k}'s" if c.incumbent_k else "speculation off's"
    through = f" on the model's scale through {c.anchor}" if c.anchor else ""
    return (f"at {'/'.join(c.point_ids)} (batch {c.batch:.1f}): K={k} {c.predicted:.2f}x against {theirs} "
            f"{c.predicted_incumbent:.2f}x{through} ({c.edge - 1:+.1%})")


def predicted_text(p: ProposedK) -> str:
    """A proposal before it is measured: the drafter, K, and where the model predicts it wins by how much."""
    return f"{p.drafter} K={p.k} ({p.config_id}), predicted " + "; ".join(_contest(c, p.k) for c in p.contests)


def proposal_lines(rec: Recommendation, *, full: bool = True) -> list[Line]:
    """Each K the step-cost model proposed: what it predicted and what its measurement said where it could win
    (won: in the table; lost; tied; unsettled); `full` adds the head-to-head comparisons behind each outcome."""
    out: list[Line] = []
    for p in rec.proposed:
        where = f", measured in {p.run}" if p.run else ""
        said = "; ".join(f"{c.outcome or 'not decided'} {_contest(c, p.k)}" for c in p.contests)
        out.append(Line(f"proposed by the step-cost model: {p.drafter} K={p.k} ({p.config_id}{where}): {said}"))
        if full:
            out += [Line(f"  {'/'.join(c.point_ids)}: {h.summary()}", dim=True) for c in p.contests
                    for h in c.evidence]
    return out


def evidence_table(rec: Recommendation, d: DrafterRecommendation) -> Grid:
    goodput = rec.objective == "goodput"
    proposed = {p.config_id for p in rec.proposed}
    t = grid(f"Evidence for {d.drafter}: each batch-size stretch and where its K comes from "
             f"({OBJECTIVES[rec.objective]}; intervals cover repeats' spread)",
             ("batch sizes", "K", "basis", "points (engine batch)", "contenders", "why"))
    for seg in d.segments:
        t.add_row(_span(seg), str(seg.k), BASIS[seg.basis],
                  ", ".join(f"{p}" for p in seg.point_ids) + " (" + ", ".join(f"{b:.1f}" for b in seg.engine_batch)
                  + ")",
                  "\n".join(f"{s.config_id}{' (proposed)' if s.config_id in proposed else ''}: "
                            f"{_score(s, goodput)}" for s in seg.scores) or "-", seg.reason)
    return t


def _deploy(cfg: DeployConfig, *, emphasis: bool = False, what: str | None = None) -> list[Line]:
    """One engine config: its flags as one shell line (vLLM's JSON quoted), the file it names, its notes."""
    flags = shlex.join(cfg.flags)
    what = what or f"{cfg.engine} " + ("dynamic K" if cfg.dynamic else f"static K={cfg.k}")
    out = [Line(f"  {what}: {flags}", emphasis=emphasis, config=flags)]
    if cfg.config_file is not None and cfg.config is not None:
        body = json.dumps(cfg.config)  # JSON is YAML too: one line that pastes into either
        out.append(Line(f"  {cfg.config_file}: {body}", config=body))
    out.extend(Line(f"    {note}", dim=True) for note in cfg.notes)
    return out


def status(rec: Recommendation) -> str:
    """Where this table stands: verified and held, contradicted, or not run; and what it corrected."""
    where = f" ({rec.verified_in})" if rec.verified_in else ""
    state = {"held": f"verified: the table held at every verified point{where}",
             "disagreed": f"verified: a static K beat this table{where}; see the corrected recommendation",
             "kept": f"verified: a static K beat this table at a point{where}, yet decided again on the pooled "
                     "evidence of sweep and verification the table stands",
             "ignored": f"verification FAILED: the engine ignored this table and drafted its largest K everywhere"
                        f"{where}",
             "collapsed": f"verification FAILED: acceptance did not recover after this table's K = 0 steps{where}",
             "not run": "not verified yet (`specmeter verify` runs it)"}[rec.verification]
    if rec.corrects is not None:
        state = (f"corrected in round {rec.round} from {rec.corrects} ({'; '.join(rec.changes) or 'no change'}); "
                 + state)
    elif rec.round > 1:
        state = f"round {rec.round} ({'; '.join(rec.changes) or 'decided again'}); " + state
    else:
        state = f"round 1, from the sweep; {state}"
    return f"status: {state}"


def _entries(rec: Recommendation) -> str:
    best = rec.best
    spec = best.spec if best is not None else None
    table = spec.num_speculative_tokens_per_batch_size if spec is not None else None
    if table:
        return json.dumps(table)
    return "speculation off" if best is None or best.static_k == 0 else f"static K={best.static_k}"


def round_lines(answer: Answer, shown: Round | None = None) -> list[Line]:
    """Which round the answer is, then every round as one line, newest first: the history behind the answer."""
    latest = answer.latest
    head = shown or latest
    what = "the answer" if head.number == latest.number else f"round {head.number}, not the answer (round " \
        f"{latest.number} is)"
    out = [Line(f"round {head.number} of {len(answer.rounds)}: {what}; verification {head.verification}",
                emphasis=True)]
    if len(answer.rounds) > 1:
        out.append(Line("rounds (newest first; earlier ones are history, kept in "
                        f"{ANSWER_DIR}/r<n>-decided.json and r<n>-verified.json):"))
        for r in reversed(answer.rounds):
            rec = r.recommendation
            where = f" in {rec.verified_in}" if rec.verified_in else ""
            why = f"; {rec.changes[0]}" if rec.changes else ""
            out.append(Line(f"  round {r.number}: {_entries(rec)}, verification {r.verification}{where}{why}",
                            dim=r.number != latest.number))
    note = answer.note()
    if note is not None:
        out.append(Line(f"note: {note}", dim=True))
    return out


def answer_document(answer: Answer, shown: Round | None = None) -> str:
    """The answer (or the round asked for) as recommendation.json holds it, with `answer_round`, `rounds` and the
    earlier rounds' states under `history`, newest first (`migrated`: how a run of the layout before rounds was
    read)."""
    head = shown or answer.latest
    doc = json.loads(head.recommendation.model_dump_json())
    doc["answer_round"] = answer.latest.number
    doc["rounds"] = len(answer.rounds)
    doc["history"] = [{"round": r.number, "stage": r.stage, "file": str(r.path), "verification": r.verification,
                       "table": _entries(r.recommendation), "changes": r.recommendation.changes}
                      for r in reversed(answer.rounds) if r.number != head.number]
    doc["migrated"] = answer.note()  # read from the layout before rounds (None: it was not)
    return json.dumps(doc, indent=2)


def deploy_lines(rec: Recommendation, *, full: bool = True) -> list[Line]:
    """Per drafter, best first: the table, the config to launch on the engine the sweep ran (the table where the
    engine takes one, else the static K), the static fallback, then the notes. Not `full`: the best drafter's
    table and configs alone (the answer a person copies; why, the alternatives and the notes are the rest)."""
    best = rec.best
    out: list[Line] = [Line(status(rec), emphasis=True)]
    if rec.runs == 1:  # what the answer's intervals hold, and what they do not
        held = (f"its requests, rounds and {rec.instances} server starts per configuration, not another machine "
                "state or day" if rec.instances > 1 else
                "its requests and rounds, not what a rerun's server starts and machine state change")
        out.append(Line(f"one run: its intervals hold {held}; `specmeter compare {rec.source_run or 'RUN'} RUN2 RUN3 "
                        "--pool` says whether the table holds across reruns", dim=True))
    if rec.drafter_choice is not None:  # one drafter per server: which, head to head
        out.append(Line(f"drafter: {rec.drafter_choice.reason}"))
    for d in rec.drafters if full else rec.drafters[:1]:
        tag = "best" if d is best else "alternative"
        out.append(Line(f"{tag}: {d.drafter}"
                        + (f" (geometric-mean {rec.objective} {d.score:.2f}x of the baseline's)" if d.score else ""),
                        emphasis=d is best))
        if d.spec is None:
            out.append(Line("  dynamic: speculation off at every batch size (no range where a K clearly pays)"))
        else:
            out += [Line(f"  {range_text(r, d.segments)}") for r in d.ranges]
        if d is best:
            out += [Line(f"  {trace_text(g)}", emphasis=g.gain is not None) for g in rec.on_trace]
        if d.deploy is not None:
            out += _deploy(d.deploy, emphasis=d is best)
        if d.static_deploy is not None:
            out += _deploy(d.static_deploy, what=f"static K={d.static_k} where dynamic SD is unavailable")
        elif d.deploy is None or d.deploy.dynamic:  # (else `deploy` is the static K)
            out.append(Line(f"  static K={d.static_k} where dynamic SD is unavailable: speculation off"))
        if full:
            out.append(Line(f"  static choice: {d.static_reason}", dim=True))
    out += proposal_lines(rec, full=full)
    if full:
        out.extend(Line("• " + note, dim=True) for note in rec.notes)
    return out
