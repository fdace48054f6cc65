"""Seeded open-loop arrival processes (load/arrivals.py)."""

from __future__ import annotations

import itertools
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import specmeter
from specmeter.config.models import ArrivalKind
from specmeter.load.arrivals import arrival_times

KINDS: tuple[ArrivalKind, ...] = ("poisson", "gamma", "constant")
N_GAPS = 20_000
# Tolerances are 4 standard errors: a correct sampler fails one check about once in 16,000 runs,
# and the seeds are fixed, so a pass is reproducible.
Z = 4.0


def _gaps(kind: ArrivalKind, rate: float, seed: int | str, burstiness: float = 1.0) -> np.ndarray:
    return np.diff(np.asarray(arrival_times(kind, rate, N_GAPS + 1, seed, burstiness)))


def _gamma_cv_se(shape: float, n: int) -> float:
    """Standard error of the sample CV of n Gamma(shape) gaps, by the delta method.

    CV = s/m with true value c = 1/sqrt(shape) and excess kurtosis 6/shape, so
    Var(s)/sigma^2 ~ (2 + 6/shape)/(4n) and Var(m)/mu^2 = c^2/n. Their covariance is positive
    (gamma is right-skewed) and lowers Var(CV); leaving it out gives an upper bound.
    """
    c = 1.0 / math.sqrt(shape)
    return c * math.sqrt((2.0 + 6.0 / shape) / (4.0 * n) + c * c / n)


@pytest.mark.parametrize("kind", KINDS)
def test_same_seed_same_times_different_seed_different(kind: ArrivalKind) -> None:
    a = arrival_times(kind, 5.0, 200, seed=7, burstiness=0.5)
    assert a == arrival_times(kind, 5.0, 200, seed=7, burstiness=0.5)
    assert arrival_times(kind, 5.0, 200, seed="point-a") == arrival_times(kind, 5.0, 200, seed="point-a")
    if kind != "constant":  # constant draws nothing, so the seed cannot matter
        assert a != arrival_times(kind, 5.0, 200, seed=8, burstiness=0.5)
        assert arrival_times(kind, 5.0, 200, seed="point-a") != arrival_times(kind, 5.0, 200, seed="point-b")


def test_str_seed_gives_same_times_in_every_process() -> None:
    # Python's hash() of a str changes with PYTHONHASHSEED; the times must not.
    src = str(Path(specmeter.__file__).resolve().parent.parent)
    code = (
        "import json; from specmeter.load.arrivals import arrival_times; "
        "print(json.dumps(arrival_times('gamma', 3.0, 50, 'sweep-1/rate-3', 0.5)))"
    )
    outs = []
    for hash_seed in ("1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": hash_seed, "PYTHONPATH": src}
        run = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
        outs.append(json.loads(run.stdout))
    assert outs[0] == outs[1] == arrival_times("gamma", 3.0, 50, "sweep-1/rate-3", 0.5)


@settings(max_examples=200, deadline=None)
@given(
    kind=st.sampled_from(KINDS),
    rate=st.floats(min_value=1e-3, max_value=1e4),
    count=st.integers(min_value=0, max_value=300),
    seed=st.one_of(st.integers(min_value=0, max_value=2**64 - 1), st.text(max_size=20)),
    burstiness=st.floats(min_value=0.05, max_value=50.0),
)
def test_times_start_at_zero_and_never_decrease(
    kind: ArrivalKind, rate: float, count: int, seed: int | str, burstiness: float
) -> None:
    times = arrival_times(kind, rate, count, seed, burstiness)
    assert len(times) == count
    assert all(isinstance(t, float) and math.isfinite(t) for t in times)
    if count:
        assert times[0] == 0.0
    assert all(a <= b for a, b in itertools.pairwise(times))


@pytest.mark.parametrize(
    ("kind", "burstiness", "expected_cv"),
    [
        ("poisson", 1.0, 1.0),
        ("gamma", 0.25, 2.0),  # 1/sqrt(0.25)
        ("gamma", 1.0, 1.0),  # burstiness 1 is Poisson
        ("gamma", 4.0, 0.5),  # 1/sqrt(4)
    ],
)
@pytest.mark.parametrize("rate", [0.5, 20.0])
def test_random_gaps_mean_rate_and_cv(kind: ArrivalKind, burstiness: float, expected_cv: float, rate: float) -> None:
    gaps = _gaps(kind, rate, seed=12345, burstiness=burstiness)
    assert gaps.size == N_GAPS
    assert (gaps >= 0).all()
    # The mean gap is 1/rate with standard error cv/(rate*sqrt(n)).
    mean_se = expected_cv / (rate * math.sqrt(N_GAPS))
    assert abs(gaps.mean() - 1.0 / rate) <= Z * mean_se
    cv = gaps.std(ddof=1) / gaps.mean()
    # Poisson gaps are Gamma(1).
    assert abs(cv - expected_cv) <= Z * _gamma_cv_se(burstiness, N_GAPS)


@pytest.mark.parametrize("rate", [0.5, 3.0, 20.0])
def test_constant_gaps_are_exactly_one_over_rate(rate: float) -> None:
    times = arrival_times("constant", rate, N_GAPS + 1, seed=0)
    gaps = np.diff(np.asarray(times))
    np.testing.assert_allclose(gaps, 1.0 / rate, rtol=1e-9)
    assert gaps.std() / gaps.mean() == pytest.approx(0.0, abs=1e-9)
    assert times[-1] == pytest.approx(N_GAPS / rate, rel=1e-12)


def test_burstiness_orders_the_spread() -> None:
    # Same rate, lower burstiness: more spread in the gaps (smaller b = burstier).
    cvs = [float(np.std(g) / np.mean(g)) for g in (_gaps("gamma", 5.0, 3, b) for b in (0.25, 1.0, 4.0))]
    assert cvs[0] > cvs[1] > cvs[2]


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"kind": "uniform"}, "kind"),
        ({"rate": 0.0}, "rate"),
        ({"rate": -1.0}, "rate"),
        ({"rate": math.inf}, "rate"),
        ({"rate": math.nan}, "rate"),
        ({"count": -1}, "count"),
        ({"count": 2.5}, "count"),
        ({"burstiness": 0.0}, "burstiness"),
        ({"burstiness": -0.5}, "burstiness"),
        ({"burstiness": math.nan}, "burstiness"),
        ({"seed": -3}, "seed"),
        ({"seed": 1.5}, "seed"),
    ],
)
@pytest.mark.parametrize("kind", KINDS)
def test_invalid_arguments_raise_naming_the_argument(kwargs: dict[str, object], name: str, kind: ArrivalKind) -> None:
    args: dict[str, object] = {"kind": kind, "rate": 2.0, "count": 10, "seed": 1, "burstiness": 1.0, **kwargs}
    with pytest.raises(ValueError, match=name):
        arrival_times(**args)  # type: ignore[arg-type]


def test_zero_and_one_request() -> None:
    for kind in KINDS:
        assert arrival_times(kind, 2.0, 0, seed=1) == []
        assert arrival_times(kind, 2.0, 1, seed=1) == [0.0]
