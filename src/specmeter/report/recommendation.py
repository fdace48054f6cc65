"""A recommendation as plain data for every output: the evidence behind each range as a table, then the
lines that say what to deploy (the ready config first)."""

from __future__ import annotations

import json
from dataclasses import dataclass

from specmeter.report.tables import Grid, grid
from specmeter.schemas.recommend import DrafterRecommendation, Recommendation, Score, Segment

BASIS = {"measured": "measured", "interpolated": "interpolated", "below_measured": "below the smallest measured",
         "unmeasured": "not measured: no claim"}
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


def _span(seg: Segment) -> str:
    return str(seg.start) if seg.start == seg.end else f"{seg.start}-{seg.end}"


def heading(rec: Recommendation) -> str:
    return (f"Recommendation from {rec.source_run} ({OBJECTIVES[rec.objective]}"
            + (f", SLO {rec.slo.label()}" if rec.slo else "") + f"; max_num_seqs {rec.max_num_seqs}, from "
            f"{rec.max_num_seqs_source.split(';')[0]})")


def evidence_table(rec: Recommendation, d: DrafterRecommendation) -> Grid:
    goodput = rec.objective == "goodput"
    t = grid(f"Evidence for {d.drafter}: each batch-size stretch and where its K comes from "
             f"({OBJECTIVES[rec.objective]}; intervals cover repeats' spread)",
             ("batch sizes", "K", "basis", "points (engine batch)", "contenders", "why"))
    for seg in d.segments:
        t.add_row(_span(seg), str(seg.k), BASIS[seg.basis],
                  ", ".join(f"{p}" for p in seg.point_ids) + " (" + ", ".join(f"{b:.1f}" for b in seg.engine_batch)
                  + ")",
                  "\n".join(f"{s.config_id}: {_score(s, goodput)}" for s in seg.scores) or "-", seg.reason)
    return t


def deploy_lines(rec: Recommendation) -> list[Line]:
    """Per drafter, best first: the dynamic table and its config, the static fallback, then the notes."""
    best = rec.best
    out: list[Line] = []
    for d in rec.drafters:
        tag = "best" if d is best else "alternative"
        out.append(Line(f"{tag}: {d.drafter}"
                        + (f" (geometric-mean {rec.objective} {d.score:.2f}x of the baseline's)" if d.score else ""),
                        emphasis=d is best))
        if d.speculative_config is None:
            out.append(Line("  dynamic: speculation off at every batch size (no range where a K clearly pays)"))
        else:
            ranges = ", ".join(f"{r.start}-{r.end}: K={r.k}" + ("" if r.bases == ["measured"] else
                                                                 f" ({', '.join(BASIS[b] for b in r.bases)})")
                               for r in d.ranges)
            out.append(Line(f"  ranges: {ranges}"))
            flag = f"--speculative-config '{json.dumps(d.speculative_config)}'"
            out.append(Line("  " + flag, emphasis=d is best, config=flag))
        static = None if d.static_speculative_config is None else (
            f"--speculative-config '{json.dumps(d.static_speculative_config)}'")
        out.append(Line(f"  static K={d.static_k} where dynamic SD is unavailable: {static or 'speculation off'}",
                        config=static))
        out.append(Line(f"  static choice: {d.static_reason}", dim=True))
    out.extend(Line("• " + note, dim=True) for note in rec.notes)
    return out
