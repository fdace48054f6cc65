"""Which unmeasured K the step-cost model proposes (predict/proposals.py), on a calibration fitted to points a known
step-cost model generated: a K is proposed exactly where the model predicts it beats the K chosen there by more than
the minimum gain, model against model, within the K range."""

from __future__ import annotations

import numpy as np
import pytest
from estimate_fixtures import iid_al

from specmeter.predict.acceptance import AcceptanceProfile
from specmeter.predict.observations import Mix, prefill_per_step
from specmeter.predict.predict import Predictor
from specmeter.predict.proposals import Proposal, inside_zone, k_span, proposals, ranked
from specmeter.predict.stepcost import features, fit
from specmeter.schemas.planner import Observation
from specmeter.schemas.proposal import Contest
from specmeter.schemas.recommend import DrafterRecommendation, Score, Segment

DRAFTER = "draft"
# fixed, per_sequence, per_token, per_kv_token, per_prefill_token; the drafter's per_draft, per_draft_token
TRUE = np.array([4e-3, 3e-4, 6e-4, 2e-6, 1e-4, 5e-4, 8e-5])
ALPHA = 0.7
MEASURED = (2, 4)
MIN_GAIN = 0.01


def _predictor() -> Predictor:
    """The model fitted, without noise, on the baseline and K 2 and 4 at six loads of one request mix."""
    obs = []
    for batch in (1.0, 2.0, 4.0, 8.0, 16.0, 32.0):
        for k in (0, *MEASURED):
            tokens = iid_al(ALPHA, k) if k else 1.0
            kv, pre = batch * 150.0, prefill_per_step(batch, tokens, 100.0, 100.0)
            step = float(features([DRAFTER], DRAFTER if k else None, k, batch, kv, pre) @ TRUE)
            obs.append(Observation(run="synthetic", config_id=f"k{k}", point_id=f"b{batch}", repeat=0,
                                   drafter=DRAFTER if k else None, k=k, batch=batch, tokens_per_step=tokens,
                                   kv_tokens=kv, prefill_tokens=pre, step_s=step))
    return Predictor(fit(obs, [DRAFTER]), Mix(prompt_tokens=100.0, output_tokens=100.0))


PREDICTOR = _predictor()
PROFILE = AcceptanceProfile.iid(ALPHA, 8)


def predicted(k: int, batch: float) -> float:
    est = PREDICTOR.estimate(DRAFTER, k, PROFILE.al(k), batch)
    assert not isinstance(est, str)
    return est.speedup


def cid(k: int) -> str:
    return "baseline" if k == 0 else f"draft_model-k{k}"


def segment(point: str, batch: float, k: int, measured: dict[int, float] | None = None) -> Segment:
    """A measured stretch where the sweep chose K = `k`; `measured`: each contender's measured speedup (default:
    what the model predicts, speculation off 1)."""
    values = measured or {j: predicted(j, batch) for j in MEASURED}
    scores = [Score(config_id="baseline", k=0, value=1.0),
              *(Score(config_id=cid(j), k=j, value=v) for j, v in values.items())]
    return Segment(start=max(1, round(batch)), end=max(1, round(batch)), k=k, basis="measured", point_ids=[point],
                   engine_batch=[batch], scores=scores, chosen=cid(k), reason="chosen")


def drafter(*segments: Segment) -> DrafterRecommendation:
    return DrafterRecommendation(drafter="draft_model demo-draft", candidates=[cid(k) for k in MEASURED], ranges=[],
                                 segments=list(segments), spec=None, static_k=0, static_config_id=None,
                                 static_reason="", score=None)


def best_unmeasured(batch: float, ks: list[int]) -> int:
    return max(ks, key=lambda k: predicted(k, batch))


def test_the_span_is_the_swept_ks_widened_by_one_from_1_or_the_range_given() -> None:
    assert k_span([2, 4]) == [1, 3, 5]
    assert k_span([1, 2]) == [3]
    assert k_span([3]) == [2, 4]
    assert k_span([2, 4], (1, 6)) == [1, 3, 5, 6]
    assert k_span([2, 4], (5, 5)) == [5]


def test_a_k_is_proposed_where_its_prediction_beats_the_chosen_ks_by_the_minimum_gain() -> None:
    """Each stretch chose the measured K the model rates lower than some unmeasured K (or the best one): an
    unmeasured K is proposed at a stretch exactly when its prediction clears the chosen K's by the minimum gain."""
    stretches = [segment("c1", 1.0, 4), segment("c4", 4.0, 2), segment("c16", 16.0, 2)]
    found = proposals(PREDICTOR, DRAFTER, PROFILE, drafter(*stretches), MEASURED, min_gain=MIN_GAIN)
    assert found, "the model rates some unmeasured K above a chosen one"
    for seg in stretches:
        batch = seg.engine_batch[0]
        for k in k_span(MEASURED):
            wins = predicted(k, batch) > predicted(seg.k, batch) * (1 + MIN_GAIN)
            proposed = [c for p in found if p.k == k for c in p.contests if c.point_ids == seg.point_ids]
            assert bool(proposed) == wins, (k, seg.point_ids)
            for c in proposed:
                assert c.incumbent == seg.chosen and c.incumbent_k == seg.k and c.anchor is None
                assert c.edge == pytest.approx(predicted(k, batch) / predicted(seg.k, batch))
    assert all(p.k not in MEASURED and p.drafter == "draft_model demo-draft" for p in found)


