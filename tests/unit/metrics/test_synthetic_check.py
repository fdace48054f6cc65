"""Synthetic acceptance measured against set (metrics/synthetic.py), checked against a Monte Carlo of the
acceptance process as llama-server runs it: a request starts with the prefill's token, each step drafts
min(K, max_tokens - generated - 1) tokens, accepts position i with the set conditional probability, and emits its
accepted tokens plus one (tools/server/server-context.cpp)."""

from __future__ import annotations

import math
import random
from statistics import mean, stdev

import pytest

from specmeter.metrics.synthetic import drafted_shares, synthetic_check
from specmeter.schemas.records import RequestRecord
from specmeter.schemas.sd import SDCounts, SyntheticCheck

RATES = [0.9, 0.7, 0.5, 0.3]


def simulate(rates: list[float], requests: list[tuple[int, int | None]], rng: random.Random, *,
             fits_cap: bool = True) -> tuple[SDCounts, list[RequestRecord], list[int]]:
    """One run: (cap, stop) per request (stop: it ends once it has generated that many, as a target's
    end-of-generation token at the end of a step ends it). Returns the counts as the engine's counters give them,
    the records, and the steps that drafted each position (which the engine does not report)."""
    k = len(rates)
    cond = [r / p if p > 0 else 0.0 for r, p in zip(rates, [1.0, *rates[:-1]])]
    steps = drafted = accepted = 0
    acc, dr = [0] * k, [0] * k
    records = []
    for i, (cap, stop) in enumerate(requests):
        g, finish = 1, "length"
        while g < cap:
            d = min(k, cap - 1 - g) if fits_cap else k
            if d <= 0:
                g += 1
                continue
            a = 0
            while a < d and rng.random() < cond[a]:
                a += 1
            steps, drafted, accepted = steps + 1, drafted + d, accepted + a
            for j in range(d):
                dr[j] += 1
            for j in range(a):
                acc[j] += 1
            g += a + 1
            if stop is not None and g >= stop:
                finish = "stop"
                break
        records.append(RequestRecord(config_id="c", point_id="c1", conversation_id=f"q{i}", ok=True,
                                     output_tokens=min(g, cap), finish_reason=finish))
    counts = SDCounts(source="counters", num_steps=steps, num_draft_tokens=drafted, num_accepted_tokens=accepted,
                      accepted_per_pos=acc)
    return counts, records, dr


def test_expected_drafted_shares_and_steps_match_the_process() -> None:
    rng = random.Random(1)
    for cap in (7, 24, 96):
        shares, steps = drafted_shares(RATES, [(cap, cap)], fits_cap=True)
        runs = [simulate(RATES, [(cap, None)], rng) for _ in range(3000)]
        mc_steps = mean(c.num_steps or 0 for c, _, _ in runs)
        assert steps == pytest.approx(mc_steps, rel=0.02)
        for i in range(len(RATES)):
            mc_share = sum(dr[i] for _, _, dr in runs) / sum(c.num_steps or 0 for c, _, _ in runs)
            assert shares[i] == pytest.approx(mc_share, abs=0.01), (cap, i)
            # Accepting position i needs drafting it: the expected count is the set rate on the drafted share.
            mc_acc = sum(c.accepted_per_pos[i] for c, _, _ in runs) / sum(c.num_steps or 0 for c, _, _ in runs)
            assert RATES[i] * shares[i] == pytest.approx(mc_acc, abs=0.01), (cap, i)
        assert shares == sorted(shares, reverse=True) and shares[0] == 1.0


def test_short_outputs_truncate_more_steps() -> None:
    long, _ = drafted_shares(RATES, [(96, 96)], fits_cap=True)
    short, _ = drafted_shares(RATES, [(12, 12)], fits_cap=True)
    assert all(s <= lo for s, lo in zip(short, long)) and short[-1] < long[-1] < 1.0
    assert drafted_shares(RATES, [(96, 96)], fits_cap=False)[0] == [1.0] * 4


WORKLOAD = [(24, None)] * 8 + [(24, 14)] * 4  # short outputs: many steps cut short, some requests stop early
LONGER = [(24, None)] * 40


def _checks(rates: list[float], set_rates: list[float], runs: int, seed: int,
            workload: list[tuple[int, int | None]] = WORKLOAD) -> list[SyntheticCheck]:
    rng = random.Random(seed)
    out = []
    for _ in range(runs):
        counts, records, _ = simulate(rates, workload, rng)
        check = synthetic_check(counts, set_rates, records, max_tokens=24, fits_cap=True)
        assert check is not None
        out.append(check)
    return out


