"""Sequential sampling (analysis/sequential.py, execution/rounds.py): rounds until every decision at a point is settled
(a tie within the indifference zone included), with the error spent over the looks so that stopping early does not
inflate it."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from test_recommend import latency, sweep

from fakeengine.drive import attach_pair, conversations, run_plan
from fakeengine.server import FakeEngine
from specmeter.analysis.choice import choose, contenders
from specmeter.analysis.headtohead import Side, head_to_head, outcome_of
from specmeter.analysis.sequential import (
    ALPHA,
    confidence_after,
    futile,
    indifferent,
    look_confidence,
    looks,
    resting,
    settled,
    win_chance,
    zone_win_chance,
)
from specmeter.common.errors import InputError
from specmeter.config.models import ConcurrencyPoint, LoadSpec
from specmeter.execution.rounds import Rounds
from specmeter.plans.run import BASELINE
from specmeter.report.decisions import sampling_table
from specmeter.rundir.store import RunStore, load_summary
from specmeter.schemas.analysis import HeadToHead
from specmeter.schemas.records import RequestRecord
from specmeter.schemas.results import ConfigResult, PointResult, RunSummary
from specmeter.schemas.sd import SDSummary

K2, K4 = "draft_model-k2", "draft_model-k4"
C1 = ConcurrencyPoint(concurrency=1)


def test_the_looks_spend_exactly_alpha_little_early_most_late() -> None:
    for planned in (1, 2, 3, 5, 8):
        spent = [1.0 - look_confidence(j, planned) for j in range(1, planned + 1)]
        assert sum(spent) == pytest.approx(ALPHA)
        assert spent == sorted(spent)  # early looks spend least: what stops early is clear beyond doubt
    with pytest.raises(ValueError):
        look_confidence(4, 3)
    load = LoadSpec(precision="adaptive", min_rounds=2, max_rounds=4)
    assert looks(load) == 3
    assert confidence_after(2, load) > confidence_after(3, load) > confidence_after(4, load) > 0.95
    assert confidence_after(3, LoadSpec(precision="fixed")) == 0.95


def test_adaptive_needs_interleave_and_no_repeats() -> None:
    load = LoadSpec(precision="adaptive")
    with pytest.raises(InputError, match="interleave"):
        load.with_precision(interleave=False, repeats=1, default="adaptive")
    with pytest.raises(InputError, match="repeats"):
        load.with_precision(interleave=True, repeats=3, default="adaptive")
    assert LoadSpec().with_precision(interleave=True, repeats=1, default="adaptive").precision == "adaptive"
    assert LoadSpec().with_precision(interleave=True, repeats=2, default="adaptive").precision == "fixed"
    assert LoadSpec().with_precision(interleave=False, repeats=1, default="adaptive").precision == "fixed"
    with pytest.raises(ValueError, match="min_rounds"):
        LoadSpec(min_rounds=5, max_rounds=4)


def adaptive(rows: dict[str, dict[str, list[tuple[float, float, float]]]], **load: object) -> Rounds:
    summary, records = sweep(rows, {"c1": 1.0})
    summary.plan.load = summary.plan.load.model_copy(update={"precision": "adaptive", **load})
    summary.plan.interleave = True
    return Rounds(summary, lambda: records, lambda p: 20)


def test_a_point_stops_once_settled_and_never_before_min_rounds() -> None:
    clear = {K2: {"c1": [(1.3, 1.28, 1.32)] * 4}, K4: {"c1": [(1.6, 1.58, 1.62)] * 4}}
    rounds = adaptive(clear)
    assert rounds.start(C1, 0, BASELINE) and rounds.start(C1, 1, BASELINE)  # one lucky round is never enough to stop
    assert not rounds.start(C1, 2, BASELINE)  # after min_rounds (2) every decision is clear: stop
    entry = rounds.summary.sampled("c1")
    assert entry is not None and entry.stopped == "settled" and entry.rounds == 2
    assert entry.confidence == confidence_after(2, rounds.load) and entry.looks[-1].open == []
    assert not rounds.start(C1, 3, BASELINE)  # and it stays stopped
    # A resume reads the same from the stored summary: the rounds past the stop are not pending.
    again = Rounds(rounds.summary, rounds.records, rounds.per_round)
    assert again.stopped_before(C1, 2) and again.stopped_before(C1, 3) and not again.stopped_before(C1, 1)


def test_a_point_that_cannot_settle_runs_to_its_budget_and_says_what_is_open() -> None:
    close = {K2: {"c1": [(1.30, 1.10, 1.50)] * 4}, K4: {"c1": [(1.31, 1.11, 1.51)] * 4}}
    rounds = adaptive(close, futility=0.0)  # without futility: to the budget
    assert all(rounds.start(C1, r, K4) for r in range(4))  # looks after 2 and 3 rounds: still open, go on
    rounds.finish(C1)
    entry = rounds.summary.sampled("c1")
    assert entry is not None and entry.stopped == "budget" and "max_rounds" in entry.why
    assert entry.looks[-1].open and K4 in entry.why
    capped = adaptive(close, max_requests=50, futility=0.0)  # 20 requests a round: a third round would pass 50
    assert capped.start(C1, 2, K4) is False and "max_requests" in capped.summary.sampling[0].why


def test_a_point_whose_open_decision_is_unlikely_to_end_as_a_win_stops_for_futility() -> None:
    """K = 4 a little faster than K = 2 with a wide interval: no win, no tie after min_rounds, and a win by
    max_rounds would need the estimate to climb far past where it is. The point stops, K = 2 (the cheaper) stays,
    the comparison stays unsettled, and the summary says why and how likely a win still was. A clear lead keeps
    it going."""
    hopeless = {K2: {"c1": [(1.30, 1.20, 1.40)] * 4}, K4: {"c1": [(1.31, 1.16, 1.46)] * 4}}
    rounds = adaptive(hopeless)
    assert rounds.start(C1, 1, K4) and not rounds.start(C1, 2, K4)
    entry = rounds.summary.sampled("c1")
    assert entry is not None and (entry.stopped, entry.rounds) == ("futile", 2) and entry.looks[-1].open
    assert f"{K4} unsettled against {K2}" in entry.why and "chance of a win" in entry.why
    again = Rounds(rounds.summary, rounds.records, rounds.per_round)  # a resume does not run it on
    assert again.stopped_before(C1, 2) and again.stopped_before(C1, 3)
    ahead = adaptive({K2: {"c1": [(1.30, 1.20, 1.40)] * 4}, K4: {"c1": [(1.40, 1.25, 1.55)] * 4}})
    assert ahead.start(C1, 2, K4)
    going = ahead.summary.sampled("c1")
    assert going is not None and going.stopped is None


def test_a_point_whose_open_decision_cannot_change_the_answer_beyond_the_zone_stops_and_says_why() -> None:
    """K = 4 about 2% better than K = 2 on a steady machine: not a win yet, not a tie (it may still be 3% better),
    and a 1% win by max_rounds fairly likely, so futility runs on; but a win with K = 4 truly more than 3% better
    is very unlikely, so more rounds cannot change the answer beyond the zone: the point stops, K = 2 (the cheaper)
    stays, unsettled, and the summary says so in one line. Without a zone (or with futility off) it runs on."""
    near = {K2: {"c1": [(1.30, 1.29, 1.31)] * 4}, K4: {"c1": [(1.326, 1.306, 1.346)] * 4}}
    rounds = adaptive(near)
    assert not rounds.start(C1, 2, K4)
    entry = rounds.summary.sampled("c1")
    assert entry is not None and (entry.stopped, entry.rounds) == ("futile", 2) and entry.looks[-1].open
    assert f"{K4} and {K2} within the 3% zone of each other after 2 rounds" in entry.why
    assert "more rounds cannot change the answer beyond it" in entry.why and f"{K2}, the cheaper, stays" in entry.why
    assert Rounds(rounds.summary, rounds.records, rounds.per_round).stopped_before(C1, 3)  # a resume agrees
    no_zone = adaptive(near)
    no_zone.summary.plan.indifference = no_zone.summary.plan.min_gain
    assert no_zone.start(C1, 2, K4)
    assert adaptive(near, futility=0.0).start(C1, 2, K4)


def test_a_configuration_whose_comparisons_settled_rests_while_the_rest_go_on() -> None:
    """K = 2 clearly beats the baseline, K = 4 against K = 2 stays open: from the first look on the baseline sits
    out (its one comparison settled), K = 2 and K = 4 run to the budget, and each look says who rested. A K that
    no comparison reads yet (the walk has not reached it) keeps running."""
    open_top = {K2: {"c1": [(1.30, 1.28, 1.32)] * 4}, K4: {"c1": [(1.31, 1.10, 1.52)] * 4}}
    rounds = adaptive(open_top, futility=0.0)  # a win by K = 4 unlikely: futility would stop the point
    assert all(rounds.start(C1, r, c) for r in (0, 1) for c in (BASELINE, K2, K4))  # min_rounds: everyone
    assert not rounds.start(C1, 2, BASELINE) and rounds.start(C1, 2, K2) and rounds.start(C1, 2, K4)
    assert not rounds.start(C1, 3, BASELINE) and rounds.start(C1, 3, K4)
    entry = rounds.summary.sampled("c1")
    assert entry is not None and [lk.rested for lk in entry.looks] == [[BASELINE], [BASELINE]]
    assert all(K4 in lk.open[0] for lk in entry.looks) and entry.rested_from() == {BASELINE: 3}
    table = sampling_table(rounds.summary)
    assert table is not None and [row[5] for row in table.rows] == [f"{BASELINE} from round 3"]
    # Until K = 2 settles against the baseline the walk does not reach K = 4: all three go on.
    unsure = adaptive({K2: {"c1": [(1.05, 0.90, 1.20)] * 4}, K4: {"c1": [(1.31, 1.10, 1.52)] * 4}}, futility=0.0)
    assert all(unsure.start(C1, 2, c) for c in (BASELINE, K2, K4))
    assert unsure.summary.sampling[0].looks[-1].rested == []


def _h2h(challenger: str, incumbent: str, outcome: str) -> HeadToHead:
    return HeadToHead.model_construct(point_id="c1", config_id=challenger, against=incumbent, outcome=outcome)


def test_what_rests_is_what_no_open_comparison_can_read() -> None:
    """A walk from the baseline: from its first open comparison on, the choice there and every later challenger
    may still be read; a verification's comparisons are fixed, so whatever is in none still open rests."""
    summary, _ = sweep({K2: {"c1": (1.3, 1.2, 1.4)}, K4: {"c1": (1.3, 1.2, 1.4)},
                        "draft_model-k6": {"c1": (1.3, 1.2, 1.4)}}, {"c1": 1.0})
    k6 = "draft_model-k6"
    behind = [[_h2h(K2, BASELINE, "beats"), _h2h(K4, K2, "unsettled"), _h2h(k6, K2, "does_not_beat")]]
    assert resting(summary, behind, "c1") == {BASELINE}
    assert resting(summary, [[_h2h(K2, BASELINE, "unsettled"), _h2h(K4, BASELINE, "beats"),
                              _h2h(k6, BASELINE, "does_not_beat")]], "c1") == set()
    assert resting(summary, [[_h2h(K2, BASELINE, "beats"), _h2h(K4, K2, "beats"),
                              _h2h(k6, K4, "unsettled")]], "c1") == {BASELINE, K2}
    # With the point's duels: K = 4 has settled against both choices the open walk may make, beating neither, so
    # it rests; K = 6 is still open against K = 2, so it runs (and K = 4, never a choice, is not one it meets).
    outcomes = {(K4, BASELINE): "does_not_beat", (K4, K2): "tie", (k6, BASELINE): "does_not_beat",
                (k6, K2): "unsettled", (k6, K4): "beats"}
    open_walk = [[_h2h(K2, BASELINE, "unsettled"), _h2h(K4, BASELINE, "does_not_beat"),
                  _h2h(k6, BASELINE, "does_not_beat")]]
    assert resting(summary, open_walk, "c1", lambda a, b: _h2h(a, b, outcomes[(a, b)])) == {K4}
    summary.plan.kind = "verify"  # the dynamic table against the baseline settled, K = 6 against it open
    assert resting(summary, [[_h2h(K4, BASELINE, "beats"), _h2h(k6, K4, "unsettled")]], "c1") == {BASELINE, K2}


