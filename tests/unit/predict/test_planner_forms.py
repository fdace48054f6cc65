"""The step-cost form chosen by the calibration's own held-out error: the form that generated the points wins where
the data can tell it apart (two Ks or more), the forms one K cannot tell apart are kept together and the prediction
spans them, a bend beyond the measured batches is not a candidate, and intervals built from the held-out error hold
at least 90% of steps nobody calibrated on."""

from __future__ import annotations

import numpy as np
import pytest
from estimate_fixtures import iid_al

from specmeter.predict.acceptance import ALEstimate
from specmeter.predict.forms import CANDIDATES, STEP, choose
from specmeter.predict.observations import Mix, prefill_per_step
from specmeter.predict.predict import Predictor
from specmeter.schemas.planner import Calibration, Observation, StepForm

PROMPT, OUTPUT = 100.0, 100.0
BATCHES = (1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0)
A = 0.7  # iid acceptance of the synthetic drafter


def true_step(k: int, batch: float, per_pass: bool, cap: float | None) -> float:
    """A target of 4 ms + 0.3 ms a sequence (only up to `cap` sequences, then 0.02 ms) + 0.05 ms a verified token;
    a drafter paid 0.8 ms and 0.05 ms a sequence per pass (per_pass), or 2 ms a speculative step whatever K."""
    seqs = batch if cap is None else min(batch, cap) + 0.02 / 0.3 * max(0.0, batch - cap)
    step = 4e-3 + 3e-4 * seqs + 5e-5 * batch * (1 + k)
    if k:
        step += k * (8e-4 + 5e-5 * batch) if per_pass else 2e-3
    return step


def sweep(ks: tuple[int, ...], per_pass: bool, cap: float | None = None, noise: float = 0.0,
          seed: int = 0) -> list[Observation]:
    """The baseline and `ks` at every concurrency of BATCHES; each point's running batch a little under its
    concurrency and its tokens per step near AL, by chance, as measured points read them (exact values would make
    the terms of one K exactly collinear, which measured points never are)."""
    rng = np.random.default_rng(seed)
    out = []
    for concurrency in BATCHES:
        for k in (0, *ks):
            batch = concurrency if concurrency == 1.0 else concurrency * rng.uniform(0.9, 1.0)
            tokens = iid_al(A, k) * rng.uniform(0.97, 1.03) if k else 1.0
            step = true_step(k, batch, per_pass, cap) * (1 + noise * rng.standard_normal())
            out.append(Observation(run="synthetic", config_id=f"k{k}", point_id=f"c{concurrency:g}", repeat=0,
                                   drafter="draft" if k else None, k=float(k), batch=batch, tokens_per_step=tokens,
                                   kv_tokens=batch * (PROMPT + OUTPUT / 2),
                                   prefill_tokens=prefill_per_step(batch, tokens, PROMPT, OUTPUT), step_s=step))
    return out


def exact(k: int) -> ALEstimate:
    al = iid_al(A, k)
    return ALEstimate(k=k, al=al, low=al, high=al)


def blind_errors(predictor: Predictor, k: int, per_pass: bool, cap: float | None = None) -> list[float]:
    """The predicted speedup of K at every batch against the true one."""
    errors = []
    for batch in BATCHES:
        est = predictor.estimate("draft", k, exact(k), batch)
        assert not isinstance(est, str), (k, batch, est)
        truth = iid_al(A, k) * true_step(0, batch, per_pass, cap) / true_step(k, batch, per_pass, cap)
        errors.append(est.speedup / truth - 1.0)
    return errors


@pytest.mark.parametrize("per_pass", [True, False])
def test_two_ks_or_more_choose_how_the_drafter_is_paid_and_predict_another_k(per_pass: bool) -> None:
    chosen = choose(sweep((1, 2, 4), per_pass), ["draft"])
    assert chosen.record is not None and chosen.record.scheme == "leave one K out" and chosen.record.decided
    paid = set(chosen.fit.form.drafter_terms)
    assert ("per_draft" in paid) if per_pass else ("per_step" in paid)
    predictor = Predictor(chosen.fit, Mix(PROMPT, OUTPUT), chosen.tied,
                          chosen.record.half_width)
    assert max(abs(e) for e in blind_errors(predictor, 3, per_pass)) < 0.02
    assert max(abs(e) for e in blind_errors(predictor, 6, per_pass)) < 0.05


