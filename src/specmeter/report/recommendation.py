"""Console rendering of a recommendation: the ready config first, then the evidence behind every range."""

from __future__ import annotations

import json

from rich.console import Console, Group
from rich.table import Table
from rich.text import Text

from specmeter.schemas.recommend import DrafterRecommendation, Recommendation, Score, Segment

BASIS = {"measured": "measured", "interpolated": "interpolated", "below_measured": "below the smallest measured",
         "unmeasured": "not measured: no claim"}
OBJECTIVES = {"throughput": "output throughput (TPOT at request-rate points)", "tpot": "TPOT",
              "goodput": "goodput (requests/s meeting the SLO)"}


def _score(s: Score, goodput: bool) -> str:
    if s.value is None:
        return "-"
    unit = " req/s" if goodput else "x"
    text = f"{s.value:.2f}{unit}"
    if s.low is not None and s.high is not None:
        text += f" [{s.low:.2f}, {s.high:.2f}]"
    return text


def evidence_table(rec: Recommendation, d: DrafterRecommendation) -> Table:
    goodput = rec.objective == "goodput"
    t = Table(title=f"Evidence for {d.drafter}: each batch-size stretch and where its K comes from "
              f"({OBJECTIVES[rec.objective]}; intervals cover repeats' spread)", title_justify="left")
    for col in ("batch sizes", "K", "basis", "points (engine batch)", "contenders", "why"):
        t.add_column(col, overflow="fold")
    for seg in d.segments:
        t.add_row(_span(seg), str(seg.k), BASIS[seg.basis],
                  ", ".join(f"{p}" for p in seg.point_ids) + " (" + ", ".join(f"{b:.1f}" for b in seg.engine_batch)
                  + ")",
                  "\n".join(f"{s.config_id}: {_score(s, goodput)}" for s in seg.scores) or "-", seg.reason)
    return t


def _span(seg: Segment) -> str:
    return str(seg.start) if seg.start == seg.end else f"{seg.start}-{seg.end}"


def render_recommendation(rec: Recommendation, console: Console) -> None:
    best = rec.best
    assert best is not None  # recommend() refuses a run with nothing to recommend
    head = Text(f"Recommendation from {rec.source_run} ({OBJECTIVES[rec.objective]}"
                + (f", SLO {rec.slo.label()}" if rec.slo else "") + f"; max_num_seqs {rec.max_num_seqs}, from "
                f"{rec.max_num_seqs_source.split(';')[0]})", style="bold")
    parts: list[Table | Text] = [head]
    for d in rec.drafters:
        parts.append(evidence_table(rec, d))
    console.print(Group(*parts))
    for d in rec.drafters:
        tag = "best" if d is best else "alternative"
        console.print(Text(f"{tag}: {d.drafter}"
                           + (f" (geometric-mean {rec.objective} {d.score:.2f}x of the baseline's)" if d.score else ""),
                           style="bold" if d is best else ""))
        if d.speculative_config is None:
            console.print(Text("  dynamic: speculation off at every batch size (no range where a K clearly pays)"))
        else:
            ranges = ", ".join(f"{r.start}-{r.end}: K={r.k}" + ("" if r.bases == ["measured"] else
                                                                 f" ({', '.join(BASIS[b] for b in r.bases)})")
                               for r in d.ranges)
            console.print(Text(f"  ranges: {ranges}"))
            console.print(Text("  --speculative-config '" + json.dumps(d.speculative_config) + "'",
                               style="green" if d is best else ""), soft_wrap=True)
        static = ("speculation off" if d.static_speculative_config is None
                  else "--speculative-config '" + json.dumps(d.static_speculative_config) + "'")
        console.print(Text(f"  static K={d.static_k} where dynamic SD is unavailable: {static}"), soft_wrap=True)
        console.print(Text(f"  static choice: {d.static_reason}", style="dim"), soft_wrap=True)
    for note in rec.notes:
        console.print(Text("• " + note, style="dim"), soft_wrap=True)
