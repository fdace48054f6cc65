"""The step-cost model: calibration recovers known coefficients from points a known model generated (plus
noise), refuses what the data cannot determine, and reduces to Leviathan et al.'s speedup when the step cost
does not depend on what the step holds (memory-bound)."""

from __future__ import annotations

import numpy as np
import pytest
from estimate_fixtures import iid_al

from specmeter.predict.acceptance import AcceptanceProfile
from specmeter.predict.observations import Mix, prefill_per_step
from specmeter.predict.predict import Predictor
from specmeter.predict.stepcost import features, fit, nnls, observation_features
from specmeter.schemas.planner import Observation

DRAFTERS = ["draft", "ngram"]
# fixed, per_sequence, per_token, per_kv_token, per_prefill_token; draft: per_draft, per_draft_token; ngram: ...
TRUE = np.array([4e-3, 3e-4, 6e-4, 2e-6, 1e-4, 5e-4, 8e-5, 1e-5, 0.0])


def observation(drafter: str | None, k: float, batch: float, prompt: float, output: float, tokens: float,
                noise: float, rng: np.random.Generator) -> Observation:
    kv = batch * (prompt + output / 2)
    pre = prefill_per_step(batch, tokens, prompt, output)
    step = float(features(DRAFTERS, drafter, k, batch, kv, pre) @ TRUE) * (1 + noise * rng.standard_normal())
    return Observation(run="synthetic", config_id=f"{drafter}-{k}", point_id=f"b{batch}", repeat=0, drafter=drafter,
                       k=k, batch=batch, tokens_per_step=tokens, kv_tokens=kv, prefill_tokens=pre, step_s=step)


def points(noise: float, seed: int = 0) -> list[Observation]:
    """Two request mixes, several loads, K 0..4 of a draft model and an n-gram drafter."""
    rng = np.random.default_rng(seed)
    out = []
    for prompt, output in ((100.0, 100.0), (1000.0, 200.0)):
        for batch in (1.0, 2.0, 4.0, 8.0, 16.0, 32.0):
            out.append(observation(None, 0.0, batch, prompt, output, 1.0, noise, rng))
            for k in (1, 2, 4):
                out.append(observation("draft", k, batch, prompt, output, iid_al(0.7, k), noise, rng))
                out.append(observation("ngram", k, batch, prompt, output, iid_al(0.4, k), noise, rng))
    return out


def test_calibration_recovers_known_coefficients() -> None:
    model = fit(points(noise=0.0), DRAFTERS)
    assert model.coefficients == pytest.approx(TRUE, rel=1e-6, abs=1e-12)
    noisy = fit(points(noise=0.01, seed=3), DRAFTERS)
    assert noisy.scale is not None and 0.005 < noisy.scale < 0.02  # it reads the 1% noise back
    # Every true cost is inside a few standard errors of its estimate.
    se = noisy.scale * np.sqrt(np.diag(noisy.covariance))
    kept = noisy.coefficients > 0
    assert np.all(np.abs(noisy.coefficients - TRUE)[kept] <= 4 * se[kept] + 1e-7)
    assert np.all(noisy.coefficients >= 0)


def test_nnls_solves_the_constrained_problem() -> None:
    rng = np.random.default_rng(0)
    a = rng.random((30, 5))
    b = a @ np.array([1.0, 0.0, 2.0, 0.0, 0.5]) + 0.01 * rng.standard_normal(30)
    b -= 0.5 * a[:, 1]  # a negative contribution the constraint must clip to zero
    x = nnls(a, b)
    assert np.all(x >= 0)
    grad = a.T @ (b - a @ x)
    # Karush-Kuhn-Tucker: no improving direction among the clipped terms, none left among the kept ones.
    assert np.all(grad[x == 0] <= 1e-8)
    assert np.allclose(grad[x > 0], 0.0, atol=1e-8)


def test_a_prediction_the_data_do_not_determine_is_refused() -> None:
    # One request mix: KV is proportional to the batch, so a longer prompt cannot be told apart.
    one_mix = [o for o in points(noise=0.0) if o.kv_tokens / o.batch == 150.0]
    model = fit(one_mix, DRAFTERS)
    assert model.one_mix
    same = features(DRAFTERS, "draft", 3, 8.0, 8.0 * 150.0, prefill_per_step(8.0, 2.0, 100.0, 100.0))
    other = features(DRAFTERS, "draft", 3, 8.0, 8.0 * 900.0, prefill_per_step(8.0, 2.0, 100.0, 100.0))
    assert model.determined(same) is not None
    assert model.determined(other) is None
    # Two mixes: the KV term is fitted, and a prediction is made as it stands.
    both = fit(points(noise=0.0), DRAFTERS)
    assert not both.one_mix and both.estimable(other)
    assert both.determined(other) is other