def test_a_near_tie_stops_as_a_tie_and_says_how_close() -> None:
    """K = 4 within 1% of K = 2 on every request: no 1% win, none ruled out, so without a zone the point runs to
    its budget; at most 3% better, K = 4 ties with K = 2 after min_rounds, and the summary says so and by how much."""
    near = {K2: {"c1": [(1.30, 1.29, 1.31)] * 4}, K4: {"c1": [(1.31, 1.30, 1.32)] * 4}}
    rounds = adaptive(near)
    assert rounds.start(C1, 0, BASELINE) and rounds.start(C1, 1, BASELINE) and not rounds.start(C1, 2, BASELINE)
    entry = rounds.summary.sampled("c1")
    assert entry is not None and entry.stopped == "settled" and entry.rounds == 2 and entry.looks[-1].open == []
    assert "1 of 2 as a tie" in entry.why and f"{K4} ties with {K2}" in entry.why and "at most 3% better" in entry.why
    without = adaptive(near, futility=0.0)  # neither ties nor futility: to the budget
    without.summary.plan.indifference = without.summary.plan.min_gain  # equal to min gain: no ties
    assert all(without.start(C1, r, K4) for r in range(4))
    without.finish(C1)
    left = without.summary.sampled("c1")
    assert left is not None and left.stopped == "budget" and K4 in left.why


