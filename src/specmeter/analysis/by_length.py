"""An input-length axis, decided one length at a time: the recommendation from each length's points alone.

A sweep over input lengths measures every load at every length; the batch size where a K stops paying moves with
the context (SqueezeBits saw speculation stop paying at concurrency 16 instead of 32 when inputs grew from 1K to 2K
tokens), so one table over every length would mix two different cost curves. Each length gets the recommender
over its own points, and a note says whether the best K per batch changes with input length.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from specmeter.schemas.recommend import Recommendation
from specmeter.schemas.records import RequestRecord
from specmeter.schemas.results import RunSummary


def lengths(summary: RunSummary) -> list[int]:
    """The input lengths of the plan's points ([]: no input-length axis)."""
    return [n for n in summary.plan.input_lens if n is not None]


def at_length(summary: RunSummary, length: int) -> RunSummary:
    """The summary as if the run had measured only the points of one input length: its plan's points and each
    configuration's results there (the analysis keyed by point id keeps the others' entries, never read)."""
    plan = summary.plan
    points = [p for p in plan.points if p.input_len == length]
    ids = {p.id for p in points}
    load = plan.load.model_copy(update={"points": points})
    configs = [c.model_copy(update={"points": [p for p in c.points if p.point_id in ids]}) for c in summary.configs]
    return summary.model_copy(update={"plan": plan.model_copy(update={"load": load}), "configs": configs})


def per_length(summary: RunSummary, records: Sequence[RequestRecord],
               decide: Callable[[RunSummary, Sequence[RequestRecord]], Recommendation]) -> Recommendation:
    """`decide` over the whole run, or, on an input-length axis, over each length: the first length's table on
    top, every length's in per_input_len, and a note whether the tables differ."""
    ns = lengths(summary)
    if not ns:
        return decide(summary, records)
    recs = [decide(at_length(summary, n), records).model_copy(update={"input_len": n}) for n in ns]
    head = recs[0]
    return head.model_copy(update={"per_input_len": recs, "notes": [*head.notes, length_note(recs)]})


def table_text(rec: Recommendation) -> str:
    best = rec.best
    if best is None:
        return "nothing to recommend"
    return f"{best.drafter}: " + str([[r.start, r.end, r.k] for r in best.ranges])


def length_note(recs: Sequence[Recommendation]) -> str:
    """Whether the best drafter and its K per batch change with input length, with each length's table."""
    tables = [f"{r.input_len} input tokens: {table_text(r)}" for r in recs]
    if len({table_text(r) for r in recs}) == 1:
        return f"the best K per batch is the same at every input length ({'; '.join(tables)})"
    return (f"the best K per batch changes with input length ({'; '.join(tables)}): deploy the table of the length "
            f"your traffic has; the table above is for {recs[0].input_len} input tokens")
