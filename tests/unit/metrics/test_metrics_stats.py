"""Distribution summaries and bootstrap CIs (metrics/stats.py)."""

from __future__ import annotations

import statistics

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from specmeter.metrics.stats import bootstrap_ci, summarize


def test_summarize_percentiles_on_0_to_100() -> None:
    # 101 evenly spaced values: the q-th percentile (linear interpolation) is exactly q.
    d = summarize(list(range(101)), ci=False)
    assert d.count == 101
    assert (d.p50, d.p90, d.p99) == (50.0, 90.0, 99.0)
    assert d.mean == 50.0
    assert (d.min, d.max) == (0.0, 100.0)
    assert d.std == pytest.approx(statistics.stdev(range(101)))  # sample std (ddof=1)
    assert d.ci95_low is None and d.ci95_high is None


def test_summarize_interpolates_between_values() -> None:
    # [1, 2, 3, 4]: rank (n-1) q = 3q -> p50 at rank 1.5 = 2.5, p90 at 2.7 = 3.7, p99 at 2.97 = 3.97
    d = summarize([4.0, 1.0, 3.0, 2.0], ci=False)
    assert d.p50 == pytest.approx(2.5)
    assert d.p90 == pytest.approx(3.7)
    assert d.p99 == pytest.approx(3.97)
    assert d.mean == pytest.approx(2.5)
    assert d.std == pytest.approx(statistics.stdev([1, 2, 3, 4]))


def test_summarize_empty_single_and_none() -> None:
    assert summarize([]).count == 0
    assert summarize([]).mean is None
    one = summarize([0.25])
    assert (one.count, one.mean, one.std, one.p50, one.p99) == (1, 0.25, 0.0, 0.25, 0.25)
    assert one.ci95_low is None  # no CI from a single value
    with_none = summarize([1.0, None, 3.0])  # type: ignore[list-item]
    assert with_none.count == 2 and with_none.mean == 2.0


def test_summarize_ci_brackets_mean_and_is_seeded() -> None:
    values = [0.1, 0.4, 0.35, 0.8, 0.22, 0.5, 0.61, 0.3, 0.44, 0.27]
    d = summarize(values, seed=3)
    assert d.ci95_low is not None and d.ci95_high is not None
    assert d.ci95_low <= d.mean <= d.ci95_high  # type: ignore[operator]
    assert d.min <= d.ci95_low and d.ci95_high <= d.max  # type: ignore[operator]
    assert summarize(values, seed=3) == d


def test_bootstrap_ci_contains_mean_and_is_deterministic() -> None:
    rng = np.random.default_rng(123)
    values = rng.normal(10.0, 2.0, size=200)
    lo, hi = bootstrap_ci(values, seed=7)
    assert lo < float(values.mean()) < hi
    assert (lo, hi) == bootstrap_ci(values, seed=7)
    assert (lo, hi) != bootstrap_ci(values, seed=8)
    # the 95% CI of the mean of 200 draws with sd 2 is about +-1.96 * 2 / sqrt(200) = +-0.28
    assert 0.3 < hi - lo < 0.8
    # wider confidence gives a wider interval
    lo99, hi99 = bootstrap_ci(values, confidence=0.99, seed=7)
    assert lo99 <= lo and hi <= hi99


def test_bootstrap_ci_constant_sample_is_a_point() -> None:
    assert bootstrap_ci([2.5] * 10) == (2.5, 2.5)


def test_bootstrap_ci_other_statistic() -> None:
    lo, hi = bootstrap_ci([1.0, 2.0, 3.0, 100.0], statistic=np.median, seed=0)
    assert 1.0 <= lo <= hi <= 100.0


@settings(max_examples=50, deadline=None)
@given(st.lists(st.floats(-1e6, 1e6, allow_nan=False), min_size=2, max_size=40), st.integers(0, 2**32 - 1))
def test_bootstrap_ci_ordered_within_range_and_seeded(values: list[float], seed: int) -> None:
    lo, hi = bootstrap_ci(values, seed=seed)
    eps = 1e-6 * max(1.0, max(abs(v) for v in values))
    assert min(values) - eps <= lo <= hi <= max(values) + eps
    assert bootstrap_ci(values, seed=seed) == (lo, hi)