def test_model_against_model_what_the_incumbent_measured_does_not_move_a_proposal() -> None:
    """Where a K was chosen, the model's prediction of it is the reference, so its bias at that batch cancels: a
    measured speedup far off the prediction changes nothing."""
    as_predicted = proposals(PREDICTOR, DRAFTER, PROFILE, drafter(segment("c1", 1.0, 4)), MEASURED, min_gain=MIN_GAIN)
    far_off = proposals(PREDICTOR, DRAFTER, PROFILE, drafter(segment("c1", 1.0, 4, {2: 0.8, 4: 2.5})), MEASURED,
                        min_gain=MIN_GAIN)
    assert as_predicted == far_off and as_predicted


def test_where_speculation_off_was_chosen_a_measured_k_puts_it_on_the_models_scale() -> None:
    """At a large batch the sweep kept speculation off. If the nearest measured K measured what the model predicts,
    the unmeasured K the model rates above speculation off is proposed; if it measured well below its prediction
    (the model flatters drafting there), the same K is not: the bias cancels through that K."""
    batch = 32.0
    k = best_unmeasured(batch, k_span(MEASURED))
    assert predicted(k, batch) > 1 + MIN_GAIN
    honest = {j: predicted(j, batch) for j in MEASURED}
    found = proposals(PREDICTOR, DRAFTER, PROFILE, drafter(segment("c32", batch, 0, honest)), MEASURED,
                      min_gain=MIN_GAIN)
    (contest,) = next(p for p in found if p.k == k).contests
    assert contest.incumbent == "baseline" and contest.incumbent_k == 0
    nearest = min(MEASURED, key=lambda j: (abs(j - k), j))
    assert contest.anchor == cid(nearest) and contest.predicted_incumbent == pytest.approx(1.0)
    flattered = drafter(segment("c32", batch, 0, {j: predicted(j, batch) * 0.8 for j in MEASURED}))
    assert not any(p.k == k for p in proposals(PREDICTOR, DRAFTER, PROFILE, flattered, MEASURED, min_gain=MIN_GAIN))


def test_nothing_is_proposed_where_the_chosen_k_is_the_models_best_or_outside_the_range() -> None:
    batch = 4.0
    top = best_unmeasured(batch, [1, 2, 3, 4, 5])
    assert top in MEASURED  # the scenario: at this batch the model's best K was swept
    assert not proposals(PREDICTOR, DRAFTER, PROFILE, drafter(segment("c4", batch, top)), MEASURED, min_gain=MIN_GAIN)
    found = proposals(PREDICTOR, DRAFTER, PROFILE, drafter(segment("c1", 1.0, 4)), MEASURED, min_gain=MIN_GAIN,
                      k_range=(5, 6))
    assert all(p.k in (5, 6) for p in found)
    huge = proposals(PREDICTOR, DRAFTER, PROFILE, drafter(segment("c1", 1.0, 4)), MEASURED, min_gain=0.5)
    assert huge == []


def test_proposals_rank_by_their_largest_predicted_edge() -> None:
    stretches = [segment("c1", 1.0, 4), segment("c16", 16.0, 2), segment("c32", 32.0, 4)]
    found = ranked(proposals(PREDICTOR, DRAFTER, PROFILE, drafter(*stretches), MEASURED, min_gain=MIN_GAIN))
    assert len(found) >= 2
    assert [p.edge for p in found] == sorted((p.edge for p in found), reverse=True)
    assert all(p.edge == max(c.edge for c in p.contests) > 1 + MIN_GAIN for p in found)


def test_a_k_the_calibration_cannot_speak_for_proposes_nothing() -> None:
    """A drafter the calibration never saw: no prediction, so no proposal (nothing is guessed)."""
    assert proposals(PREDICTOR, "another drafter", PROFILE, drafter(segment("c1", 1.0, 4)), MEASURED,
                     min_gain=MIN_GAIN) == []


def contest(point: str, incumbent_k: int, edge: float) -> Contest:
    return Contest(point_ids=[point], batch=1.0, incumbent=cid(incumbent_k), incumbent_k=incumbent_k,
                   predicted=1.2 * edge, predicted_incumbent=1.2)


def test_a_k_predicted_inside_the_indifference_zone_is_set_aside_and_named() -> None:
    """Measured as predicted, a K at most the zone better than the K chosen settles as a tie: K = 5 past K = 4 (which a
    tie could not let in) and K = 1 under K = 2 (which it would, for at most the zone) alike. A proposal keeps the
    stretches outside the zone, and the rest are named."""
    zone = 0.03
    k5 = Proposal(drafter="d", k=5, contests=(contest("c1", 4, 1.02), contest("c4", 4, 1.05),
                                              contest("c64", 0, 1.03)))
    k1 = Proposal(drafter="d", k=1, contests=(contest("c16", 2, 1.015), contest("c32", 0, 1.08)))
    measure, inside = inside_zone([k5, k1], zone)
    assert [(p.k, [c.point_ids for c in p.contests]) for p in measure] == [(5, [["c4"]]), (1, [["c32"]])]
    assert [(p.k, [c.point_ids for c in p.contests]) for p in inside] == [(5, [["c1"], ["c64"]]), (1, [["c16"]])]
    assert all(c.edge <= 1 + zone for p in inside for c in p.contests)
    assert all(c.edge > 1 + zone for p in measure for c in p.contests)
    measure, inside = inside_zone([k5, k1], None)  # decided before ties existed: a win by the minimum gain is all
    assert measure == [k5, k1] and inside == []
    only = Proposal(drafter="d", k=5, contests=(contest("c1", 4, 1.02),))
    assert inside_zone([only], zone) == ([], [only])  # nothing left to measure: no proposal runs
