"""Every decision made from a run's measurements, computed once and stored in the summary:
speedups with paired intervals, where speculation stops paying, the best configuration per point, and
whether speculation was lossless. Reports show these; they never recompute them."""

from __future__ import annotations

from collections.abc import Sequence

from specmeter.analysis.capacity import capacity_gaps
from specmeter.analysis.choice import choose, contenders
from specmeter.analysis.crossover import find_crossover
from specmeter.analysis.headline import decision_confidence, headline, headline_metric
from specmeter.analysis.headtohead import Arena, decision_bounds
from specmeter.analysis.host import conditions
from specmeter.analysis.identity import point_mismatch
from specmeter.analysis.lossless import lossless_check
from specmeter.analysis.offload import offload_warnings
from specmeter.analysis.phases import phase_breakdowns
from specmeter.analysis.speedup import compute_speedups
from specmeter.analysis.verify import verification
from specmeter.load.kinds import KINDS
from specmeter.schemas.analysis import Crossover, PointChoice, Ratio, Speedup, Verdict
from specmeter.schemas.plan import Role
from specmeter.schemas.records import RequestRecord
from specmeter.schemas.results import Analysis, LosslessCheck, RunSummary

FORCED_LENGTH_NOTE = (
    "output length forced with min_tokens + ignore_eos (vLLM masks EOS until the length is reached); "
    "`vllm bench serve` sends only ignore_eos, which gives different text and so different acceptance on "
    "the same prompts: compare acceptance only between runs that force lengths the same way"
)


def verdict(ratio: Ratio) -> Verdict | None:
    """pays / slows where the decision bounds (the requests' interval and the rounds' and instances',
    headtohead.decision_bounds) lie wholly above / below 1, so a verdict holds on the next run, not only over these
    requests; else unclear."""
    if ratio.value is None:
        return None  # nothing to judge (e.g. the baseline delivered no tokens): no verdict, not "unclear"
    if ratio.disturbed:
        return "disturbed"  # every round it rests on shared the machine with other work: no clean verdict
    low, high = decision_bounds(ratio)
    if low is not None and low > 1.0:
        return "pays"
    if high is not None and high < 1.0:
        return "slows"
    return "unclear"


def analyze(summary: RunSummary, records: Sequence[RequestRecord]) -> Analysis:
    speedups = compute_speedups(summary, records)
    for s in speedups:
        point = summary.plan.point(s.point_id)
        s.decided_on = headline_metric(point)
        s.verdict = verdict(headline(s, point))
        if (why := point_mismatch(summary, s.config_id, s.point_id)) is not None:  # measured another server's K
            s.verdict, s.note = "withheld", "; ".join(filter(None, (s.note, f"{why}: its verdict is withheld")))
    chosen = choices(summary, speedups, records)
    return Analysis(
        speedups=speedups,
        crossovers=crossovers(summary, speedups),
        choices=chosen,
        capacity=capacity_gaps(summary, speedups, chosen, records),
        lossless=lossless(summary, records),
        lossless_note=_lossless_note(summary),
        verification=verification(summary, records, speedups),
        offload=offload_warnings(summary),
        host=conditions(summary),
        phases=phase_breakdowns(summary, records),
    )


def _lookup(speedups: Sequence[Speedup], config_id: str, point_id: str) -> Speedup | None:
    return next((s for s in speedups if s.config_id == config_id and s.point_id == point_id), None)


def crossovers(summary: RunSummary, speedups: Sequence[Speedup]) -> list[Crossover]:
    """Per configuration, load axis and input length, where its speedup falls below 1 as load grows."""
    plan = summary.plan
    out: list[Crossover] = []
    for length in plan.input_lens:
        for config in plan.configs:
            for kind in KINDS.values():
                found = [(p.load, headline(s, p)) for p in plan.points
                         if p.axis == kind.axis and p.input_len == length
                         and (s := _lookup(speedups, config.id, p.id)) is not None]
                if found:
                    cross = find_crossover(config.id, kind.axis, [load for load, _ in found],
                                           [r.value for _, r in found], [r.ci95_low for _, r in found],
                                           [r.ci95_high for _, r in found])
                    if length is not None:
                        cross.input_len, cross.note = length, f"at {length} input tokens, {cross.note}"
                    out.append(cross)
    return out


def choices(summary: RunSummary, speedups: Sequence[Speedup], records: Sequence[RequestRecord]) -> list[PointChoice]:
    """Per point of the main workload: every candidate and the baseline, head to head from the cheapest. Synthetic
    acceptance is left out: it is a measurement, not something to run."""
    plan = summary.plan
    out: list[PointChoice] = []
    # Slurm job groups ran on different nodes: each is decided on its own, from its own baseline, never head to
    # head with another node's configurations (one group, or a local run: one choice per point).
    for group in dict.fromkeys(c.node_group for c in plan.configs):
        base = next((c for c in plan.configs if c.role is Role.baseline and c.workload == "main"
                     and c.node_group == group), None)
        if base is None:
            continue
        for point in plan.points:
            measured = [(c, headline(s, point).value) for c in plan.configs
                        if c.role is Role.candidate and c.workload == "main" and not c.spec.synthetic
                        and c.node_group == group and (s := _lookup(speedups, c.id, point.id)) is not None
                        and s.verdict != "withheld"]
            if measured:
                arena = Arena.of(summary.configs, records, point.id, headline_metric(point),
                                 min_gain=plan.min_gain, indifference=plan.indifference,
                                 confidence=decision_confidence(summary, point.id))
                choice = choose(point.id, contenders(base.id, measured), arena.duel, min_gain=plan.min_gain)
                choice.node_group = group
                out.append(choice)
    return out


def lossless(summary: RunSummary, records: Sequence[RequestRecord]) -> list[LosslessCheck]:
    """At temperature 0 only: sampling at T > 0 legitimately differs between runs. Never on synthetic acceptance,
    whose outputs are not the target's by design."""
    plan = summary.plan
    out: list[LosslessCheck] = []
    for config in plan.configs:
        base = plan.baseline_for(config)
        if config.role is Role.baseline or base is None or config.spec.synthetic:
            continue
        if plan.load_for(config).temperature == 0 and plan.load_for(base).temperature == 0:
            out.append(lossless_check(config, base, records))
    return out


def _lossless_note(summary: RunSummary) -> str | None:
    plan = summary.plan
    notes = []
    if any(plan.load_for(c).temperature > 0 for c in plan.configs):
        notes.append("no lossless check where temperature > 0: sampled outputs legitimately differ")
    if any(plan.load_for(c).ignore_eos for c in plan.configs):
        notes.append(FORCED_LENGTH_NOTE)
    synthetic = [c.id for c in plan.configs if c.spec.synthetic]
    if synthetic:
        notes.append(f"no lossless check on synthetic acceptance ({', '.join(synthetic)}): it accepts drafts at "
                     "random instead of verifying them, so its outputs are not the target's by design")
    return "; ".join(notes) or None