def test_z_scores_given_truncation_are_standard_and_the_verdict_holds_at_its_level() -> None:
    checks = _checks(RATES, RATES, runs=600, seed=7)
    assert all(c.drafted_basis == "output_cap" for c in checks)
    for i in range(len(RATES)):
        zs = [c.positions[i].z for c in checks]
        assert abs(mean(zs)) < 0.15, (i, mean(zs))
        assert 0.85 < stdev(zs) < 1.15, (i, stdev(zs))
    al_z = [c.al_z for c in checks]
    assert abs(mean(al_z)) < 0.15 and 0.85 < stdev(al_z) < 1.15
    assert sum(c.within is True for c in checks) / len(checks) >= 0.97  # 99% nominal over positions and AL


def test_without_accounting_for_truncation_the_last_position_reads_low() -> None:
    """What the engine's own per-position rate shows: biased below the set rate where steps were cut short."""
    checks = _checks(RATES, RATES, runs=200, seed=3, workload=LONGER)
    naive = [(c.positions[-1].measured - RATES[-1]) / c.positions[-1].se for c in checks]
    assert mean(naive) < -1.0
    assert all(c.expected_al < c.set_al for c in checks)


def test_an_engine_that_accepts_less_than_set_is_caught() -> None:
    checks = _checks([0.8, 0.6, 0.4, 0.2], RATES, runs=100, seed=11, workload=LONGER)
    assert sum(c.within is False for c in checks) / len(checks) > 0.9


def counts(steps: int, drafted: int, accepted: int, per_pos: list[int]) -> SDCounts:
    return SDCounts(source="counters", num_steps=steps, num_draft_tokens=drafted, num_accepted_tokens=accepted,
                    accepted_per_pos=per_pos)


def test_the_ceiling_is_met_only_when_every_drafted_token_is_accepted() -> None:
    ones = [1.0] * 4
    full = [RequestRecord(config_id="c", point_id="c1", conversation_id=f"q{i}", ok=True, output_tokens=96,
                          finish_reason="length") for i in range(2)]
    # cap 96 = 1 + 19 steps of 5: no step is cut short.
    ok = synthetic_check(counts(38, 152, 152, [38] * 4), ones, full, max_tokens=96, fits_cap=True)
    assert ok is not None and ok.ceiling and ok.all_accepted and ok.within
    assert ok.measured_al == ok.expected_al == 5.0
    short = synthetic_check(counts(38, 152, 150, [38, 38, 38, 36]), ones, full, max_tokens=96, fits_cap=True)
    assert short is not None and short.all_accepted is False and short.within is False
    assert short.note is not None and "150 of 152" in short.note


def test_drafted_counts_from_the_engine_replace_the_model() -> None:
    c = counts(100, 380, 200, [90, 60, 35, 15])
    check = synthetic_check(c, RATES, [], max_tokens=96, fits_cap=False, engine_drafted=[100, 100, 90, 90])
    assert check is not None and check.drafted_basis == "engine"
    assert [p.drafted_share for p in check.positions] == [1.0, 1.0, 0.9, 0.9]
    assert check.positions[3].expected == pytest.approx(0.27) and check.expected_drafted == pytest.approx(380)


def test_an_engine_drafting_less_than_k_without_saying_where_is_noted() -> None:
    check = synthetic_check(counts(100, 350, 200, [90, 70, 30, 10]), RATES, [], max_tokens=96, fits_cap=False)
    assert check is not None and check.drafted_basis == "every_step_k"
    assert check.note is not None and "does not say which positions" in check.note


def test_shared_seeds_are_not_judged() -> None:
    check = synthetic_check(counts(100, 400, 240, [90, 70, 50, 30]), RATES, [], max_tokens=96, fits_cap=False,
                            seed_note="every request carried seed 0")
    assert check is not None and check.within is None and "seed 0" in (check.note or "")


def test_no_step_count_no_check() -> None:
    c = SDCounts(source="per_request", num_steps=None, num_draft_tokens=40, num_accepted_tokens=20)
    assert synthetic_check(c, RATES, [], max_tokens=96, fits_cap=True) is None
    one = synthetic_check(counts(1, 4, 0, []), RATES, [], max_tokens=96, fits_cap=False)
    assert one is not None and math.isfinite(one.al_se) and one.positions[0].measured == 0.0
