"""Synthetic acceptance measured against set: what the engine's counts must show when it accepts each drafted
position at random with the set rates, and whether they do, within sampling error.

Why the measured AL comes out below the set one (llama.cpp, tools/server/server-context.cpp): a step drafts at
most `max_tokens - generated - 1` tokens (`get_n_draft_max`), so the last steps of a request that reaches
max_tokens draft fewer than K, and a position a step did not draft cannot be accepted; yet the engine's
per-position rates and AL divide by every step. So per position the expectation, per step over all steps, is
the set rate times the share of steps that drafted that position. That share comes from the engine where it
counts drafts per position (vLLM's per-step stats); for llama.cpp, which does not, it is the expectation over
the acceptance process itself: a request starts with one token, each step drafts min(K, cap - 1 - generated)
and emits the accepted tokens plus one, until the request ends (at its cap, or at the length it stopped at). A
drafted end-of-generation token is never accepted there either; that is not modelled (it would show as measured
below expected).

The sampling error is binomial per step: each step accepts position i or not, with probability expected_i, so
se_i = sqrt(expected_i (1 - expected_i) / steps); AL's is the spread of accepted tokens per step over sqrt(steps).
All K positions and AL together are read at 99% (Bonferroni)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from statistics import NormalDist
from typing import Literal

import numpy as np

from specmeter.schemas.records import RequestRecord
from specmeter.schemas.sd import SDCounts, SyntheticCheck, SyntheticPosition

FAMILY_LEVEL = 0.99


def accepted_distribution(rates: Sequence[float], drafted: int) -> np.ndarray:
    """P(a step that drafts `drafted` tokens accepts exactly j of them), j = 0..drafted: P(at least j) is the set
    rate of position j - 1 (1 for j = 0), and a step cannot accept more than it drafted."""
    at_least = np.array([1.0, *rates[:drafted], 0.0])
    out: np.ndarray = at_least[:-1] - at_least[1:]
    return out


def visits(rates: Sequence[float], cap: int, *, fits_cap: bool) -> np.ndarray:
    """visits[g]: the probability that a request capped at `cap` output tokens reaches a step (or a plain decode)
    with g tokens generated, g = 0..cap. It starts at 1 (the prefill's token); a step drafts min(K, cap - 1 - g)
    when the engine fits drafts to the cap (else K), and emits its accepted tokens plus one."""
    k = len(rates)
    mass = np.zeros(cap + k + 2)
    mass[1] = 1.0
    dists = [accepted_distribution(rates, d) for d in range(k + 1)]
    for g in range(1, cap):
        m = mass[g]
        if m == 0.0:
            continue
        d = min(k, cap - 1 - g) if fits_cap else k
        if d <= 0:
            mass[g + 1] += m
        else:
            mass[g + 1:g + d + 2] += m * dists[d]
    return mass[:cap + 1]


def drafted_shares(rates: Sequence[float], ends: Sequence[tuple[int, int]], *,
                   fits_cap: bool) -> tuple[list[float], float]:
    """Per position, the expected share of steps that drafted it, and the expected number of steps, over requests
    given as (cap, end): each capped at `cap` tokens and generating until `end` (= cap when it reached it)."""
    k = len(rates)
    steps = 0.0
    drafted = np.zeros(k)
    by_cap: dict[int, np.ndarray] = {}
    for cap, end in ends:
        if cap not in by_cap:
            by_cap[cap] = visits(rates, cap, fits_cap=fits_cap)
        mass = by_cap[cap][1:end]  # decisions at g = 1 .. end - 1
        g = np.arange(1, end)
        d = np.minimum(k, cap - 1 - g) if fits_cap else np.full(len(g), k)
        steps += float(mass[d > 0].sum())
        drafted += np.array([mass[d > i].sum() for i in range(k)])
    if steps <= 0.0:
        return [1.0] * k, 0.0
    return [float(x) for x in drafted / steps], steps


def request_ends(records: Sequence[RequestRecord], max_tokens: int) -> list[tuple[int, int]]:
    """(cap, end) of every measured request that completed: one that finished on length reached its cap; one
    that stopped ended where it stopped, under the load's cap."""
    out = []
    for r in records:
        if r.warmup or not r.ok or not r.output_tokens:
            continue
        end = r.output_tokens
        cap = end if r.finish_reason == "length" else max(max_tokens, end)
        out.append((cap, end))
    return out


def z_limit(k: int) -> float:
    """Two-sided, 99% over the K positions and AL together."""
    return NormalDist().inv_cdf(1.0 - (1.0 - FAMILY_LEVEL) / (2 * (k + 1)))


def _z(measured: float, expected: float, se: float) -> float | None:
    return (measured - expected) / se if se > 0 else None


def _fits(measured: float, expected: float, z: float | None, limit: float) -> bool:
    return abs(z) <= limit if z is not None else math.isclose(measured, expected, abs_tol=1e-9)


def synthetic_check(counts: SDCounts, rates: Sequence[float], records: Sequence[RequestRecord], *, max_tokens: int,
                    fits_cap: bool, engine_drafted: Sequence[int] | None = None,
                    seed_note: str | None = None) -> SyntheticCheck | None:
    """`counts`: the engine's counts over the measured requests `records`; `rates`: the unconditional per-position
    rates the engine was set to; `fits_cap`: the engine fits drafts to the request's remaining output;
    `engine_drafted`: the engine's own steps-that-drafted-position-i counts over the same steps, when it has
    them; `seed_note`: why the requests' draws were not independent, if they were not. None without step counts."""
    steps = counts.num_steps
    k = len(rates)
    if not steps or k == 0:
        return None
    notes: list[str] = []
    basis: Literal["engine", "output_cap", "every_step_k"]
    if engine_drafted is not None and len(engine_drafted) >= k:
        shares, basis = [engine_drafted[i] / steps for i in range(k)], "engine"
    elif fits_cap:
        shares, _ = drafted_shares(rates, request_ends(records, max_tokens), fits_cap=True)
        basis = "output_cap"
    else:
        shares, basis = [1.0] * k, "every_step_k"
        if counts.num_draft_tokens < steps * k:
            notes.append(f"the engine drafted {counts.num_draft_tokens} tokens in {steps} steps, fewer than K = {k} "
                         "each, and does not say which positions: expected values assume K on every step")
    acc = [*counts.accepted_per_pos[:k], *[0] * max(0, k - len(counts.accepted_per_pos))]
    limit = z_limit(k)
    positions = []
    for i, (rate, share) in enumerate(zip(rates, shares)):
        expected = rate * share
        measured = acc[i] / steps
        se = math.sqrt(max(expected * (1.0 - expected), 0.0) / steps)
        positions.append(SyntheticPosition(position=i, set_rate=rate, drafted_share=share, expected=expected,
                                           measured=measured, se=se, z=_z(measured, expected, se)))
    p = [pos.expected for pos in positions]
    mean = sum(p)
    variance = sum((2 * i + 1) * pi for i, pi in enumerate(p)) - mean * mean
    al_se = math.sqrt(max(variance, 0.0) / steps)
    expected_al, measured_al = 1.0 + mean, 1.0 + counts.num_accepted_tokens / steps
    al_z = _z(measured_al, expected_al, al_se)
    ceiling = all(r >= 1.0 for r in rates)
    all_accepted = counts.num_accepted_tokens == counts.num_draft_tokens if ceiling else None
    within: bool | None = (all(_fits(pos.measured, pos.expected, pos.z, limit) for pos in positions)
                           and _fits(measured_al, expected_al, al_z, limit) and all_accepted is not False)
    if all_accepted is False:
        notes.append(f"every draft was set to be accepted, yet the engine accepted {counts.num_accepted_tokens} of "
                     f"{counts.num_draft_tokens} drafted tokens")
    if seed_note:
        notes.append(seed_note)
        within = None
    return SyntheticCheck(
        ceiling=ceiling, set_al=1.0 + sum(rates), steps=steps, drafted=counts.num_draft_tokens,
        expected_drafted=steps * sum(shares), drafted_basis=basis, positions=positions, expected_al=expected_al,
        measured_al=measured_al, al_se=al_se, al_z=al_z, z_limit=limit, all_accepted=all_accepted, within=within,
        note="; ".join(notes) or None,
    )
