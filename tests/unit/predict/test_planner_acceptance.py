"""Acceptance profiles: the closed forms against each other and against a Monte Carlo of the acceptance
process, pooling across K, and extrapolation past the measured positions."""

from __future__ import annotations

import numpy as np
import pytest
from estimate_fixtures import iid_al
from hypothesis import given, settings
from hypothesis import strategies as st

from specmeter.predict.acceptance import AcceptanceProfile, accepted_variance, al_of
from specmeter.schemas.sd import SDCounts


def simulate(conditional: list[float], steps: int, seed: int = 0) -> np.ndarray:
    """Accepted tokens per step of a chain: position i is accepted with probability conditional[i] given all
    before it were; the first rejection ends the step."""
    rng = np.random.default_rng(seed)
    u = rng.random((steps, len(conditional)))
    accepted = np.cumprod(u < np.array(conditional), axis=1)
    return accepted.sum(axis=1)


@given(a=st.floats(0.0, 0.99), k=st.integers(1, 12))
def test_an_iid_profile_gives_the_closed_form(a: float, k: int) -> None:
    # a_i = a^(i+1): 1 + sum a_i is the geometric series (1 - a^(K+1)) / (1 - a), exact: nothing was sampled.
    estimate = AcceptanceProfile.iid(a, k).al(k)
    assert estimate.al == pytest.approx((1.0 - a ** (k + 1)) / (1.0 - a), rel=1e-9)
    assert estimate.low == estimate.high == estimate.al


def test_an_iid_profile_at_full_or_no_acceptance_is_k_plus_one_or_one() -> None:
    assert AcceptanceProfile.iid(1.0, 4).al(4).al == 5.0
    assert AcceptanceProfile.iid(0.0, 4).al(4).al == 1.0
    assert AcceptanceProfile.iid(0.8, 4).al(4).al == pytest.approx(3.3616, abs=1e-12)  # REFERENCE's vector


@settings(deadline=None, max_examples=15)
@given(cond=st.lists(st.floats(0.05, 0.95), min_size=1, max_size=6))
def test_general_form_and_variance_match_a_monte_carlo(cond: list[float]) -> None:
    per_position = list(np.cumprod(cond))
    steps = 40_000
    accepted = simulate(cond, steps)
    expected_mean = al_of(per_position) - 1.0
    var = accepted_variance(per_position)
    se = np.sqrt(var / steps)
    assert abs(accepted.mean() - expected_mean) < 5 * se + 1e-9
    assert accepted.var() == pytest.approx(var, rel=0.08, abs=1e-3)


def counts(k: int, accepted_steps: np.ndarray) -> SDCounts:
    per_pos = [int((accepted_steps > i).sum()) for i in range(k)]
    return SDCounts(source="counters", num_steps=len(accepted_steps), num_draft_tokens=k * len(accepted_steps),
                    num_accepted_tokens=int(accepted_steps.sum()), accepted_per_pos=per_pos)


def test_pooling_reads_later_positions_only_from_the_ks_that_drafted_them() -> None:
    cond = [0.8, 0.7, 0.6, 0.5]
    k2 = simulate(cond[:2], 20_000, seed=1)
    k4 = simulate(cond, 10_000, seed=2)
    profile = AcceptanceProfile.from_counts([(2, counts(2, k2)), (4, counts(4, k4))], "test")
    assert profile is not None
    assert profile.steps == (30_000, 30_000, 10_000, 10_000)
    truth = np.cumprod(cond)
    for rate, true, n in zip(profile.per_position, truth, profile.steps):
        assert abs(rate - true) < 5 * np.sqrt(true * (1 - true) / n)


def test_a_larger_k_is_extrapolated_and_its_interval_says_so() -> None:
    a = 0.7
    profile = AcceptanceProfile.from_counts([(2, counts(2, simulate([a, a], 50_000)))], "k2")
    assert profile is not None
    measured, beyond = profile.al(2), profile.al(4)
    assert measured.extrapolated == 0 and beyond.extrapolated == 2
    # iid acceptance carries its conditional rate on: the truth lies inside, and the interval is wider.
    assert beyond.low <= iid_al(a, 4) <= beyond.high
    assert beyond.high - beyond.low > measured.high - measured.low
    assert 1.0 <= beyond.low and beyond.high <= 5.0


def test_given_rates_must_be_a_chain() -> None:
    with pytest.raises(ValueError, match="cannot rise"):
        AcceptanceProfile.given([0.5, 0.7])
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        AcceptanceProfile.iid(1.2, 3)
    given_profile = AcceptanceProfile.given([0.9, 0.7, 0.5])
    assert given_profile.al(3).al == pytest.approx(3.1)
    assert given_profile.al(3).low == given_profile.al(3).high  # a given profile has no sampling error
