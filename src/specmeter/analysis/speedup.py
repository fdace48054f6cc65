"""Speedup of each configuration over the baseline at each load point, on identical work.

Both sides ran the same requests, so intervals come from a paired bootstrap (request i of the candidate
is resampled together with request i of the baseline). With repeats, the pairing unit is (repeat,
request): repeat r of the candidate is paired with repeat r of the baseline, which ran next to it.
"""

from __future__ import annotations

from collections.abc import Sequence

from specmeter.analysis.headtohead import Paired, Side, compare
from specmeter.analysis.noise import RoundNoise
from specmeter.schemas.analysis import PhaseSpeedup, Speedup
from specmeter.schemas.plan import PlannedConfig, Role
from specmeter.schemas.records import RequestRecord
from specmeter.schemas.results import ConfigResult, RunSummary


def compute_speedups(summary: RunSummary, records: Sequence[RequestRecord]) -> list[Speedup]:
    """One Speedup per (non-baseline configuration, point) that both it and its baseline measured."""
    plan = summary.plan
    out: list[Speedup] = []
    noise = RoundNoise.of(summary.configs)
    for config in plan.configs:
        base = plan.baseline_for(config)
        cand_res, base_res = summary.config(config.id), summary.config(base.id) if base else None
        if config.role is Role.baseline or base is None or cand_res is None or base_res is None:
            continue
        for point in plan.points:
            if any(p.measured for p in cand_res.repeats(point.id)) and any(
                    p.measured for p in base_res.repeats(point.id)):  # a point that measured nothing has no speedup
                out.append(point_speedup(config, base, cand_res, base_res, point.id, records, noise))
    return out


def point_speedup(config: PlannedConfig, base: PlannedConfig, cand_res: ConfigResult, base_res: ConfigResult,
                  point_id: str, records: Sequence[RequestRecord], noise: RoundNoise | None = None) -> Speedup:
    """`config` over `base` at one point on every metric, paired by request (see analysis.headtohead), with the
    run's round noise where given (analysis.noise)."""
    cand, bl = Side.of(cand_res, records, point_id), Side.of(base_res, records, point_id)
    pairs = Paired.of(cand, bl)
    phases = list(dict.fromkeys(r.phase for _, r in sorted(cand.requests.items(), key=lambda kv: kv[1].start_s)
                                if r.phase is not None))
    return Speedup(
        config_id=config.id, baseline_id=base.id, point_id=point_id,
        output_throughput=compare(cand, bl, "output_throughput", noise=noise),
        tpot=compare(cand, bl, "tpot", noise=noise), ttft=compare(cand, bl, "ttft", noise=noise),
        e2e=compare(cand, bl, "e2e", noise=noise),
        paired_requests=len(pairs.keys), same_work=pairs.unmatched == 0,
        note=None if pairs.unmatched == 0 else f"the two sides completed different requests ({pairs.unmatched} "
        "differ): ratios compare unequal work; intervals use only the requests both completed",
        phases=[phase_speedup(cand, bl, phase, noise) for phase in phases],
    )


def phase_speedup(cand: Side, base: Side, phase: str, noise: RoundNoise | None) -> PhaseSpeedup:
    """`cand` over `base` on one phase's requests, on TPOT: a phase has no wall time of its own to divide a
    throughput by (the phases overlap at the switch), and decode speed is what the drafter's acceptance moves."""
    def keep(r: RequestRecord) -> bool:
        return r.phase == phase
    c, b = cand.only(keep), base.only(keep)
    return PhaseSpeedup(phase=phase, tpot=compare(c, b, "tpot", noise=noise), paired_requests=len(Paired.of(c, b).keys))
