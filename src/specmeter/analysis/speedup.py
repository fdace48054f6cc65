"""Speedup of SD over the same engine with speculation off, paired by concurrency on identical work."""

from __future__ import annotations

from collections.abc import Sequence

from specmeter.load.records import RequestRecord
from specmeter.metrics.stats import ratio_ci
from specmeter.results import PhaseResult, Ratio, RunSummary, SpeedupResult



def _ok(records: Sequence[RequestRecord], phase: str, concurrency: int) -> list[RequestRecord]:
    return [r for r in records if r.phase == phase and r.concurrency == concurrency and r.ok and not r.warmup]


def _pairs(summary: RunSummary) -> list[tuple[PhaseResult, PhaseResult]]:
    """(SD phase, speculation-off phase) on the same workload."""
    out = []
    for sd in summary.phases:
        if sd.spec_label == "off":
            continue
        base = next((p for p in summary.phases if p.spec_label == "off" and p.workload == sd.workload), None)
        if base is not None:
            out.append((sd, base))
    return out


def compute_speedups(summary: RunSummary, records: Sequence[RequestRecord]) -> list[SpeedupResult]:
    """One SpeedupResult per concurrency measured by an SD phase and its speculation-off twin.

    Throughput ratio = SD output tok/s / baseline output tok/s (level totals). Its CI comes from
    bootstrapping per-request stream rates (tokens / E2E), which track level throughput in a closed
    loop. TPOT and TTFT ratios are baseline / SD, so > 1 always means SD is better.
    """
    out: list[SpeedupResult] = []
    for sd, base in _pairs(summary):
        for lv in sd.levels:
            blv = base.level(lv.concurrency)
            if blv is None:
                continue
            s_rec, b_rec = _ok(records, sd.name, lv.concurrency), _ok(records, base.name, lv.concurrency)
            s_tps, b_tps = lv.latency.output_tokens_per_s, blv.latency.output_tokens_per_s
            thr = Ratio(value=s_tps / b_tps if s_tps and b_tps else None)
            ci = ratio_ci(_stream_rates(s_rec), _stream_rates(b_rec))
            if ci and thr.value is not None:
                # Center the per-stream CI on the level-total ratio: same relative width.
                mid = _mean(_stream_rates(s_rec)) / _mean(_stream_rates(b_rec))
                thr.ci95_low, thr.ci95_high = thr.value * ci[0] / mid, thr.value * ci[1] / mid
            tpot = _ratio_of_means([r.tpot_s for r in b_rec], [r.tpot_s for r in s_rec])
            ttft = _ratio_of_means([r.ttft_s for r in b_rec], [r.ttft_s for r in s_rec])
            s_ids = {(r.conversation_id, r.turn) for r in s_rec}
            b_ids = {(r.conversation_id, r.turn) for r in b_rec}
            same = s_ids == b_ids
            note = None if same else (
                f"phases completed different requests ({len(s_ids ^ b_ids)} differ): ratios compare unequal work"
            )
            out.append(SpeedupResult(concurrency=lv.concurrency, workload=sd.workload, sd_phase=sd.name,
                                     baseline_phase=base.name, output_throughput=thr, tpot=tpot, ttft=ttft,
                                     same_work=same, note=note))
    return out


def _stream_rates(records: Sequence[RequestRecord]) -> list[float]:
    return [r.output_tokens / r.e2e_s for r in records if r.output_tokens and r.e2e_s]


def _mean(xs: Sequence[float]) -> float:
    return sum(xs) / len(xs) if xs else float("nan")


def _ratio_of_means(numer: Sequence[float | None], denom: Sequence[float | None]) -> Ratio:
    a = [x for x in numer if x is not None]
    b = [x for x in denom if x is not None]
    if not a or not b or _mean(b) == 0:
        return Ratio(value=None)
    ci = ratio_ci(a, b)
    return Ratio(value=_mean(a) / _mean(b), ci95_low=ci[0] if ci else None, ci95_high=ci[1] if ci else None)