def test_steps_that_flatten_past_a_batch_choose_a_cap_there() -> None:
    chosen = choose(sweep((1, 2, 4), per_pass=True, cap=8.0), ["draft"])
    assert chosen.fit.form.caps == (8.0,)
    straight = choose(sweep((1, 2, 4), per_pass=True), ["draft"], [c for c in CANDIDATES if not c.caps])
    assert chosen.record is not None and straight.record is not None
    assert chosen.record.scores[0].score < 0.01  # the true form predicts its held-out Ks within rounding


def test_one_k_keeps_the_forms_it_cannot_tell_apart_and_the_prediction_spans_them() -> None:
    """One K: a cost per pass and one per step fit its points alike (leave one load out ties them). The prediction
    at other Ks is the middle of the tied forms that can make one, and its interval holds a drafter paid either
    way."""
    for per_pass in (True, False):
        chosen = choose(sweep((2,), per_pass), ["draft"])
        record = chosen.record
        assert record is not None and record.scheme == "leave one load out"
        forms = {chosen.fit.form.drafter_terms, *(t.drafter_terms for t in record.tied)}
        assert ("per_draft", "per_draft_token") in forms and STEP in forms
        assert record.spread is not None and record.spread_at is not None
        predictor = Predictor(chosen.fit, Mix(PROMPT, OUTPUT), chosen.tied, record.half_width)
        for k in (1, 4, 6):
            for batch in BATCHES:
                est = predictor.estimate("draft", k, exact(k), batch)
                assert not isinstance(est, str) and est.low is not None and est.high is not None
                truth = iid_al(A, k) * true_step(0, batch, per_pass, None) / true_step(k, batch, per_pass, None)
                assert est.low <= truth <= est.high, (per_pass, k, batch)


def test_a_bend_beyond_the_measured_batches_is_not_a_candidate() -> None:
    few = [o for o in sweep((1, 2, 4), per_pass=True) if o.batch <= 8.0]
    top = max(o.batch for o in few)
    chosen = choose(few, ["draft"])
    assert chosen.record is not None
    for score in chosen.record.scores:
        assert all(1.0 < b < top for b in (*score.form.caps, *score.form.knees))


def test_too_few_loads_to_hold_one_out_keep_the_default_form_and_say_so() -> None:
    two = [o for o in sweep((2,), per_pass=True) if o.point_id in ("c1", "c4")]
    chosen = choose(two, ["draft"])
    assert chosen.record is not None and not chosen.record.decided and chosen.tied == ()
    assert chosen.fit.form == CANDIDATES[0] == StepForm()


def test_intervals_from_the_held_out_error_hold_nine_in_ten_unseen_ks() -> None:
    """Noisy sweeps (4% per point), calibrated on K = 1, 2 and 4, K = 3 and 6 predicted blind: at least 90% of the
    true speedups fall inside the predicted 95% intervals, over twenty draws."""
    inside = total = 0
    for seed in range(20):
        per_pass = seed % 2 == 0
        chosen = choose(sweep((1, 2, 4), per_pass, noise=0.04, seed=seed), ["draft"])
        assert chosen.record is not None
        predictor = Predictor(chosen.fit, Mix(PROMPT, OUTPUT), chosen.tied, chosen.record.half_width)
        for k in (3, 6):
            for batch in BATCHES:
                est = predictor.estimate("draft", k, exact(k), batch)
                assert not isinstance(est, str) and est.low is not None and est.high is not None
                truth = iid_al(A, k) * true_step(0, batch, per_pass, None) / true_step(k, batch, per_pass, None)
                inside += est.low <= truth <= est.high
                total += 1
    assert inside / total >= 0.9


def test_a_calibration_file_without_a_form_reads_as_the_per_pass_form() -> None:
    stored = Calibration(engine="vllm", engine_version=None, hardware="cpu", target="t", runs=["r"], terms=[],
                         coefficients=[], covariance=[], residual_scale=None, dof=0, rank=0, drafters=[],
                         observations=[]).model_dump(mode="json")
    del stored["form"], stored["choice"]
    read = Calibration.model_validate(stored)
    assert read.form == StepForm() and read.choice is None
