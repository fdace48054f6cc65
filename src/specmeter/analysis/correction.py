"""A table that verification contradicted, corrected from the pooled evidence of the sweep and every
verification round.

Verification runs each point's best static K beside the dynamic table, on the same requests, and the engine's own
adaptive speculation the sweep measured best there. Where that static K beats the table head to head and it is not
the table's K at the batch the engine ran, or the adaptive mode beats it, the sweep's choice there was wrong. The
correction then decides again on all the evidence: the sweep's requests, and each verification's, where the
dynamic server counts as the static configuration of the K it drafted at that point (the engine's per-step stats
confirmed it followed the table; its dynamic mode's small overhead counts against that K, never for it), and the
adaptive configuration as itself, so the drafter choice reads the new duel too. Verification repeats are kept
apart from the sweep's, so pairing stays within a run. The runs that measured Ks the step-cost model proposed pool
the same way (a proposed K joins as a configuration of its own): they are part of the evidence the answer was
decided on.
"""

from __future__ import annotations

from collections.abc import Sequence

from specmeter.analysis.proposed import judged
from specmeter.analysis.recommend import recommend
from specmeter.schemas.plan import PlannedConfig, Role
from specmeter.schemas.recommend import KRange, Recommendation
from specmeter.schemas.records import RequestRecord
from specmeter.schemas.results import ConfigResult, RunSummary

# Each run pooled into the sweep's evidence numbers its repeats from the next multiple of this past the repeats
# already there, so pairing stays within a run.
REPEAT_OFFSET = 1000
Evidence = tuple[RunSummary, Sequence[RequestRecord]]


def pooled(sweep: Evidence, runs: Sequence[Evidence], candidates: Sequence[str]) -> Evidence:
    """The sweep with every further run's measurements (verification rounds, proposals) added as more repeats of
    the same configurations; the dynamic server's at a point go to the candidate (of `candidates`, the drafter's)
    with the K it drafted, and a candidate the sweep did not run (a K the step-cost model proposed) joins as a
    configuration of its own."""
    summary = sweep[0].model_copy(deep=True)
    records = list(sweep[1])
    for run, run_records in runs:
        offset = (max((p.repeat for c in summary.configs for p in c.points), default=0) // REPEAT_OFFSET + 1) \
            * REPEAT_OFFSET
        ks = {c.k: c.id for c in summary.plan.configs if c.id in candidates}
        drafted = {vp.point_id: ks.get(vp.drafted.expected_k or 0) for vp in run.analysis.verification
                   if vp.drafted.followed}
        planned = {c.id: c for c in run.plan.configs}
        for res in run.configs:
            config = planned[res.config_id]
            for p in res.points:
                if config.role is Role.verification:
                    target = drafted.get(p.point_id)
                    into = summary.config(target) if target is not None else None
                else:
                    into = summary.config(config.id) or _joined(summary, config, res)
                if into is None:
                    continue
                into.points.append(p.model_copy(update={"repeat": p.repeat + offset}))
                records += [r.model_copy(update={"config_id": into.config_id, "repeat": r.repeat + offset})
                            for r in run_records if r.config_id == res.config_id and r.point_id == p.point_id]
    return summary, records


def _joined(summary: RunSummary, config: PlannedConfig, res: ConfigResult) -> ConfigResult | None:
    """A candidate the sweep did not run, added to its plan and results (without points yet)."""
    if config.role is not Role.candidate:
        return None
    summary.plan.configs.append(config)
    joined = res.model_copy(update={"points": []})
    summary.configs.append(joined)
    return joined


def disagreements(verify: RunSummary) -> list[str]:
    """One line per verified point where a static K other than the table's, or the engine's adaptive mode, beat
    it."""
    return [vp.note for vp in verify.analysis.verification if vp.disagrees]


def correct(sweep: Evidence, verifications: Sequence[Evidence], previous: Recommendation,
            previous_file: str) -> Recommendation:
    """The recommendation decided again on the pooled evidence, with what changed against `previous`."""
    best = previous.best
    candidates = best.candidates if best is not None else []
    summary, records = pooled(sweep, verifications, candidates)
    given = previous.max_num_seqs if previous.max_num_seqs_source.startswith("given") else None
    rec = recommend(summary, records, objective=previous.objective, slo=previous.slo, max_num_seqs=given,
                    source_run=previous.source_run, min_gain=previous.min_gain, indifference=previous.indifference)
    rec.round, rec.corrects = previous.round + 1, previous_file
    rec.proposed = [judged(p, rec) for p in previous.proposed]  # the proposals' outcomes, read again
    reasons = [line for v, _ in verifications[-1:] for line in disagreements(v)]
    drafters = [b.drafter for b in (previous.best, rec.best) if b is not None]
    switched = [f"drafter: {drafters[0]} -> {drafters[1]}"] if len(set(drafters)) == 2 else []
    rec.changes = [*switched, *changes(table(previous), table(rec)), *(f"because {r}" for r in reasons)]
    return rec


def table(rec: Recommendation) -> list[KRange]:
    """The table the best drafter deploys, as its config says (what verify ran, even where a user edited it):
    drafting off everywhere when there is none."""
    spec = rec.best.spec if rec.best is not None else None
    entries = spec.num_speculative_tokens_per_batch_size if spec is not None else None
    if not entries:
        return [KRange(start=1, end=rec.max_num_seqs, k=0, bases=[])]
    return [KRange(start=start, end=end, k=k, bases=[]) for start, end, k in entries]


def same_table(a: Recommendation, b: Recommendation) -> bool:
    """The same drafter with the same Ks: one answer (a drafter with the Ks of another, say the engine's adaptive
    mode in place of a table, is another)."""
    drafter = (a.best.drafter if a.best else None) == (b.best.drafter if b.best else None)
    return drafter and [r.entry for r in table(a)] == [r.entry for r in table(b)]


def changes(before: Sequence[KRange], after: Sequence[KRange]) -> list[str]:
    """The batch sizes whose K differs, as ranges: 'batch 1-2: K 2 -> 4'."""
    def k_at(ranges: Sequence[KRange], b: int) -> int | None:
        return next((r.k for r in ranges if r.start <= b <= r.end), None)

    top = max([r.end for r in [*before, *after]], default=0)
    out: list[str] = []
    start = None
    for b in range(1, top + 2):
        differs = b <= top and k_at(before, b) != k_at(after, b)
        if differs and start is None:
            start = b
        if start is not None and (not differs or k_at(before, b) != k_at(before, start)
                                  or k_at(after, b) != k_at(after, start)):
            end = b - 1
            span = str(start) if start == end else f"{start}-{end}"
            out.append(f"batch {span}: K {k_at(before, start)} -> {k_at(after, start)}")
            start = b if differs else None
    return out