def test_one_workload_sampled_point_by_point_is_predicted_at_its_mean_and_another_mix_refused() -> None:
    """Two loads of one workload, the baseline and the drafter at K = 2 and 3: the requests a point completed make
    its mean prompt differ by chance (here 95 and 105 tokens), so the KV per sequence of the two loads differs. One
    mix: its KV cost is folded into the per-sequence one, and every K and batch is predicted at the workload's mean;
    a prompt twice as long is another mix, and refused."""
    rng = np.random.default_rng(0)
    obs = [observation(drafter, k, batch, prompt, 100.0, tokens, 0.0, rng)
           for batch, prompt in ((1.0, 95.0), (4.0, 105.0))
           for drafter, k, tokens in ((None, 0.0, 1.0), ("draft", 2.0, iid_al(0.7, 2)), ("draft", 3.0, iid_al(0.7, 3)))]
    model = fit(obs, DRAFTERS)
    assert model.kv_per_sequence == (95.0 + 50.0, 105.0 + 50.0) and model.one_mix
    assert model.coefficients[3] == 0.0  # no KV cost read from the chance 10 tokens
    predictor = Predictor(model, Mix(prompt_tokens=100.0, output_tokens=100.0))
    profile = AcceptanceProfile.iid(0.7, 6)
    for k in (1, 4, 6):  # Ks never measured, at batches never measured
        for batch in (2.0, 16.0, 64.0):
            x = features(DRAFTERS, "draft", k, batch, batch * 150.0, prefill_per_step(batch, profile.al(k).al,
                                                                                   100.0, 100.0))
            folded = model.determined(x)
            assert folded is not None and model.estimable(folded)
            assert folded[3] == 0.0 and np.array_equal(np.delete(folded, 3), np.delete(x, 3))
            assert not isinstance(predictor.estimate("draft", k, profile.al(k), batch), str)
    longer = Predictor(model, Mix(prompt_tokens=200.0, output_tokens=100.0))
    assert isinstance(longer.estimate("draft", 2, profile.al(2), 16.0), str)
    assert longer.baseline_tpot(16.0) is None


def test_points_that_happened_to_hold_the_same_kv_still_predict_every_k_and_batch() -> None:
    """The single stream is deterministic, so the baseline and both Ks completed the very same replies at batch 1
    (one KV per sequence), while at batch 4 batching changed a few replies' lengths. Fitted on those few tokens, the
    span of the points turned on them and refused cells at measured Ks (a CI run refused one); one mix, every cell
    is predicted, every measured point checked."""
    rng = np.random.default_rng(7)
    obs = []
    for batch in (1.0, 3.7):
        for drafter, k, tokens in ((None, 0.0, 1.0), ("draft", 2.0, iid_al(0.7, 2)), ("draft", 3.0, iid_al(0.7, 3))):
            output = 90.0 if batch == 1.0 else 90.0 * rng.uniform(0.94, 1.0)
            obs.append(observation(drafter, k, batch, 60.0, output, tokens, 0.02, rng))
    model = fit(obs, DRAFTERS)
    assert model.one_mix
    mean = float(np.mean([o.kv_tokens / o.batch for o in obs]))
    predictor = Predictor(model, Mix(prompt_tokens=60.0, output_tokens=2 * (mean - 60.0)))
    profile = AcceptanceProfile.iid(0.7, 6)
    for k in (1, 2, 3, 4, 6):
        for batch in (1.0, 2.0, 4.0, 8.0, 16.0):
            assert not isinstance(predictor.estimate("draft", k, profile.al(k), batch), str), (k, batch)
    # The points themselves are read the same way: each has its fitted step (a residual).
    assert all(model.determined(observation_features(DRAFTERS, o)) is not None for o in obs)


@pytest.mark.parametrize(("a", "k", "c"), [(0.6, 2, 0.05), (0.8, 4, 0.1), (0.9, 6, 0.02)])
def test_memory_bound_limit_is_leviathans_speedup(a: float, k: int, c: float) -> None:
    """A memory-bound target streams its weights once per step whatever the step holds, so its step costs a
    constant T; a draft pass costs c T. A step then emits AL(K) tokens in (1 + K c) T: the speedup is
    (1 - a^(K+1)) / ((1 - a)(1 + K c)), Leviathan et al.'s, at any batch."""
    target, draft = 10e-3, c * 10e-3
    obs = []
    for batch in (1.0, 4.0, 16.0):
        for kk, drafter, tokens in ((0, None, 1.0), (1, "draft", 1.5), (3, "draft", 2.0)):
            obs.append(Observation(run="m", config_id=f"k{kk}", point_id=f"b{batch}", repeat=0, drafter=drafter,
                                   k=kk, batch=batch, tokens_per_step=tokens, kv_tokens=batch * 150.0,
                                   prefill_tokens=prefill_per_step(batch, tokens, 100.0, 100.0),
                                   step_s=target + kk * draft))
    model = fit(obs, ["draft"])
    predictor = Predictor(model, Mix(prompt_tokens=100.0, output_tokens=100.0))
    profile = AcceptanceProfile.iid(a, k)
    for batch in (1.0, 8.0, 64.0):
        est = predictor.estimate("draft", k, profile.al(k), batch)
        assert not isinstance(est, str)
        assert est.speedup == pytest.approx((1 - a ** (k + 1)) / ((1 - a) * (1 + k * c)), rel=1e-6)
