"""How many rounds each load point runs: the fixed design's `repeats`, or, with adaptive precision, rounds until
every decision at the point is settled, more rounds are unlikely to change what it keeps (futility) or to change
it by more than the indifference zone (the zone's futility), or a budget runs out (analysis.sequential holds the
statistics), each round leaving out the configurations no open comparison can still read.

The runner asks before each configuration's round of an adaptive point whether to run it; the answer and the
looks behind it are written to the summary (`sampling`), so a resumed run looks again at the same data and agrees.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from specmeter.analysis.host import disturbed_rounds
from specmeter.analysis.sequential import (
    confidence_after,
    distinct,
    futile,
    indifferent,
    outside_decisions,
    point_arena,
    point_walks,
    resting,
    settled,
)
from specmeter.config.models import LoadPoint, LoadSpec
from specmeter.load.stops import Stop, StopConditions
from specmeter.schemas.analysis import HeadToHead
from specmeter.schemas.records import RequestRecord
from specmeter.schemas.results import Look, PointSampling, RunSummary


@dataclass(frozen=True)
class RoundsRun:
    """What a point's budgets read: the rounds it has run, and since when."""

    rounds: int
    per_round: Callable[[], int]  # requests one configuration sends in one round of the point
    began: float | None  # time.monotonic() at its first round (None: not begun here)


@dataclass(frozen=True)
class MaxRounds:
    limit: int

    def check(self, state: RoundsRun, /) -> Stop | None:
        return Stop(f"max_rounds ({self.limit}) reached") if state.rounds >= self.limit else None


@dataclass(frozen=True)
class MaxRequests:
    limit: int

    def check(self, state: RoundsRun, /) -> Stop | None:
        after = (state.rounds + 1) * state.per_round()
        if after > self.limit:
            return Stop(f"max_requests ({self.limit}) reached: another round would send {after} per configuration")
        return None


@dataclass(frozen=True)
class MaxSeconds:
    limit: float

    def check(self, state: RoundsRun, /) -> Stop | None:
        if state.began is not None and time.monotonic() - state.began >= self.limit:
            return Stop(f"max_seconds ({self.limit:g}) reached")
        return None


def zone_stop(h: HeadToHead, chance: float, rounds: int, load: LoadSpec) -> str:
    """Why a point stopped on the zone (analysis.sequential.indifferent), in one line for the comparison `h`."""
    zone = f"{h.indifference or 0:.0%}"
    return (f"{h.config_id} and {h.against} within the {zone} zone of each other after {rounds} rounds: more rounds "
            f"cannot change the answer beyond it ({chance:.0%} chance of a win by max_rounds ({load.max_rounds}) "
            f"with {h.config_id} more than {zone} better, under {load.futility:.0%}), so {h.against}, the cheaper, "
            f"stays, unsettled: {h.summary()}")


def budgets(load: LoadSpec) -> StopConditions[RoundsRun]:
    """An adaptive point's budgets, in the order a stop names them."""
    return StopConditions(MaxRounds(load.max_rounds),
                          *([MaxRequests(load.max_requests)] if load.max_requests is not None else []),
                          *([MaxSeconds(load.max_seconds)] if load.max_seconds is not None else []))