def _side(cid: str, rounds: list[np.ndarray] | dict[int, np.ndarray], tokens: int = 100) -> Side:
    """A side from its per-request E2E seconds per round (a dict: only the rounds it ran)."""
    ran = rounds if isinstance(rounds, dict) else dict(enumerate(rounds))
    recs = [RequestRecord(config_id=cid, point_id="c1", repeat=r, conversation_id=f"q{i}", ok=True,
                          ttft_s=0.01, e2e_s=float(x), output_tokens=tokens)
            for r, e2e in ran.items() for i, x in enumerate(e2e)]
    res = ConfigResult(config_id=cid, role="candidate", spec_label=cid, points=[
        PointResult(point_id="c1", repeat=r, latency=latency(float(e2e.sum()), tokens * len(e2e)),
                    sd=SDSummary(available=False)) for r, e2e in ran.items()])
    return Side.of(res, recs, "c1")


ZONE = 0.03  # the default indifference zone: +-3%
NOISY, QUIET = 0.10, 0.015  # per-request noise of each side: a busy CPU machine, a steady server
LOAD = LoadSpec(precision="adaptive", min_rounds=2, max_rounds=4)


def _looks(rng: np.random.Generator, ratio: float, load: LoadSpec, noise: float = NOISY,
           n: int = 12) -> list[tuple[int, HeadToHead]]:
    """One simulated point: the challenger truly `ratio` times the incumbent's throughput; per-request hardness
    shared by both sides, `noise` each. The looks the runner takes (rounds run, the comparison read at that
    look's confidence), until the rule without a zone settles: the zone only settles what that rule leaves
    open, so on the same rounds it stops no later, and both rules are read off the same looks."""
    a_rounds: list[np.ndarray] = []
    b_rounds: list[np.ndarray] = []
    looks: list[tuple[int, HeadToHead]] = []
    for done in range(1, load.max_rounds + 1):
        hard = rng.lognormal(0.0, 0.5, n)
        a_rounds.append(hard / ratio * (1 + rng.normal(0, noise, n)).clip(0.5))
        b_rounds.append(hard * (1 + rng.normal(0, noise, n)).clip(0.5))
        if done < load.min_rounds:
            continue
        h2h = head_to_head(_side("a", a_rounds), _side("b", b_rounds), "c1", "output_throughput", min_gain=0.01,
                           indifference=ZONE, confidence=confidence_after(done, load))
        looks.append((done, h2h))
        if outcome_of(h2h.low, h2h.high, h2h.threshold) != "unsettled":
            break
    return looks


