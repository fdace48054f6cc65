"""The draft lengths the sweep did not run that the step-cost model says could win where it measured.

Per drafter, each K of a range (the sweep's own K span widened by one on each side, from 1; or the range the user
gives) that no candidate ran is predicted at every measured stretch of the drafter's table, at the engine batch
the stretch ran, against the K chosen there. Both sides are the model's (the proposal's predicted speedup over
the incumbent's predicted one, not over its measured one), so the model's bias at that batch cancels instead of
counting for or against the proposal. Where speculation off was chosen, whose speedup is 1 by definition and
carries no bias to cancel, it is put on the model's scale through the drafter's measured K nearest the proposal:
that K's predicted speedup over what it measured against speculation off. Where the proposal's prediction beats
the incumbent's by more than the minimum gain it could win that stretch; proposals are ranked by their largest
such edge.

A K predicted inside the indifference zone is named and set aside (inside_zone): as predicted it would settle as a
tie, where either is right.

A proposal is a reason to measure, never an answer: the tune loop runs it head to head with the incumbent, and
only the walk on that evidence lets it into the table.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace

from specmeter.predict.acceptance import AcceptanceProfile
from specmeter.predict.predict import Predictor
from specmeter.schemas.proposal import Contest
from specmeter.schemas.recommend import DrafterRecommendation, Segment


@dataclass(frozen=True)
class Proposal:
    """An unmeasured K of one drafter and the measured stretches it could win."""

    drafter: str  # the drafter's label, as its recommendation names it
    k: int
    contests: tuple[Contest, ...]

    @property
    def edge(self) -> float:
        return max(c.edge for c in self.contests)


def k_span(measured: Sequence[int], given: tuple[int, int] | None = None) -> list[int]:
    """The Ks a proposal may take: `given` (lowest, highest), else the measured span widened by one on each side
    (K >= 1); the measured Ks left out."""
    low, high = given if given is not None else (min(measured) - 1, max(measured) + 1)
    return [k for k in range(max(1, low), high + 1) if k not in measured]


def proposals(predictor: Predictor, drafter_key: str, profile: AcceptanceProfile, rec: DrafterRecommendation,
              measured: Sequence[int], *, min_gain: float, k_range: tuple[int, int] | None = None) -> list[Proposal]:
    """Each unmeasured K of the drafter with the measured stretches of `rec` where its predicted speedup beats the
    chosen K's by more than `min_gain`; a stretch the model cannot speak for (a batch or K outside what the
    calibration determines) proposes nothing."""
    found: list[Proposal] = []
    for k in k_span(measured, k_range):
        contests = []
        for seg in rec.segments:
            if seg.basis != "measured" or seg.chosen is None or not seg.engine_batch:
                continue
            batch = seg.engine_batch[0]
            mine = predictor.estimate(drafter_key, k, profile.al(k), batch)
            anchor = _anchor(seg, seg.chosen, k)
            if isinstance(mine, str) or anchor is None:
                continue
            theirs = predictor.estimate(drafter_key, anchor.k, profile.al(anchor.k), batch)
            if isinstance(theirs, str):
                continue
            incumbent = theirs.speedup / anchor.measured
            if mine.speedup > incumbent * (1.0 + min_gain):
                contests.append(Contest(point_ids=list(seg.point_ids), batch=batch, incumbent=seg.chosen,
                                        incumbent_k=seg.k, predicted=mine.speedup, predicted_incumbent=incumbent,
                                        anchor=None if anchor.config_id == seg.chosen else anchor.config_id))
        if contests:
            found.append(Proposal(drafter=rec.drafter, k=k, contests=tuple(contests)))
    return found


@dataclass(frozen=True)
class _Anchor:
    """The measured configuration the incumbent is predicted through, and what it measured over the incumbent."""

    config_id: str
    k: int
    measured: float


def _anchor(seg: Segment, chosen: str, k: int) -> _Anchor | None:
    """The incumbent itself where it drafts; where speculation off was chosen, the drafter's measured K nearest
    `k` (the smaller on a tie) with its measured objective over speculation off's (None: nothing measured)."""
    if seg.k > 0:
        return _Anchor(chosen, seg.k, 1.0)
    base = next((s.value for s in seg.scores if s.config_id == chosen), None)
    drafted = [(s.config_id, s.k, s.value) for s in seg.scores if s.k > 0 and s.value]
    if not base or not drafted:
        return None
    cid, near, value = min(drafted, key=lambda d: (abs(d[1] - k), d[1]))
    return _Anchor(cid, near, value / base)


def inside_zone(found: Iterable[Proposal], indifference: float | None) -> tuple[list[Proposal], list[Proposal]]:
    """`found` split into the stretches worth measuring and those predicted inside the indifference zone (at most
    `indifference` better than the K chosen there). Such a K, measured as predicted, settles as a tie against the
    chosen one, where either is right: a costlier K could not even enter the table (a tie keeps the cheaper), and a
    cheaper one would buy at most what the zone calls hardly mattering, for a server start and rounds. A proposal
    keeps the stretches outside the zone. `indifference` None (decided before ties existed): the minimum gain, which
    every proposal clears, is all."""
    measure: list[Proposal] = []
    inside: list[Proposal] = []
    for p in found:
        tie = [indifference is not None and c.edge <= 1.0 + indifference for c in p.contests]
        for into, tied in ((measure, False), (inside, True)):
            if contests := tuple(c for c, t in zip(p.contests, tie, strict=True) if t == tied):
                into.append(replace(p, contests=contests))
    return measure, inside


def ranked(found: Iterable[Proposal]) -> list[Proposal]:
    """Largest predicted edge first; the smaller K first where edges tie (it costs less to draft)."""
    return sorted(found, key=lambda p: (-p.edge, p.k))
