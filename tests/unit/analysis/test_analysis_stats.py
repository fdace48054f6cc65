"""Paired bootstrap, crossover and per-point choice (analysis/paired.py, crossover.py, choice.py)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from specmeter.analysis.crossover import find_crossover
from specmeter.analysis.paired import (
    fill_repeats,
    median_mad,
    paired_bootstrap_ci,
    paired_ratio_of_means,
    paired_ratio_of_sums,
)
from specmeter.schemas.analysis import Ratio

# --- paired bootstrap ---------------------------------------------------------------------------------------


def test_exact_per_prompt_speedup_gives_exact_estimate_and_degenerate_interval() -> None:
    # Every prompt runs exactly 1.5x faster: whatever prompts a resample draws, the ratio is 1.5.
    rng = np.random.default_rng(1)
    tokens = rng.integers(20, 400, size=60).astype(float)
    base_e2e = rng.lognormal(0.0, 1.0, size=60)
    value, ci = paired_ratio_of_sums(tokens, base_e2e / 1.5, tokens, base_e2e)
    assert value == pytest.approx(1.5, rel=1e-12)
    assert ci is not None
    assert ci[0] == pytest.approx(1.5, rel=1e-9) and ci[1] == pytest.approx(1.5, rel=1e-9)

    base_tpot = rng.lognormal(-3.0, 0.8, size=60)
    value, ci = paired_ratio_of_means(base_tpot, base_tpot / 1.5)
    assert value == pytest.approx(1.5, rel=1e-12)
    assert ci is not None
    assert ci[0] == pytest.approx(1.5, rel=1e-9) and ci[1] == pytest.approx(1.5, rel=1e-9)


def test_paired_interval_is_narrower_than_unpaired_on_correlated_pairs() -> None:
    # Prompts differ widely; the candidate tracks its baseline closely. Zero-mean noise makes the true ratio
    # of means exactly 0.8 on this sample.
    rng = np.random.default_rng(7)
    base = rng.uniform(0.5, 5.0, size=200)
    noise = rng.normal(0.0, 0.01, size=200)
    cand = 0.8 * base + (noise - noise.mean())
    value, paired = paired_ratio_of_means(cand, base)
    # Unpaired: each sample resampled on its own, as if the two did not share their prompts.
    draws = np.random.default_rng(0).integers(0, 200, size=(2, 1000, 200))
    ratios = cand[draws[0]].mean(axis=1) / base[draws[1]].mean(axis=1)
    unpaired = float(np.quantile(ratios, 0.025)), float(np.quantile(ratios, 0.975))
    assert value == pytest.approx(0.8, rel=1e-9)
    assert paired is not None and unpaired is not None
    assert paired[0] <= 0.8 <= paired[1]
    assert unpaired[0] <= 0.8 <= unpaired[1]
    assert paired[1] - paired[0] < unpaired[1] - unpaired[0]


def test_same_seed_gives_same_interval() -> None:
    rng = np.random.default_rng(3)
    a, b = rng.lognormal(size=40), rng.lognormal(size=40)
    assert paired_ratio_of_means(a, b, seed=5) == paired_ratio_of_means(a, b, seed=5)
    stat = lambda idx: float(a[idx].mean() / b[idx].mean())  # noqa: E731
    assert paired_bootstrap_ci(stat, 40, seed=5) == paired_bootstrap_ci(stat, 40, seed=5)


def test_vectorised_ratio_draws_the_same_indices_as_the_generic_bootstrap() -> None:
    rng = np.random.default_rng(4)
    a, b = rng.lognormal(size=30), rng.lognormal(size=30)
    _, fast = paired_ratio_of_means(a, b, n_resamples=500, seed=9)
    slow = paired_bootstrap_ci(lambda idx: float(a[idx].sum() / b[idx].sum()), 30, n_resamples=500, seed=9)
    assert fast is not None and slow is not None
    assert fast == pytest.approx(slow, rel=1e-12)


def test_too_few_prompts_or_no_finite_resample_gives_no_interval() -> None:
    assert paired_bootstrap_ci(lambda idx: 1.0, 1) is None
    assert paired_bootstrap_ci(lambda idx: 1.0, 0) is None
    assert paired_bootstrap_ci(lambda idx: float("nan"), 10) is None
    assert paired_ratio_of_sums([10.0], [2.0], [10.0], [4.0]) == (2.0, None)
    assert paired_ratio_of_sums([], [], [], []) == (None, None)
    assert paired_ratio_of_means([3.0], [1.5]) == (2.0, None)
    assert paired_ratio_of_means([], []) == (None, None)


def test_ratio_of_sums_is_the_direct_formula_on_full_data() -> None:
    rng = np.random.default_rng(11)
    cn, cd = rng.integers(1, 500, size=25).astype(float), rng.uniform(0.1, 9.0, size=25)
    bn, bd = rng.integers(1, 500, size=25).astype(float), rng.uniform(0.1, 9.0, size=25)
    value, ci = paired_ratio_of_sums(cn, cd, bn, bd)
    assert value == pytest.approx((cn.sum() / cd.sum()) / (bn.sum() / bd.sum()), rel=1e-12)
    assert ci is not None and ci[0] <= ci[1]


def test_missing_value_on_one_side_drops_the_prompt_from_both() -> None:
    numer = [1.0, 2.0, None, 4.0, 5.0]
    denom = [2.0, float("nan"), 3.0, 8.0, 10.0]
    assert paired_ratio_of_means(numer, denom, seed=2) == paired_ratio_of_means([1.0, 4.0, 5.0], [2.0, 8.0, 10.0],
                                                                                seed=2)


def test_zero_denominator_gives_no_estimate() -> None:
    assert paired_ratio_of_sums([1.0, 1.0], [1.0, 1.0], [1.0, 1.0], [0.0, 0.0]) == (None, None)
    assert paired_ratio_of_sums([1.0, 1.0], [0.0, 0.0], [1.0, 1.0], [1.0, 1.0]) == (None, None)
    assert paired_ratio_of_means([1.0, 2.0], [0.0, 0.0]) == (None, None)


def test_misaligned_columns_are_rejected() -> None:
    with pytest.raises(ValueError):
        paired_ratio_of_means([1.0, 2.0], [1.0])
    with pytest.raises(ValueError):
        paired_ratio_of_sums([1.0, 2.0], [1.0, 2.0], [1.0, 2.0], [1.0])


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.floats(0.1, 100.0), st.floats(0.1, 100.0)), min_size=2, max_size=30))
def test_interval_brackets_are_ordered_and_within_per_prompt_range(pairs: list[tuple[float, float]]) -> None:
    a = np.array([p[0] for p in pairs])
    b = np.array([p[1] for p in pairs])
    value, ci = paired_ratio_of_means(a, b, n_resamples=200)
    assert value is not None and ci is not None
    # Σa/Σb is a weighted mean of the per-prompt ratios a_i/b_i, so every resample lies within their range.
    lo_r, hi_r = float((a / b).min()), float((a / b).max())
    assert lo_r * (1 - 1e-9) <= ci[0] <= ci[1] <= hi_r * (1 + 1e-9)


# --- median / MAD and repeats -------------------------------------------------------------------------------


def test_median_mad_hand_computed() -> None:
    # median 3; |x - 3| = 2, 1, 0, 1, 97 -> MAD 1 (the outlier does not move it)
    assert median_mad([1.0, 2.0, 3.0, 4.0, 100.0]) == (3.0, 1.0)
    # median 2.5; |x - 2.5| = 1.5, 0.5, 0.5, 1.5 -> MAD 1.0
    assert median_mad([4.0, 1.0, 3.0, 2.0]) == (2.5, 1.0)
    assert median_mad([7.0]) == (7.0, 0.0)
    assert median_mad([]) == (None, None)


def test_fill_repeats_drops_missing_and_summarises_two_or_more() -> None:
    base = Ratio(value=1.2, ci95_low=1.1, ci95_high=1.3)
    filled = fill_repeats(base, [1.1, None, 1.4, 1.2])
    assert filled.repeat_values == [1.1, 1.4, 1.2]
    assert filled.median == 1.2
    assert filled.mad == pytest.approx(0.1)  # |x - 1.2| = 0.1, 0.2, 0
    assert (filled.value, filled.ci95_low, filled.ci95_high) == (1.2, 1.1, 1.3)
    assert base.repeat_values == [] and base.median is None  # the input is not modified

    single = fill_repeats(base, [1.3, None])
    assert single.repeat_values == [1.3]
    assert single.median is None and single.mad is None


# --- crossover ----------------------------------------------------------------------------------------------

LOADS = [1.0, 2.0, 4.0, 16.0, 64.0]


def _line(loads: list[float], at_one: float, slope: float = 0.1, shift: float = 0.0) -> list[float]:
    """Speedup falling linearly in log(load), equal to 1 (before `shift`) at load `at_one`."""
    return [1.0 - slope * math.log(x / at_one) + shift for x in loads]


def test_crossover_recovers_straight_line_in_log_load() -> None:
    values = _line(LOADS, at_one=8.0)
    lows = _line(LOADS, at_one=8.0, shift=-0.05)
    highs = _line(LOADS, at_one=8.0, shift=0.05)
    c = find_crossover("draft-k4", "concurrency", LOADS, values, lows, highs)
    assert c.status == "crosses"
    assert c.load == pytest.approx(8.0)
    # The bounds are the same line shifted by -/+ 0.05, so they cross 1 where log(x/8) = -/+ 0.5.
    assert c.low == pytest.approx(8.0 * math.exp(-0.5))
    assert c.high == pytest.approx(8.0 * math.exp(0.5))
    assert c.note


def test_crossover_sorts_loads_and_skips_missing_values() -> None:
    values: list[float | None] = _line(LOADS, at_one=8.0)  # type: ignore[assignment]
    order = [4, 0, 3, 1, 2]
    loads = [LOADS[i] for i in order] + [32.0]
    vals = [values[i] for i in order] + [None]
    c = find_crossover("x", "rate", loads, vals, vals, vals)
    assert c.status == "crosses"
    assert c.load == pytest.approx(8.0)


def test_crossover_high_is_none_when_upper_bound_never_drops_below_one() -> None:
    values = _line(LOADS, at_one=8.0)
    c = find_crossover("x", "concurrency", LOADS, values, [v - 0.05 for v in values], [5.0] * len(LOADS))
    assert c.status == "crosses"
    assert c.low is not None and c.load is not None
    assert c.low <= c.load
    assert c.high is None
    assert "beyond" in c.note


def test_crossover_low_is_first_load_when_lower_bound_starts_below_one() -> None:
    values = _line(LOADS, at_one=8.0)
    c = find_crossover("x", "concurrency", LOADS, values, [0.5] * len(LOADS), values)
    assert c.status == "crosses"
    assert c.low == LOADS[0]


def test_always_pays_never_claims_beyond_largest_load() -> None:
    values = [1.6, 1.4, 1.3, 1.2, 1.1]
    c = find_crossover("x", "concurrency", LOADS, values, [v - 0.05 for v in values], [v + 0.05 for v in values])
    assert c.status == "always_pays"
    assert c.load is None and c.low is None and c.high is None
    assert "64" in c.note


def test_never_pays() -> None:
    values = [0.9, 0.8, 0.7, 0.6, 0.5]
    c = find_crossover("x", "concurrency", LOADS, values, values, values)
    assert c.status == "never_pays"
    assert c.load is None
    assert c.low == LOADS[0]


def test_unclear_when_crossing_more_than_once_or_no_points() -> None:
    c = find_crossover("x", "concurrency", LOADS, [1.2, 0.9, 1.1, 0.8, 0.7], [None] * 5, [None] * 5)
    assert c.status == "unclear"
    assert c.load is None
    assert "3 times" in c.note

    rising = find_crossover("x", "concurrency", LOADS[:3], [0.9, 1.0, 1.1], [None] * 3, [None] * 3)
    assert rising.status == "unclear" and rising.load is None

    empty = find_crossover("x", "rate", [1.0, 2.0], [None, None], [None, None], [None, None])
    assert empty.status == "unclear" and empty.load is None


def test_crossover_rejects_bad_input() -> None:
    with pytest.raises(ValueError):
        find_crossover("x", "rate", [1.0, 2.0], [1.0], [1.0], [1.0])
    with pytest.raises(ValueError):
        find_crossover("x", "rate", [0.0, 2.0], [1.1, 0.9], [1.1, 0.9], [1.1, 0.9])


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.floats(0.3, 2.0), st.floats(0.0, 0.5), st.floats(0.0, 0.5)), min_size=1, max_size=8))
def test_crossover_interval_is_ordered(points: list[tuple[float, float, float]]) -> None:
    loads = [2.0**i for i in range(len(points))]
    values = [v for v, _, _ in points]
    lows = [v - dl for v, dl, _ in points]
    highs = [v + dh for v, _, dh in points]
    c = find_crossover("x", "concurrency", loads, values, lows, highs)
    if c.low is not None and c.high is not None:
        assert c.low <= c.high * (1 + 1e-12)
    if c.status == "crosses":
        assert c.load is not None and c.low is not None
        assert loads[0] <= c.low <= c.load * (1 + 1e-12)
        assert c.high is None or c.load <= c.high * (1 + 1e-12)
        assert c.high is None or c.high <= loads[-1]