def _stop(looks: list[tuple[int, HeadToHead]], zone: float | None) -> tuple[str, int]:
    """Where the rule with `zone` (None: without one) stops on these looks: its outcome and the rounds run."""
    for done, h in looks:
        outcome = outcome_of(h.low, h.high, h.threshold, zone)
        if outcome != "unsettled":
            return outcome, done
    return "unsettled", looks[-1][0]


def _wrong_rate(points: list[list[tuple[int, HeadToHead]]], zone: float | None, wrong: set[str]) -> float:
    """The share of simulated points the rule with `zone` stops on a wrong outcome."""
    return sum(_stop(looks, zone)[0] in wrong for looks in points) / len(points)


@pytest.mark.parametrize(("ratio", "wrong"), [(1.01, {"beats", "does_not_beat"}), (1.0, {"beats"}),
                                              (1.08, {"does_not_beat", "tie"})])
def test_the_wrong_decision_rate_under_optional_stopping_is_at_most_five_percent(ratio: float, wrong: set[str]) -> None:
    """At exactly 1 + min gain every beats or does-not-beat is wrong (a tie is right: 1% is inside the zone);
    below it "beats" is wrong, above it "does not beat", and outside the zone a tie. Looking after every round
    must not push the rate of wrong decisions past the nominal 5%, with the zone or without."""
    rng = np.random.default_rng(7)
    points = [_looks(rng, ratio, LOAD) for _ in range(150)]
    assert _wrong_rate(points, ZONE, wrong) <= ALPHA and _wrong_rate(points, None, wrong) <= ALPHA
    if ratio == 1.08:  # a real difference of 8% settles (the rule has power, it is not just cautious)
        assert [_stop(looks, ZONE)[0] for looks in points].count("beats") / len(points) > 0.6


