"""Distribution summaries kept as numbers (never strings): mean, percentiles, bootstrap CI."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from specmeter.schemas.metrics import Distribution

PERCENTILES = (50, 90, 99)


def summarize(values: Sequence[float], ci: bool = True, seed: int = 0) -> Distribution:
    """Mean, std, min/max, p50/p90/p99 and a 95% bootstrap CI of the mean."""
    arr = np.asarray([v for v in values if v is not None], dtype=float)
    if arr.size == 0:
        return Distribution(count=0)
    p50, p90, p99 = (float(x) for x in np.percentile(arr, PERCENTILES))
    lo = hi = None
    if ci and arr.size >= 2:
        lo, hi = bootstrap_ci(arr, np.mean, seed=seed)
    return Distribution(
        count=int(arr.size),
        mean=float(arr.mean()),
        std=float(arr.std(ddof=1)) if arr.size > 1 else 0.0,
        min=float(arr.min()),
        max=float(arr.max()),
        p50=p50,
        p90=p90,
        p99=p99,
        ci95_low=lo,
        ci95_high=hi,
    )


def bootstrap_ci(
    values: Sequence[float] | np.ndarray,
    statistic: Callable[[np.ndarray], float] = np.mean,
    n_resamples: int = 1000,
    confidence: float = 0.95,
    seed: int = 0,
) -> tuple[float, float]:
    """Percentile bootstrap confidence interval of `statistic` (seeded: reruns give the same CI)."""
    arr = np.asarray(values, dtype=float)
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, arr.size, size=(n_resamples, arr.size))
    stats = np.apply_along_axis(statistic, 1, arr[idx])
    alpha = (1.0 - confidence) / 2.0
    return float(np.quantile(stats, alpha)), float(np.quantile(stats, 1.0 - alpha))
