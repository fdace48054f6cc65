"""What the measurement of a proposed K said, read from the table decided on the pooled evidence.

A proposed K is one more contender of its drafter's walk at the points it ran (analysis.choice): it enters the
table only where that walk chose it, which needs it to beat what the walk held before it and the costlier
configurations after it not to beat it, head to head on the same requests. So its outcome at a stretch is read
from that stretch's decision, never decided anew: won where it was chosen; else tied where the comparison that
ended it was a tie (at most the indifference zone better: the cheaper kept), lost where it settled otherwise, unsettled
where it could not tell.
"""

from __future__ import annotations

from specmeter.schemas.analysis import HeadToHead
from specmeter.schemas.proposal import ProposalOutcome, ProposedK
from specmeter.schemas.recommend import Recommendation


def judged(proposed: ProposedK, rec: Recommendation) -> ProposedK:
    """`proposed` with each contest's outcome and the comparisons of it that `rec`'s decision there read."""
    drafter = next((d for d in rec.drafters if d.drafter == proposed.drafter), None)
    contests = []
    for contest in proposed.contests:
        seg = None if drafter is None else next(
            (s for s in drafter.segments if s.basis == "measured" and set(s.point_ids) & set(contest.point_ids)),
            None)
        if seg is None:  # no measured stretch there in this table: nothing decided it
            contests.append(contest.model_copy(update={"outcome": "unsettled", "evidence": []}))
            continue
        mine = [h for h in seg.evidence if proposed.config_id in (h.config_id, h.against)]
        contests.append(contest.model_copy(update={"outcome": _outcome(proposed.config_id, seg.chosen, mine),
                                                   "evidence": mine}))
    return proposed.model_copy(update={"contests": contests})


def _outcome(config_id: str, chosen: str | None, mine: list[HeadToHead]) -> ProposalOutcome:
    if chosen == config_id:
        return "won"
    if not mine or mine[-1].outcome == "unsettled":
        return "unsettled"
    return "tied" if mine[-1].outcome == "tie" else "lost"