@pytest.mark.parametrize("noise", [0.02, 0.05])
@pytest.mark.parametrize(("ratio", "wrong"), [(1 + ZONE, {"does_not_beat", "tie"}), (1 / (1 + ZONE), {"beats"})])
def test_a_tie_at_the_zones_edge_is_as_rare_as_any_wrong_decision(ratio: float, wrong: set[str],
                                                                     noise: float) -> None:
    """At the zone's edge 1 + z a tie claims the challenger at most z better where it is z better: it is wrong,
    and a tie is an interval claim like the others, so the alpha spent over the looks bounds it. Below the zone
    (the challenger z slower) only a win is wrong: a tie keeps the cheaper, the better one. On a steady machine
    (intervals about as wide as the zone, where edge ties come most often) and a busier one."""
    rng = np.random.default_rng(7)
    points = [_looks(rng, ratio, LOAD, noise) for _ in range(150)]
    assert _wrong_rate(points, ZONE, wrong) <= ALPHA


@pytest.mark.parametrize("ratio", [1.0, 1.01, 1.02])
def test_the_zone_stops_near_ties_early_without_wrong_decisions(ratio: float) -> None:
    """Two configurations within 2% of each other: without a zone many such points run to max_rounds (an
    interval around 1.01 clears it slowly or never); with it most stop before, on a tie or a decision, never
    later on the same rounds, and still decide wrongly at most 5% of the time (a tie is right inside the zone;
    at 1.02 only "does not beat" is wrong)."""
    rng = np.random.default_rng(11)
    points = [_looks(rng, ratio, LOAD, QUIET) for _ in range(100)]
    zoned = [_stop(looks, ZONE) for looks in points]
    plain = [_stop(looks, None) for looks in points]
    assert all(z <= p for (_, z), (_, p) in zip(zoned, plain, strict=True))  # never later, on the same rounds
    early = sum(r < LOAD.max_rounds for _, r in zoned) / len(zoned)
    assert early > 0.5 and early > sum(r < LOAD.max_rounds for _, r in plain) / len(plain)
    assert np.mean([r for _, r in zoned]) < np.mean([r for _, r in plain])
    wrong = {"beats", "does_not_beat"} if ratio == 1.01 else {"beats"} if ratio < 1.01 else {"does_not_beat"}
    assert sum(o in wrong for o, _ in zoned) / len(zoned) <= ALPHA


def _two_sided(h: HeadToHead) -> str:
    """The zone read on both ends (the rule before ties read the upper end only): a tie only inside
    [1 / (1 + z), 1 + z]."""
    outcome = outcome_of(h.low, h.high, h.threshold)
    if outcome == "unsettled" and h.low is not None and h.high is not None \
            and 1 / (1 + ZONE) < h.low and h.high < 1 + ZONE:
        return "tie"
    return outcome


