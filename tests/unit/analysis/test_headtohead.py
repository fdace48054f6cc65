"""Head-to-head decisions (analysis/headtohead.py, analysis/choice.py): configurations compared with each other,
paired on the requests both ran, walked from the cheapest; a costlier one wins only by more than min gain, and two
settled within the indifference zone of each other are a tie that keeps the cheaper."""

from __future__ import annotations

import numpy as np
import pytest
from test_recommend import TOKENS, latency, sweep

from specmeter.analysis.choice import Contender, choose
from specmeter.analysis.decide import analyze
from specmeter.analysis.headtohead import Paired, Side, compare, head_to_head, outcome_of
from specmeter.analysis.recommend import recommend
from specmeter.config.models import SpecMethod
from specmeter.plans.run import BASELINE
from specmeter.schemas.analysis import HeadToHead, Outcome, Ratio
from specmeter.schemas.records import RequestRecord
from specmeter.schemas.results import ConfigResult, PointResult
from specmeter.schemas.sd import SDSummary

K2, K4 = "draft_model-k2", "draft_model-k4"


def shared_noise_sweep(n: int = 24, seed: int = 3) -> tuple[object, list[RequestRecord]]:
    """The demo's case: K = 2 at 1.55x and K = 4 at 1.67x over a noisy baseline. Both candidates carry the
    baseline's noise (their intervals against it are wide and overlap), while per request K = 4 runs a steady
    1.08x faster than K = 2."""
    summary, records = sweep({K2: {"c1": (1.55, 1.54, 1.56)}, K4: {"c1": (1.67, 1.66, 1.67)}}, {"c1": 1.0})
    rng = np.random.default_rng(seed)
    noise = {r.conversation_id: float(rng.normal(0.0, 0.25)) for r in records}
    base = {r.conversation_id: r for r in records if r.config_id == BASELINE}
    for r in records:  # the baseline's own per-request noise; the candidates pair it away from each other only
        if r.config_id == BASELINE:
            r.e2e_s = (r.e2e_s or 0.0) * (1.0 + abs(noise[r.conversation_id]))
    for res in summary.configs:  # type: ignore[attr-defined]
        recs = [r for r in records if r.config_id == res.config_id]
        res.points[0].latency = latency(sum(r.e2e_s or 0.0 for r in recs), TOKENS * len(recs))
    assert base
    summary.analysis = analyze(summary, records)  # type: ignore[attr-defined]
    return summary, records


def test_a_larger_k_that_beats_the_smaller_per_request_wins_where_baseline_intervals_overlap() -> None:
    summary, records = shared_noise_sweep()
    speedups = {s.config_id: s.output_throughput for s in summary.analysis.speedups}  # type: ignore[attr-defined]
    k2, k4 = speedups[K2], speedups[K4]
    assert k2.ci95_high is not None and k4.ci95_low is not None
    assert k4.ci95_low < k2.ci95_high  # the old rule's tie: the intervals against the baseline overlap
    (choice,) = summary.analysis.choices  # type: ignore[attr-defined]
    assert choice.best_config_id == K4
    duel = next(h for h in choice.evidence if h.config_id == K4)
    assert duel.against == K2 and duel.outcome == "beats" and duel.low is not None and duel.low > 1.01
    best = recommend(summary, records).best  # type: ignore[arg-type]
    assert best is not None and best.ranges[0].k == 4
    assert any(h.config_id == K4 and h.against == K2 for h in best.segments[0].evidence)


def test_a_larger_k_that_gains_less_than_min_gain_loses_to_the_smaller() -> None:
    """K = 4 is 0.5% faster than K = 2 on every request: clearly faster, but not by the 1% a larger K must win by."""
    summary, records = sweep({K2: {"c1": (1.500, 1.499, 1.501)}, K4: {"c1": (1.5075, 1.5065, 1.5085)}}, {"c1": 1.0})
    (choice,) = summary.analysis.choices
    assert choice.best_config_id == K2
    duel = next(h for h in choice.evidence if h.config_id == K4)
    assert duel.outcome == "does_not_beat" and duel.low is not None and duel.low > 1.0
    assert recommend(summary, records, min_gain=0.001).best.ranges[0].k == 4  # type: ignore[union-attr]


def test_repeats_that_disagree_leave_the_duel_unsettled_and_the_smaller_k_chosen() -> None:
    rows = {K2: {"c1": [(1.3, 1.29, 1.31)] * 3},
            K4: {"c1": [(1.45, 1.44, 1.46), (1.25, 1.24, 1.26), (1.55, 1.54, 1.56)]}}
    summary, _ = sweep(rows, {"c1": 1.0})
    (choice,) = summary.analysis.choices
    duel = next(h for h in choice.evidence if h.config_id == K4)
    assert duel.ratio.mad is not None and len(duel.ratio.repeat_values) == 3
    assert duel.outcome == "unsettled" and choice.best_config_id == K2 and not choice.settled


