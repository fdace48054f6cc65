"""Goodput of one load point: requests per second that met the run's SLO (load.slo), beside its throughput.

A failed request never meets an SLO, and it stays in the count it is a share of: a server that sheds load under
pressure loses goodput for it. The interval resamples the point's requests (its wall time held fixed), as the
latency means' intervals do.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from specmeter.metrics.stats import bootstrap_ci
from specmeter.schemas.metrics import Goodput
from specmeter.schemas.records import RequestRecord
from specmeter.slo import SLO


def meets(record: RequestRecord, slo: SLO) -> bool:
    """A request meets the SLO when it succeeded and every bound given holds."""
    if not record.ok:
        return False
    checks = ((slo.ttft_ms, record.ttft_s), (slo.tpot_ms, record.tpot_s), (slo.e2e_ms, record.e2e_s))
    return all(bound is None or (value is not None and value * 1000.0 <= bound) for bound, value in checks)


def summarize_goodput(records: Sequence[RequestRecord], wall_s: float, slo: SLO) -> Goodput:
    """The point's goodput over its measured requests (warm-up excluded) and its wall time."""
    measured = [r for r in records if not r.warmup]
    good = np.array([1.0 if meets(r, slo) else 0.0 for r in measured])
    met = int(good.sum())
    rate = met / wall_s if wall_s > 0 else None
    low = high = None
    if rate is not None and good.size >= 2:
        lo, hi = bootstrap_ci(good, np.mean)
        low, high = lo * good.size / wall_s, hi * good.size / wall_s
    return Goodput(slo=slo.label(), requests_per_s=rate, met=met, measured=len(measured),
                   share=met / len(measured) if measured else None, ci95_low=low, ci95_high=high)