@pytest.mark.parametrize("ratio", [0.9, 0.95, 0.97])
def test_a_challenger_a_little_slower_ties_as_soon_as_it_cannot_be_much_faster(ratio: float) -> None:
    """A drafter past its crossover measures a few percent slower than the cheaper configuration: not proven short
    of a 1% win for rounds on a busy machine, and no tie inside [1 / 1.03, 1.03] while the interval reaches below
    0.97. Reading only the upper end (the cheaper is kept whatever the lower end says), it ties once the
    challenger cannot be 3% faster: sooner on the same rounds, with a wrong win as rare as ever."""
    rng = np.random.default_rng(13)
    points = [_looks(rng, ratio, LOAD) for _ in range(150)]
    upper = [_stop(looks, ZONE) for looks in points]
    both = [next(((_two_sided(h), done) for done, h in looks if _two_sided(h) != "unsettled"),
                 ("unsettled", looks[-1][0])) for looks in points]
    assert all(u <= b for (_, u), (_, b) in zip(upper, both, strict=True))  # never later, on the same rounds
    assert np.mean([r for _, r in upper]) < np.mean([r for _, r in both])
    assert sum(o != "unsettled" for o, _ in upper) > sum(o != "unsettled" for o, _ in both)
    assert sum(o == "beats" for o, _ in upper) / len(upper) <= ALPHA


def _curtailed(looks: list[tuple[int, HeadToHead]], futility: float) -> tuple[str, int]:
    """Where the rule with the zone stops on these looks when a look whose open comparison has less than
    `futility` chance of ending as a win stops it too ("futile": the cheaper stays, unsettled)."""
    for done, h in looks:
        outcome = outcome_of(h.low, h.high, h.threshold, ZONE)
        if outcome != "unsettled":
            return outcome, done
        open_ = h.model_copy(update={"outcome": outcome})
        if futile([open_], done, LOAD.model_copy(update={"futility": futility})):
            return "futile", done
    return "unsettled", looks[-1][0]


@pytest.mark.parametrize("ratio", [1.0, 1.03, 1.05, 1.08])
def test_futility_stops_near_ties_early_and_gives_up_few_wins(ratio: float) -> None:
    """A point that cannot settle keeps the cheaper at its budget, as a loss or a tie would, so only a win could
    change its answer. Stopping once a win is unlikely (under 5% predictive probability) never adds a wrong win
    (it stops on none), gives up at most 5 in 100 of the wins running on would have shown (at a real 5% or 8%
    gain, where a win is right), and stops most near ties (within 3%, where keeping the cheaper is right) after
    the first look, on a busy machine, where without it they run to max_rounds."""
    rng = np.random.default_rng(7)
    points = [_looks(rng, ratio, LOAD) for _ in range(150)]
    with_ = [_curtailed(looks, 0.05) for looks in points]
    without = [_curtailed(looks, 0.0) for looks in points]
    assert all(w <= o for (_, w), (_, o) in zip(with_, without, strict=True))  # never later, on the same rounds
    wins, wins_before = (sum(o == "beats" for o, _ in runs) / len(runs) for runs in (with_, without))
    assert wins <= wins_before and wins_before - wins <= 0.05
    if ratio == 1.0:
        assert wins <= ALPHA
    if ratio <= 1 + ZONE:
        assert np.mean([r for _, r in with_]) < np.mean([r for _, r in without]) - 0.5
        assert sum(r < LOAD.max_rounds for _, r in with_) / len(with_) > 0.5
    assert all(win_chance(h, done, LOAD) is None for looks in points for done, h in looks if h.outcome != "unsettled")


def test_the_zones_win_chance_is_the_part_of_the_win_chance_beyond_the_zone() -> None:
    """Never above the win chance; the wider the zone, the smaller; nearly the win chance where the zone's edge is
    far below the estimate; None where the comparison has no zone (no ties: every win counts) or none is open."""
    rng = np.random.default_rng(3)
    opened = [(done, h) for _ in range(40) for done, h in _looks(rng, 1.03, LOAD, 0.05) if h.outcome == "unsettled"
              and done < LOAD.max_rounds]
    assert opened
    for done, h in opened:
        win = win_chance(h, done, LOAD)
        chances = [zone_win_chance(h.model_copy(update={"indifference": z}), done, LOAD) for z in (0.02, 0.03, 0.06)]
        assert win is not None and all(c is not None and c <= win + 1e-9 for c in chances)
        assert chances == sorted(chances, reverse=True)
        far = zone_win_chance(h.model_copy(update={"indifference": h.ratio.value - 1.0 - 0.3}), done, LOAD)
        if h.ratio.value - 1.3 > h.threshold - 1.0:
            assert far == pytest.approx(win, abs=1e-3)
        assert zone_win_chance(h.model_copy(update={"indifference": 0.01}), done, LOAD) is None
        assert zone_win_chance(h.model_copy(update={"indifference": None}), done, LOAD) is None
    done, h = opened[0]
    assert zone_win_chance(h.model_copy(update={"outcome": "tie"}), done, LOAD) is None


