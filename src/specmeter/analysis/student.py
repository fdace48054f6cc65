"""Student's t quantiles without SciPy (the core installs no SciPy): the few places that read an interval off a
handful of degrees of freedom (the planner's fits, runs pooled over a few reruns) share this one."""

from __future__ import annotations

import math
from statistics import NormalDist


def t_quantile(confidence: float, dof: int) -> float:
    """Two-sided Student's t quantile: exact for 1 and 2 degrees of freedom, Cornish-Fisher from 3 (within
    0.5%, no SciPy in the core)."""
    p = 0.5 + confidence / 2
    if dof == 1:
        return math.tan(math.pi * (p - 0.5))
    if dof == 2:
        return (2 * p - 1) / math.sqrt(2 * p * (1 - p))
    z = NormalDist().inv_cdf(p)
    g1 = (z**3 + z) / 4
    g2 = (5 * z**5 + 16 * z**3 + 3 * z) / 96
    g3 = (3 * z**7 + 19 * z**5 + 17 * z**3 - 15 * z) / 384
    g4 = (79 * z**9 + 776 * z**7 + 1482 * z**5 - 1920 * z**3 - 945 * z) / 92160
    return float(z + g1 / dof + g2 / dof**2 + g3 / dof**3 + g4 / dof**4)