@pytest.mark.parametrize(("low", "high", "expected"), [
    (0.99, 1.02, "tie"),             # across 1 + min gain, ending below 1.03
    (0.975, 1.029, "tie"),           # still below
    (0.99, 1.04, "unsettled"),       # across, and reaching past the zone: the challenger may be 4% better
    (0.96, 1.02, "tie"),             # how much slower it may be does not matter: the cheaper is kept either way
    (0.80, 1.025, "tie"),            # a drafter past its crossover: much slower or at most 2.5% better
    (0.98, 1.03, "unsettled"),       # ending below means below: the zone's edge is out
    (1.015, 1.025, "beats"),         # inside the zone, but it clears 1 + min gain: a win stays a win
    (0.98, 1.005, "does_not_beat"),  # inside the zone, wholly below the threshold: as before
    (None, None, "unsettled"),       # no interval, no tie
])
def test_a_tie_is_an_interval_across_the_threshold_ending_inside_the_zone(
        low: float | None, high: float | None, expected: Outcome) -> None:
    assert outcome_of(low, high, 1.01, 0.03) == expected


def test_the_zone_only_settles_what_the_threshold_leaves_open() -> None:
    """Beats and does not beat read as without a zone; a zone equal to min gain has no ties at all."""
    grid = [(lo, hi) for lo in np.linspace(0.9, 1.1, 21) for hi in np.linspace(0.9, 1.1, 21) if lo <= hi]
    for lo, hi in grid:
        without = outcome_of(lo, hi, 1.01)
        with_zone = outcome_of(lo, hi, 1.01, 0.03)
        assert with_zone == without or (without, with_zone) == ("unsettled", "tie")
        assert outcome_of(lo, hi, 1.01, 0.01) == without
    assert {outcome_of(lo, hi, 1.01, 0.03) for lo, hi in grid} == {"beats", "does_not_beat", "tie", "unsettled"}


def test_a_tie_keeps_the_cheaper_settles_the_choice_and_says_how_close() -> None:
    """K = 4 is 0.8% faster than K = 2 on every request, within [0.998, 1.019]: not a 1% win, not proven short of
    one either; but at most 3% better than K = 2, so the cheaper stays, within 3% of the better."""
    summary, records = sweep({K2: {"c1": (1.30, 1.29, 1.31)}, K4: {"c1": (1.31, 1.30, 1.32)}}, {"c1": 1.0})
    (choice,) = summary.analysis.choices
    duel = next(h for h in choice.evidence if h.config_id == K4)
    assert duel.outcome == "tie" and duel.indifference == summary.plan.indifference == 0.03
    assert duel.low is not None and duel.high is not None and duel.low < duel.threshold < duel.high < 1.03
    assert choice.best_config_id == K2 and choice.settled
    assert "ties with" in duel.summary() and "at most 3% better" in duel.summary()
    assert f"{duel.high:.3f}" in choice.reason
    best = recommend(summary, records).best
    assert best is not None and best.ranges[0].k == 2
    assert any(h.outcome == "tie" for h in best.segments[0].evidence)
    # Without the zone the same evidence is open, and the same (cheaper) configuration is chosen.
    summary.plan.indifference = summary.plan.min_gain
    (open_choice,) = analyze(summary, records).choices
    assert open_choice.best_config_id == K2 and not open_choice.settled