def _zoned(looks: list[tuple[int, HeadToHead]], zone_futility: bool) -> tuple[str, int]:
    """Where the rule stops on these looks: a beats / does-not-beat / tie, futility, and with `zone_futility` the
    zone's futility too (both "futile": the cheaper stays, unsettled)."""
    for done, h in looks:
        outcome = outcome_of(h.low, h.high, h.threshold, ZONE)
        if outcome != "unsettled":
            return outcome, done
        open_ = [h.model_copy(update={"outcome": outcome})]
        if futile(open_, done, LOAD) or (zone_futility and indifferent(open_, done, LOAD)):
            return "futile", done
    return "unsettled", looks[-1][0]


def _beyond_zone(ratio: float, outcome: str) -> bool:
    """The answer costs more than the zone: the cheaper kept where the challenger is more than z better, or the
    challenger chosen where it is more than z worse."""
    return (outcome != "beats" and ratio > 1 + ZONE) or (outcome == "beats" and ratio < 1 / (1 + ZONE))


@pytest.mark.parametrize("noise", [QUIET, 0.05, NOISY])
@pytest.mark.parametrize("ratio", [0.97, 1.0, 1.02, 1.03, 1.05, 1.08])
def test_the_zones_futility_saves_rounds_on_near_ties_and_adds_no_wrong_answers(ratio: float, noise: float) -> None:
    """The same simulated points under the rule before (ties, futility) and with the zone's futility on top: it
    stops no later on the same rounds, its answers cost more than the zone no more often than before (at most one
    point in fifty more: it gives up only wins beyond the zone the rounds left were unlikely to show), and on a
    steady machine a challenger 2% better, a real win worth less than the zone, stops sooner."""
    rng = np.random.default_rng(7)
    points = [_looks(rng, ratio, LOAD, noise) for _ in range(100)]
    before = [_zoned(looks, False) for looks in points]
    after = [_zoned(looks, True) for looks in points]
    assert all(a <= b for (_, a), (_, b) in zip(after, before, strict=True))
    wrong_before, wrong_after = (sum(_beyond_zone(ratio, o) for o, _ in runs) / len(runs) for runs in (before, after))
    assert wrong_after <= wrong_before + 0.02
    if ratio == 1.02 and noise == QUIET:
        assert np.mean([r for _, r in after]) < np.mean([r for _, r in before]) - 0.25


def _duel(sides: dict[str, Side], confidence: float) -> Callable[[str, str], HeadToHead]:
    return lambda a, b: head_to_head(sides[a], sides[b], "c1", "output_throughput", min_gain=0.01,
                                     indifference=ZONE, confidence=confidence)


def _walked(rng: np.random.Generator, speeds: dict[str, float], rest: bool,
            n: int = 12) -> tuple[str, bool, int]:
    """One simulated point of three configurations (true throughput `speeds`, shared per-request hardness, NOISY
    each), run as the runner does: every configuration the first min_rounds rounds, then a look after each round
    that stops once the walk from the baseline has settled, and with `rest` leaves out of the next round what
    resting says. The configuration chosen where it stopped, whether the walk had settled, and the requests sent."""
    summary, _ = sweep({K2: {"c1": (1.0, 1.0, 1.0)}, K4: {"c1": (1.0, 1.0, 1.0)}}, {"c1": 1.0})
    candidates = [c for c in summary.plan.configs if c.id != BASELINE]
    ran: dict[str, dict[int, np.ndarray]] = {cid: {} for cid in speeds}
    rested: set[str] = set()
    for done in range(1, LOAD.max_rounds + 1):
        hard = rng.lognormal(0.0, 0.5, n)
        for cid, speed in speeds.items():
            if cid not in rested:
                ran[cid][done - 1] = hard / speed * (1 + rng.normal(0, NOISY, n)).clip(0.5)
        if done < LOAD.min_rounds:
            continue
        sides = {cid: _side(cid, rounds) for cid, rounds in ran.items()}
        duel = _duel(sides, confidence_after(done, LOAD))
        walk = choose("c1", contenders(BASELINE, [(c, 1.0) for c in candidates]), duel, min_gain=0.01)
        if settled(walk.evidence) or done == LOAD.max_rounds:
            return (walk.best_config_id, settled(walk.evidence),
                    sum(len(e2e) for rounds in ran.values() for e2e in rounds.values()))
        rested = resting(summary, [walk.evidence], "c1", duel) if rest else set()
    raise AssertionError("unreachable: the last round returns")


