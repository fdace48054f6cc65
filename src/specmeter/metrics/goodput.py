"""Goodput of one load point: requests per second that met the run's SLO (load.slo), beside its throughput.

A failed request never meets an SLO, and it stays in the count it is a share of: a server that sheds load under
pressure loses goodput for it. The interval is the Wilson score interval of the share that met it (a binomial
proportion: it stays honest where every request, or none, met the SLO), times the point's requests per second.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from statistics import NormalDist

from specmeter.config.slo import SLO
from specmeter.schemas.metrics import Goodput
from specmeter.schemas.records import RequestRecord


def meets(record: RequestRecord, slo: SLO) -> bool:
    """A request meets the SLO when it succeeded and every bound given holds."""
    if not record.ok:
        return False
    checks = ((slo.ttft_ms, record.ttft_s), (slo.tpot_ms, record.tpot_s), (slo.e2e_ms, record.e2e_s))
    return all(bound is None or (value is not None and value * 1000.0 <= bound) for bound, value in checks)


def summarize_goodput(records: Sequence[RequestRecord], wall_s: float, slo: SLO) -> Goodput:
    """The point's goodput over its measured requests (warm-up excluded) and its wall time."""
    measured = [r for r in records if not r.warmup]
    met, n = sum(1 for r in measured if meets(r, slo)), len(measured)
    rate = met / wall_s if wall_s > 0 else None
    low = high = None
    if rate is not None and n > 0:
        lo, hi = wilson(met, n)
        low, high = lo * n / wall_s, hi * n / wall_s
    return Goodput(slo=slo.label(), requests_per_s=rate, met=met, measured=n, share=met / n if n else None,
                   ci95_low=low, ci95_high=high)


def wilson(successes: int, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """Wilson score interval of a binomial proportion."""
    z = NormalDist().inv_cdf(0.5 + confidence / 2)
    p = successes / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)