def test_the_walk_goes_from_the_cheapest_and_replaces_only_on_a_win() -> None:
    outcomes: dict[tuple[str, str], Outcome] = {
        ("eagle-k2", "baseline"): "beats", ("draft-k2", "eagle-k2"): "unsettled",
        ("ngram-k4", "eagle-k2"): "does_not_beat", ("draft-k4", "eagle-k2"): "beats",
        ("eagle-k6", "draft-k4"): "tie"}
    asked: list[tuple[str, str]] = []

    def duel(a: str, b: str) -> HeadToHead:
        asked.append((a, b))
        return HeadToHead(point_id="c1", config_id=a, against=b, metric="output_throughput", ratio=Ratio(value=1.0),
                          low=None, high=None, threshold=1.01, outcome=outcomes[(a, b)], paired_requests=10)

    contenders = [Contender.of("draft-k4", 4, SpecMethod.draft_model, 1.6, 3),
                  Contender.of("eagle-k2", 2, SpecMethod.eagle, 1.4, 1),
                  Contender.of("baseline", 0, SpecMethod.none, 1.0),
                  Contender.of("draft-k2", 2, SpecMethod.draft_model, 1.5, 2),
                  Contender.of("ngram-k4", 4, SpecMethod.ngram, 1.2, 0),
                  Contender.of("broken", 6, SpecMethod.ngram, None),
                  Contender.of("eagle-k6", 6, SpecMethod.eagle, 1.61, 4)]
    pick = choose("c1", contenders, duel, min_gain=0.01)
    # By K first, then what the drafter costs: baseline < eagle-k2 < draft-k2 < ngram-k4 < draft-k4; a
    # contender without a value is left out. Each is compared with the choice so far, never with the rest; a
    # tie keeps the choice so far.
    assert asked == [("eagle-k2", "baseline"), ("draft-k2", "eagle-k2"), ("ngram-k4", "eagle-k2"),
                     ("draft-k4", "eagle-k2"), ("eagle-k6", "draft-k4")]
    assert (pick.best_config_id, pick.best_k, pick.leader_config_id) == ("draft-k4", 4, "eagle-k6")
    assert [h.outcome for h in pick.evidence] == ["beats", "unsettled", "does_not_beat", "beats", "tie"]
    assert not pick.settled  # draft-k2 against eagle-k2 could still go either way
    with pytest.raises(ValueError):
        choose("c1", [Contender.of("a", 2, SpecMethod.ngram, None)], duel, min_gain=0.01)


def _side(cid: str, e2e: list[float], tokens: int = 100) -> Side:
    recs = [RequestRecord(config_id=cid, point_id="c1", conversation_id=f"q{i}", ok=True, ttft_s=0.1 * x, e2e_s=x,
                          output_tokens=tokens) for i, x in enumerate(e2e)]
    res = ConfigResult(config_id=cid, role="candidate", spec_label=cid, points=[
        PointResult(point_id="c1", latency=latency(sum(e2e), tokens * len(e2e)), sd=SDSummary(available=False))])
    return Side.of(res, recs, "c1")


def test_one_function_pairs_every_metric_and_keeps_the_direction() -> None:
    slow = _side("a", [2.0, 4.0, 6.0, 8.0])
    fast = _side("b", [1.0, 2.0, 3.0, 4.0])
    assert compare(fast, slow, "output_throughput").value == pytest.approx(2.0)
    assert compare(fast, slow, "tpot").value == pytest.approx(2.0)  # > 1: `fast` is faster per token
    assert compare(slow, fast, "e2e").value == pytest.approx(0.5)
    good = compare(fast, slow, "goodput", good=lambda r: (r.e2e_s or 0) < 3.5)
    assert good.value == pytest.approx((3 / 10.0) / (1 / 20.0))
    with pytest.raises(ValueError):
        compare(fast, slow, "goodput")
    h2h = head_to_head(fast, slow, "c1", "output_throughput", min_gain=0.01)
    assert h2h.outcome == "beats" and h2h.paired_requests == 4 and h2h.threshold == pytest.approx(1.01)



def _later(side: Side) -> Side:
    """The same side as a later run pooled in measured it: its repeat numbered 1000."""
    return Side(side.config_id, {(1000, c, t): r for (_, c, t), r in side.requests.items()}, {1000: side.totals[0]})


def test_throughput_compares_only_the_repeats_both_ran() -> None:
    """Pooled evidence: `b` also ran in an earlier run, on a machine twice as fast then; `a` ran only in the later
    one. Their throughput ratio is the later run's alone, never one run's against another's."""
    a, b = _later(_side("a", [2.0] * 3)), _later(_side("b", [1.0] * 3))
    earlier = _side("b", [0.5] * 3)
    pooled = compare(a, earlier.merged(b), "output_throughput")
    assert pooled.value == pytest.approx(compare(a, b, "output_throughput").value or 0.0)


def test_a_repeat_only_one_side_ran_is_left_out_not_counted_as_unequal_work() -> None:
    """A configuration resting from a round on ran fewer repeats than the one it is compared with: the comparison
    is on the repeats both ran, which is the same work. A request one side completed in a repeat both ran is not."""
    a, b = _side("a", [2.0] * 3), _side("b", [1.0] * 3)
    resting = Paired.of(a.merged(_later(a)), b)
    assert resting.repeats == [0] and resting.unmatched == 0 and len(resting.keys) == 3
    missing = Side("b", dict(list(b.requests.items())[:2]), b.totals)
    assert Paired.of(a, missing).unmatched == 1
    assert Paired.of(_later(a), b).unmatched == 6  # nothing in common: none of it is the same work