class Rounds:
    """The round bookkeeping of one execution."""

    def __init__(self, summary: RunSummary, records: Callable[[], Sequence[RequestRecord]],
                 per_round: Callable[[LoadPoint], int]) -> None:
        self.summary, self.records, self.per_round = summary, records, per_round
        self.load = summary.plan.load
        self.adaptive = self.load.precision == "adaptive"
        self.budgets = budgets(self.load)
        self._began: dict[str, float] = {}
        # (point, rounds) -> the configurations the look there rested for the next round; None: it stopped the point
        self._next: dict[tuple[str, int], frozenset[str] | None] = {}
        # (point, rounds) -> see _unread
        self._unread_at: dict[tuple[str, int], frozenset[str] | None] = {}

    def start(self, point: LoadPoint, round_: int, config_id: str) -> bool:
        """Whether the configuration runs round `round_` (0-based) of the point: always for a fixed design; for an
        adaptive one, not once the point has stopped, nor where the last look rested it, looking again from
        min_rounds on (from the first round on where the point decides nothing). Before min_rounds, what no decision
        the run is for reads rests after the first round (_unread)."""
        self._began.setdefault(point.id, time.monotonic())
        if not self.adaptive:
            return True
        if self.stopped_before(point, round_):
            return False
        if round_ < self.load.min_rounds:
            if round_ == 0:
                return True
            unread = self._unread(point, round_)
            if unread is not None:
                return config_id not in unread
        if (point.id, round_) not in self._next:  # one look per round, not one per configuration
            self._next[(point.id, round_)] = self.look(point, round_)
        rested = self._next[(point.id, round_)]
        return rested is not None and config_id not in rested

    def _unread(self, point: LoadPoint, rounds: int) -> frozenset[str] | None:
        """Before min_rounds, after `rounds` rounds: None where the point reads no comparison at all (verify: the
        best static K is the table's own), so another round could change nothing and the look stops it (its first
        round showed what the engine drafted); else what the next round leaves out: what no decision the run is
        for reads (analysis.sequential.outside_decisions). Asked once per round."""
        key = (point.id, rounds)
        if key not in self._unread_at:
            confidence, records = confidence_after(rounds, self.load), self.records()
            walks = point_walks(self.summary, records, point.id, confidence)
            decisions = distinct(walks)
            unread = None if walks and not decisions else frozenset(outside_decisions(self.summary, walks, point.id))
            if unread:  # on record as a look that rested them, so the sampling table says from which round
                _, look = self._record(point, rounds, confidence, records, decisions)
                look.rested = sorted(unread)
            self._unread_at[key] = unread
        return self._unread_at[key]

    def stopped_before(self, point: LoadPoint, round_: int) -> bool:
        """The point stopped (settled, futile or out of budget) with fewer rounds than this one: a resume skips it."""
        found = self.summary.sampled(point.id)
        return found is not None and found.stopped in ("settled", "futile", "budget") and found.rounds <= round_

    def look(self, point: LoadPoint, rounds: int) -> frozenset[str] | None:
        """Look at the point after `rounds` rounds: None where it stops there (the reason in its entry), else the
        configurations the next round leaves out (analysis.sequential.resting)."""
        confidence = confidence_after(rounds, self.load)
        records = self.records()
        arena = point_arena(self.summary, records, point.id, confidence)
        walks = point_walks(self.summary, records, point.id, confidence, arena)
        decisions = distinct(walks)
        entry, look = self._record(point, rounds, confidence, records, decisions)
        if walks and not decisions:  # a walk with nothing to compare (verify: the best static K is the table's own)
            self._stop(entry, "settled", f"nothing to decide here: stopped after {rounds} round{'s' * (rounds > 1)}")
            return None
        noisy = disturbed_rounds(self.summary, point.id)
        look.disturbed = [f"r{r + 1}: {why}" for r, why in sorted(noisy.items())]
        # The evidence sets disturbed rounds aside (analysis.headtohead): no decision rests on fewer clean rounds
        # than min_rounds, so a point runs another round in their place while its budget lasts. Where most of
        # its rounds were disturbed the machine is busy, not briefly disturbed: more rounds would be too, so it
        # decides on what it has, and its verdicts say "disturbed".
        waiting = rounds - len(noisy) < self.load.min_rounds and len(noisy) <= rounds / 2
        if decisions and settled(decisions) and not waiting:
            ties = [h.summary() for h in decisions if h.outcome == "tie"]
            # A tie is why a near-even point stopped: say so, and how close the two are.
            tied = f"; {len(ties)} of {len(decisions)} as a tie: {'; '.join(ties)}" if ties else ""
            self._stop(entry, "settled", f"every decision settled after {rounds} rounds at {confidence:.2%} "
                       f"confidence{tied}")
            return None
        budget = self.budgets.check(RoundsRun(rounds, lambda: self.per_round(point), self._began.get(point.id)))
        if budget is not None:
            self._stop(entry, "budget", f"{budget.why}; still open: {'; '.join(look.open) or '-'}")
            return None
        hopeless = None if waiting else futile(decisions, rounds, self.load)
        if hopeless is not None:
            chances = "; ".join(f"{h.summary()}: {chance:.0%} chance of a win" for h, chance in hopeless)
            self._stop(entry, "futile", f"no open decision was likely to end as a win by max_rounds "
                       f"({self.load.max_rounds}; under {self.load.futility:.0%} each), so the cheaper stays, "
                       f"unsettled, after {rounds} rounds: {chances}")
            return None
        within = None if waiting else indifferent(decisions, rounds, self.load)
        if within is not None:
            self._stop(entry, "futile", "; ".join(zone_stop(h, chance, rounds, self.load) for h, chance in within))
            return None
        if waiting:  # as before min_rounds: what the decisions read runs again in full
            look.rested = sorted(outside_decisions(self.summary, walks, point.id))
        else:
            look.rested = sorted(resting(self.summary, walks, point.id, arena.duel))
        return frozenset(look.rested)

    def finish(self, point: LoadPoint) -> None:
        """After the point's last scheduled round: its entry, with the last look where it was adaptive."""
        rounds = self._rounds_run(point)
        if rounds == 0:
            return
        if not self.adaptive:
            self._entry(point, rounds, confidence_after(rounds, self.load), self.records()).stopped = "fixed"
            return
        found = self.summary.sampled(point.id)
        if found is None or found.stopped is None or found.rounds != rounds:
            self.look(point, rounds)

    # -- inside ---------------------------------------------------------------------------------------------
    def _stop(self, entry: PointSampling, how: str, why: str) -> None:
        entry.stopped, entry.why = how, why  # type: ignore[assignment]

    def _rounds_run(self, point: LoadPoint) -> int:
        """Rounds the point ran: the most any configuration measured there (a rested one has fewer)."""
        plan = self.summary.plan
        counts = [len(res.repeats(point.id)) for c in plan.configs if plan.runs(c, point.id)
                  if (res := self.summary.config(c.id)) is not None and res.server_error is None]
        return max(counts, default=0)

    def _record(self, point: LoadPoint, rounds: int, confidence: float, records: Sequence[RequestRecord],
                decisions: Sequence[HeadToHead]) -> tuple[PointSampling, Look]:
        """The point's entry, with the look after `rounds` rounds in it (in place of one taken there before)."""
        entry = self._entry(point, rounds, confidence, records)
        look = Look(rounds=rounds, confidence=confidence,
                    open=[h.summary() for h in decisions if h.outcome == "unsettled"])
        entry.looks = [*[lk for lk in entry.looks if lk.rounds != rounds], look]
        return entry, look

    def _entry(self, point: LoadPoint, rounds: int, confidence: float,
               records: Sequence[RequestRecord]) -> PointSampling:
        found = self.summary.sampled(point.id)
        sent = Counter(r.config_id for r in records if r.point_id == point.id and not r.warmup)
        requests = max(sent.values(), default=0)
        if found is None:
            found = PointSampling(point_id=point.id, precision=self.load.precision or "fixed", rounds=rounds,
                                  requests=requests, confidence=confidence)
            self.summary.sampling.append(found)
        found.rounds, found.requests, found.confidence = rounds, requests, confidence
        return found