@pytest.mark.parametrize(("speeds", "right"), [({BASELINE: 1.0, K2: 1.15, K4: 1.15}, {K2}),
                                               ({BASELINE: 1.0, K2: 1.15, K4: 1.15 * 1.10}, {K4}),
                                               ({BASELINE: 1.0, K2: 1.0, K4: 0.8}, {BASELINE})])
def test_resting_keeps_the_wrong_choice_rate_at_most_five_percent_and_sends_less(speeds: dict[str, float],
                                                                                  right: set[str]) -> None:
    """K = 2 clearly beats the baseline; K = 4 against K = 2 is even (a tie or "does not beat": K = 2 stays) or 10%
    better (K = 4). Or K = 2 is even with the baseline (open for long) and K = 4 20% slower than both. The same
    simulated points run with and without resting: a point that settles settles on the wrong choice at most 5% of
    the time either way (one out of budget says it is unsure), and resting sends fewer requests (the baseline sits
    out once K = 2 has settled against it; K = 4 once it has settled against both, whatever K = 2 does)."""
    rng_rest, rng_all = np.random.default_rng(5), np.random.default_rng(5)
    rested = [_walked(rng_rest, speeds, rest=True) for _ in range(100)]
    everyone = [_walked(rng_all, speeds, rest=False) for _ in range(100)]
    for runs in (rested, everyone):
        assert sum(done and choice not in right for choice, done, _ in runs) / len(runs) <= ALPHA
        if right == {K4}:  # a real 10% settles (the rule has power); an even pair mostly runs to the budget
            assert sum(done for _, done, _ in runs) / len(runs) > 0.5
    assert sum(sent for _, _, sent in rested) < sum(sent for _, _, sent in everyone)


def _adaptive_pair(tmp_path: Path, sd_chunk_s: float, base_chunk_s: float, **load: object) -> RunSummary:
    convs = conversations([f"Question {i}: explain caching." for i in range(6)])
    with FakeEngine(output_tokens=12, slow_chunk_s=sd_chunk_s, default_fault="slow") as sd, \
            FakeEngine(output_tokens=12, slow_chunk_s=base_chunk_s, default_fault="slow", seed=1,
                       speculative=False) as base:
        ex = attach_pair(sd.url, base.url, convs, interleave=True, concurrency=[2], precision="adaptive",
                         max_rounds=3, **load)
        summary, error, _ = run_plan(ex, tmp_path / "run")
    assert error is None, repr(error)
    return summary


def test_the_runner_stops_a_clear_point_after_min_rounds(tmp_path: Path) -> None:
    summary = _adaptive_pair(tmp_path, 0.004, 0.03)  # speculation four times faster per chunk: clear at once
    (entry,) = summary.sampling
    assert (entry.precision, entry.stopped, entry.rounds) == ("adaptive", "settled", 2)
    records = [r for r in RunStore(tmp_path / "run").read_records() if not r.warmup]
    assert {r.repeat for r in records} == {0, 1}
    assert entry.requests == len([r for r in records if r.config_id == "ngram-k4"]) == 2 * 8  # 4 x N a round
    (choice,) = summary.analysis.choices
    assert choice.best_config_id == "ngram-k4" and choice.settled
    assert load_summary(tmp_path / "run").sampling == summary.sampling


def test_the_runner_runs_an_undecided_point_to_its_budget(tmp_path: Path) -> None:
    summary = _adaptive_pair(tmp_path, 0.01, 0.01, futility=0.0)  # the same speed: 1% either way is never
    (entry,) = summary.sampling  # settled... or settles as a tie, or "does not beat" once under 1.01
    assert entry.stopped in ("settled", "budget") and 2 <= entry.rounds <= 3
    if entry.stopped == "budget":
        assert entry.rounds == 3 and "max_rounds" in entry.why and entry.looks[-1].open
    else:
        (choice,) = summary.analysis.choices
        assert choice.best_config_id == BASELINE  # settled only as "does not beat" or a tie: the baseline stays
    assert [lk.rounds for lk in entry.looks] == list(range(2, entry.rounds + 1))
