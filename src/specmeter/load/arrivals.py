"""Seeded open-loop arrival processes: when each request of a request-rate load point is sent.

The send times depend only on (kind, rate, count, seed, burstiness), never on the engine or on
the process that draws them, so every engine configuration of a sweep is offered exactly the
same load at a given rate and their results differ only by the engine.
"""

from __future__ import annotations

import hashlib
import math
from typing import get_args

import numpy as np

from specmeter.config.models import ArrivalKind

_KINDS: tuple[str, ...] = get_args(ArrivalKind)


def arrival_times(
    kind: ArrivalKind, rate: float, count: int, seed: int | str, burstiness: float = 1.0
) -> list[float]:
    """`count` send offsets in seconds from the point's start: the first at 0.0, never decreasing.

    The first request goes out at once (waiting a random first gap would only idle the server);
    every later gap is drawn. `rate` is in requests/s. Gaps follow vLLM bench serve's convention:
    - "poisson": exponential, mean 1/rate;
    - "gamma": Gamma(shape=burstiness, scale=1/(rate*burstiness)), mean 1/rate and coefficient of
      variation 1/sqrt(burstiness): 1 is Poisson, < 1 burstier, > 1 smoother;
    - "constant": exactly 1/rate.
    `burstiness` is used by "gamma" only but validated for every kind, so a bad value never
    passes unnoticed.
    """
    if kind not in _KINDS:
        raise ValueError(f"kind must be one of {', '.join(_KINDS)}, got {kind!r}")
    if not (math.isfinite(rate) and rate > 0):
        raise ValueError(f"rate must be a finite number > 0 requests/s, got {rate!r}")
    if isinstance(count, bool) or not isinstance(count, int) or count < 0:
        raise ValueError(f"count must be an integer >= 0, got {count!r}")
    if not (math.isfinite(burstiness) and burstiness > 0):
        raise ValueError(f"burstiness must be a finite number > 0, got {burstiness!r}")
    seed_int = _seed_int(seed)  # checked for every kind, though "constant" draws nothing
    if count == 0:
        return []
    n_gaps = count - 1
    if kind == "constant":
        # i/rate rather than a running sum of 1/rate: no rounding drift over long points.
        offsets = np.arange(count, dtype=float) / rate
    else:
        rng = np.random.default_rng(seed_int)
        if kind == "poisson":
            gaps = rng.exponential(scale=1.0 / rate, size=n_gaps)
        else:
            gaps = rng.gamma(shape=burstiness, scale=1.0 / (rate * burstiness), size=n_gaps)
        # Gaps are >= 0, so the running sum never decreases.
        offsets = np.concatenate(([0.0], np.cumsum(gaps)))
    return [float(t) for t in offsets]


def _seed_int(seed: int | str) -> int:
    """A non-negative integer seed; a str maps through SHA-256 because Python's hash() is salted
    per process, and the same seed must give the same times in every process."""
    if isinstance(seed, str):
        return int.from_bytes(hashlib.sha256(seed.encode("utf-8")).digest()[:8], "big")
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise ValueError(f"seed must be an integer >= 0 or a string, got {seed!r}")
    return seed
