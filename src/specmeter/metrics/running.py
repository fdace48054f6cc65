"""The engine's running-batch size over a point, from gauge samples taken while it ran."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

import numpy as np

from specmeter.schemas.metrics import RunningBatch, SteadyState


def summarize_running(gauge: str, samples: Sequence[tuple[float, float]], interval_s: float,
                      steady: SteadyState | None) -> RunningBatch:
    """Mean, median, max and histogram of the sampled batch size; the steady mean over samples taken
    inside the steady window (the batch a dynamic-K table would see under this load)."""
    values = np.asarray([v for _, v in samples], dtype=float)
    if values.size == 0:
        return RunningBatch(gauge=gauge, interval_s=interval_s, samples=0)
    inside = [v for t, v in samples if steady is not None and steady.start_s <= t <= steady.end_s]
    return RunningBatch(
        gauge=gauge, interval_s=interval_s, samples=int(values.size), mean=float(values.mean()),
        p50=float(np.median(values)), max=float(values.max()),
        steady_mean=float(np.mean(inside)) if inside else None,
        histogram=dict(sorted(Counter(round(v) for v in values).items())),
    )
