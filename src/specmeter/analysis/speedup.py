"""Speedup of each configuration over the baseline at each load point, on identical work.

Both sides ran the same requests, so intervals come from a paired bootstrap (request i of the candidate
is resampled together with request i of the baseline). With repeats, the pairing unit is (repeat,
request): repeat r of the candidate is paired with repeat r of the baseline, which ran next to it.
"""

from __future__ import annotations

from collections.abc import Sequence

from specmeter.analysis.paired import fill_repeats, paired_ratio_of_means, paired_ratio_of_sums
from specmeter.schemas.analysis import Ratio, Speedup
from specmeter.schemas.plan import Plan, PlannedConfig, Role
from specmeter.schemas.records import RequestRecord
from specmeter.schemas.results import ConfigResult, RunSummary

RequestKey = tuple[int, str, int]  # (repeat, conversation id, turn)


def _by_request(records: Sequence[RequestRecord], config_id: str, point_id: str) -> dict[RequestKey, RequestRecord]:
    return {(r.repeat, r.conversation_id, r.turn): r for r in records
            if r.config_id == config_id and r.point_id == point_id and r.ok and not r.warmup}


def compute_speedups(summary: RunSummary, records: Sequence[RequestRecord]) -> list[Speedup]:
    """One Speedup per (non-baseline configuration, point) that both it and its baseline measured."""
    plan = summary.plan
    out: list[Speedup] = []
    for config in plan.configs:
        base = plan.baseline_for(config)
        cand_res, base_res = summary.config(config.id), summary.config(base.id) if base else None
        if config.role is Role.baseline or base is None or cand_res is None or base_res is None:
            continue
        for point in plan.points:
            if cand_res.repeats(point.id) and base_res.repeats(point.id):
                out.append(point_speedup(plan, config, base, cand_res, base_res, point.id, records))
    return out


def point_speedup(plan: Plan, config: PlannedConfig, base: PlannedConfig, cand_res: ConfigResult,
                  base_res: ConfigResult, point_id: str, records: Sequence[RequestRecord]) -> Speedup:
    cand, bl = _by_request(records, config.id, point_id), _by_request(records, base.id, point_id)
    keys = sorted(cand.keys() & bl.keys())
    c = [cand[k] for k in keys]
    b = [bl[k] for k in keys]
    repeats = sorted({r.repeat for r in cand_res.repeats(point_id)} & {r.repeat for r in base_res.repeats(point_id)})

    # Throughput: point totals (output tokens / wall), pooled over repeats. The interval's relative width
    # comes from the paired per-request stream rates (tokens / E2E), which track it in a closed loop.
    def totals(res: ConfigResult, r: int | None) -> tuple[float, float]:
        pts = [p for p in res.repeats(point_id) if r is None or p.repeat == r]
        return sum(p.latency.output_tokens for p in pts), sum(p.latency.wall_s for p in pts)

    def tput(r: int | None) -> float | None:
        (ct, cw), (bt, bw) = totals(cand_res, r), totals(base_res, r)
        return (ct / cw) / (bt / bw) if cw > 0 and bw > 0 and bt > 0 else None

    value = tput(None)
    est, ci = paired_ratio_of_sums([r.output_tokens for r in c], [r.e2e_s for r in c],
                                   [r.output_tokens for r in b], [r.e2e_s for r in b])
    throughput = Ratio(value=value)
    if value is not None and est and ci:
        throughput.ci95_low, throughput.ci95_high = value * ci[0] / est, value * ci[1] / est
    throughput = fill_repeats(throughput, [tput(r) for r in repeats])

    def latency_ratio(field: str) -> Ratio:
        """Baseline mean / candidate mean (> 1: the candidate is faster), paired, with per-repeat spread."""
        value, ci = paired_ratio_of_means([getattr(r, field) for r in b], [getattr(r, field) for r in c])
        ratio = Ratio(value=value, ci95_low=ci[0] if ci else None, ci95_high=ci[1] if ci else None)
        per_repeat = [_mean_ratio([(getattr(x, field), getattr(y, field))
                                   for k, x, y in zip(keys, b, c) if k[0] == rep]) for rep in repeats]
        return fill_repeats(ratio, per_repeat)

    differ = len(cand.keys() ^ bl.keys())
    return Speedup(
        config_id=config.id, baseline_id=base.id, point_id=point_id, output_throughput=throughput,
        tpot=latency_ratio("tpot_s"), ttft=latency_ratio("ttft_s"), e2e=latency_ratio("e2e_s"),
        paired_requests=len(keys), same_work=differ == 0,
        note=None if differ == 0 else f"the two sides completed different requests ({differ} differ): ratios "
        "compare unequal work; intervals use only the requests both completed",
    )


def _mean_ratio(pairs: Sequence[tuple[float | None, float | None]]) -> float | None:
    """mean(first) / mean(second) over the pairs where both are known."""
    both = [(x, y) for x, y in pairs if x is not None and y is not None]
    den = sum(y for _, y in both)
    return sum(x for x, _ in both) / den if both and den > 0 else None

