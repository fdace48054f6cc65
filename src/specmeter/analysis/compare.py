"""Compare stored runs side by side (e.g. vLLM against llama.cpp, or one engine before and after an upgrade).

A difference between runs means something only when they sent the same requests with the same sampling, so
runs are refused unless their workloads match. Each run is then set against the first (the reference) on the
requests both completed, paired by request across runs: the servers differ, the prompts do not, so pairing
removes prompt difficulty from the interval (but not differences between machines, or drift).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

from specmeter.analysis.headtohead import Paired, Side, compare
from specmeter.common.errors import InputError
from specmeter.config.models import IN_REQUEST, LoadPoint
from specmeter.metrics.sd import sum_counts
from specmeter.rundir.run_data import RunData
from specmeter.schemas.compare import (
    ComparedConfig,
    ComparedPoint,
    ComparedRun,
    PointComparison,
    RunComparison,
    RunDifference,
    RunEntry,
    WorkloadDifference,
)
from specmeter.schemas.plan import Role
from specmeter.schemas.results import ConfigResult

# What decides which requests are sent: the selection (its result is conversation_ids; the tokenizer that
# filtered by input length is a means, and its path differs between machines, so it is not compared).
WORKLOAD_FIELDS = ("dataset", "path", "categories", "options", "input_len", "num_prompts", "seed",
                   "conversation_ids")
# What changes the outputs or how many requests go out: the sampling and the request settings.
LOAD_FIELDS = ("api", "max_tokens", "ignore_eos", *IN_REQUEST, "seed", "num_prompts", "duration_s")

ALLOW_FLAG = "--allow-different-workloads"
_ROLE_ORDER = {Role.baseline: 0, Role.candidate: 1, Role.verification: 2}


def compare_runs(runs: Sequence[RunData], *, allow_different_workloads: bool = False) -> RunComparison:
    """Line up 2+ runs at the load points they share; refuse runs on different workloads unless allowed."""
    if len(runs) < 2:
        raise InputError("compare: give two or more run directories (the first is the reference)")
    names = run_names(runs)
    compared = [_compared_run(run, name) for run, name in zip(runs, names)]
    diffs = workload_differences(runs, names)
    if diffs and not allow_different_workloads:
        raise InputError(refusal(diffs))
    points, unmatched, arrivals = match_points(runs, names)
    comparison = RunComparison(
        runs=compared, same_workload=not diffs, allowed_different_workloads=allow_different_workloads,
        workload_differences=diffs, unmatched_points=unmatched,
        points=[PointComparison(point=p, configs=_compare_configs(runs, names, p)) for p in points],
    )
    comparison.warnings = arrivals + _warnings(comparison)
    comparison.notes = _notes(comparison)
    return comparison


# ---- the runs ---------------------------------------------------------------------------------------------
def run_names(runs: Sequence[RunData]) -> list[str]:
    """Each run's directory name, made unique with its parent's name (then a counter) when two share it."""
    paths = [r.run_dir.resolve() for r in runs]
    names = [p.name for p in paths]
    if len(set(names)) < len(names):
        names = [f"{p.parent.name}/{p.name}" if names.count(p.name) > 1 else p.name for p in paths]
    if len(set(names)) < len(names):
        names = [f"{n}#{i + 1}" for i, n in enumerate(names)]
    return names


def _compared_run(run: RunData, name: str) -> ComparedRun:
    engine = run.engine_version
    s = run.summary
    return ComparedRun(name=name, run_dir=str(run.run_dir), engine_version=engine,
                       label=f"{name} ({engine or 'engine ?'})", plan_kind=s.plan.kind, status=s.status,
                       created_utc=s.created_utc, target=run.target_hash)


# ---- same workload? ---------------------------------------------------------------------------------------
def _describe(field: str, ref: Any, value: Any) -> tuple[str, str]:
    """Both values as short text; id lists as counts, so a thousand-prompt workload stays one line."""
    if field.endswith("conversation_ids") and isinstance(ref, list) and isinstance(value, list):
        missing = len(set(value) - set(ref))
        order = " (same ids, other order)" if not missing and len(ref) == len(value) else ""
        return f"{len(ref)} conversations", f"{len(value)} conversations, {missing} not in the reference{order}"
    return json.dumps(ref, sort_keys=True), json.dumps(value, sort_keys=True)


def workload_differences(runs: Sequence[RunData], names: Sequence[str]) -> list[WorkloadDifference]:
    """Every selection or sampling setting in which a run differs from the first."""
    ref = runs[0].summary.plan
    out: list[WorkloadDifference] = []
    for run, name in zip(runs[1:], names[1:]):
        plan = run.summary.plan
        pairs = [(f"workload.{f}", getattr(ref.workload, f), getattr(plan.workload, f)) for f in WORKLOAD_FIELDS]
        pairs += [(f"load.{f}", getattr(ref.load, f), getattr(plan.load, f)) for f in LOAD_FIELDS]
        for field, a, b in pairs:
            a, b = (list(a) if isinstance(a, tuple) else a), (list(b) if isinstance(b, tuple) else b)
            if a != b:
                ra, vb = _describe(field, a, b)
                out.append(WorkloadDifference(run=name, field=field, reference=ra, value=vb))
    return out


def refusal(diffs: Sequence[WorkloadDifference]) -> str:
    """One line: which runs differ from the reference in what, and the fix."""
    by_run: dict[str, list[str]] = {}
    for d in diffs:
        by_run.setdefault(d.run, []).append(f"{d.field} {d.value} vs {d.reference}")
    what = "; ".join(f"{run} differs from the reference in {', '.join(items)}" for run, items in by_run.items())
    return (f"compare: the runs did not send the same workload ({what}), so their differences would mix engine "
            f"and workload; pass {ALLOW_FLAG} to compare anyway")


# ---- load points ------------------------------------------------------------------------------------------


def _counterpart(ref: LoadPoint, points: list[LoadPoint], taken: set[str]) -> LoadPoint | None:
    """The point with the reference's id, else the only untaken one at the same load (same concurrency or
    same rate: arrivals may differ, a note says so)."""
    same_id = next((p for p in points if p.id == ref.id and p.id not in taken), None)
    if same_id is not None:
        return same_id
    same_load = [p for p in points if (p.axis, p.load) == (ref.axis, ref.load) and p.id not in taken]
    return same_load[0] if len(same_load) == 1 else None


def match_points(runs: Sequence[RunData], names: Sequence[str]) -> tuple[list[ComparedPoint], list[str],
                                                                            list[str]]:
    """Points present in every run, in the reference's order; the rest as lines saying where they are; notes
    on matched rate points whose arrivals differ."""
    plans = [list(run.summary.plan.points) for run in runs]
    taken: list[set[str]] = [set() for _ in runs]
    matched: list[ComparedPoint] = []
    notes: list[str] = []
    for ref in plans[0]:
        found = [ref, *(_counterpart(ref, points, taken[i + 1]) for i, points in enumerate(plans[1:]))]
        if any(p is None for p in found):
            continue
        points = [p for p in found if p is not None]
        for i, p in enumerate(points):
            taken[i].add(p.id)
        matched.append(ComparedPoint(axis=ref.axis, load=ref.load, label=ref.label(),
                                     point_ids=[p.id for p in points]))
        shapes = sorted({p.label() for p in points})
        if len(shapes) > 1:
            notes.append(f"{ref.label()}: arrivals differ between runs ({'; '.join(shapes)}): matched on the rate")
    unmatched: list[str] = []
    for name, points, used in zip(names, plans, taken):
        unmatched += [f"{p.label()} ({p.id}) of {name}: not in every run, so not compared"
                      for p in points if p.id not in used]
    return matched, unmatched, notes


# ---- configurations ---------------------------------------------------------------------------------------
def _measured(run: RunData, point_id: str) -> list[ConfigResult]:
    """Configurations of the run with results at the point, baseline first, then in plan order."""
    found = [c for c in run.summary.configs if c.repeats(point_id) and not c.server_error]
    return sorted(found, key=lambda c: _ROLE_ORDER[c.role])


def _slot_key(c: ConfigResult) -> tuple[Role, str]:
    return c.role, c.workload


Slot = list[ConfigResult | None]  # one configuration per run, lined up


def _free(slots: list[Slot], i: int, c: ConfigResult) -> list[Slot]:
    """Slots holding a reference configuration of c's role and workload and nothing yet from run i."""
    return [s for s in slots if s[i] is None and s[0] is not None and _slot_key(s[0]) == _slot_key(c)]


def _place(slots: list[Slot], i: int, configs: list[ConfigResult],
           same: Callable[[ConfigResult, ConfigResult], bool]) -> list[ConfigResult]:
    """Put each of run i's configurations into the first free slot whose reference it is `same` as."""
    rest: list[ConfigResult] = []
    for c in configs:
        slot = next((s for s in _free(slots, i, c) if s[0] is not None and same(s[0], c)), None)
        if slot is None:
            rest.append(c)
        else:
            slot[i] = c
    return rest


def line_up(runs: Sequence[RunData], point: ComparedPoint) -> list[Slot]:
    """Configuration slots across runs: same role and workload, then the same id, else the same speculation
    label, else each run's only remaining one of that role; anything else gets a slot of its own."""
    n = len(runs)
    slots: list[Slot] = [[c, *([None] * (n - 1))] for c in _measured(runs[0], point.point_ids[0])]
    for i in range(1, n):
        left = _measured(runs[i], point.point_ids[i])
        left = _place(slots, i, left, lambda a, b: a.config_id == b.config_id)
        left = _place(slots, i, left, lambda a, b: a.spec_label == b.spec_label)
        for c in list(left):
            free = _free(slots, i, c)
            if len(free) == 1 and [_slot_key(x) for x in left].count(_slot_key(c)) == 1:
                free[0][i] = c
                left.remove(c)
        for c in left:
            slots.append([*([None] * i), c, *([None] * (n - i - 1))])
    return sorted(slots, key=lambda s: _ROLE_ORDER[next(c for c in s if c is not None).role])


def _compare_configs(runs: Sequence[RunData], names: Sequence[str], point: ComparedPoint) -> list[ComparedConfig]:
    out: list[ComparedConfig] = []
    for slot in line_up(runs, point):
        first = next(c for c in slot if c is not None)
        entries: list[RunEntry | None] = []
        for i, c in enumerate(slot):
            if c is None:
                entries.append(None)
                continue
            entry = _entry(runs[i], names[i], c, point.point_ids[i])
            ref = slot[0]
            if i > 0 and ref is not None:
                entry.vs_reference = difference(runs[0], ref, point.point_ids[0], runs[i], c, point.point_ids[i])
            entries.append(entry)
        out.append(ComparedConfig(role=first.role, name=first.config_id, entries=entries))
    return out


# ---- one run's numbers at a point -------------------------------------------------------------------------
def _tok_s(c: ConfigResult, point_id: str) -> float | None:
    """Output tokens / wall time pooled over repeats (as a speedup pools them)."""
    pts = c.repeats(point_id)
    wall = sum(p.latency.wall_s for p in pts)
    return sum(p.latency.output_tokens for p in pts) / wall if wall > 0 else None


def _tpot_mean(c: ConfigResult, point_id: str) -> float | None:
    """Mean TPOT over every request of every repeat (each repeat's mean weighted by its count)."""
    known = [(p.latency.tpot_s.mean, p.latency.tpot_s.count) for p in c.repeats(point_id)
             if p.latency.tpot_s.mean is not None and p.latency.tpot_s.count > 0]
    count = sum(n for _, n in known)
    return sum(m * n for m, n in known) / count if count else None


def _al(c: ConfigResult, point_id: str) -> float | None:
    """The headline AL with counts pooled over repeats (counts add up exactly)."""
    heads = [h for p in c.repeats(point_id) if (h := p.sd.headline) is not None]
    if not heads:
        return None
    return (heads[0] if len(heads) == 1 else sum_counts(heads, source=heads[0].source)).acceptance_length


def _entry(run: RunData, name: str, c: ConfigResult, point_id: str) -> RunEntry:
    speedup = next((s for s in run.summary.analysis.speedups if s.config_id == c.config_id
                    and s.point_id == point_id), None)
    return RunEntry(run=name, config_id=c.config_id, spec_label=c.spec_label, point_id=point_id,
                    output_tokens_per_s=_tok_s(c, point_id), tpot_mean_s=_tpot_mean(c, point_id),
                    acceptance_length=_al(c, point_id), speedup=speedup)


# ---- one run against the reference ------------------------------------------------------------------------
def difference(ref_run: RunData, ref: ConfigResult, ref_point: str, run: RunData, c: ConfigResult,
               point_id: str) -> RunDifference:
    """`c` in `run` against `ref` in the reference run at the same load, paired by request across runs."""
    mine, theirs = Side.of(c, run.records, point_id), Side.of(ref, ref_run.records, ref_point)
    pairs = Paired.of(mine, theirs)
    notes: list[str] = []
    throughput = compare(mine, theirs, "output_throughput")
    tpot = compare(mine, theirs, "tpot")
    if tpot.value is None:
        mine_tpot, ref_tpot = _tpot_mean(c, point_id), _tpot_mean(ref, ref_point)
        tpot.value = ref_tpot / mine_tpot if ref_tpot is not None and mine_tpot else None
        if tpot.value is not None:
            notes.append("TPOT ratio from the stored means, no request matched")
    keys = pairs.keys
    if len(keys) < 2:
        notes.append(f"{len(keys)} request(s) matched across the runs by (conversation, turn, repeat): no interval")
    if pairs.unmatched and len(keys) >= 2:
        notes.append(f"{pairs.unmatched} request(s) completed by only one of the runs: intervals use the "
                     f"{len(keys)} both completed")
    return RunDifference(reference_config_id=ref.config_id, output_throughput=throughput, tpot=tpot,
                         paired_requests=len(keys), note="; ".join(notes) or None)


# ---- notes ------------------------------------------------------------------------------------------------
def _warnings(cmp: RunComparison) -> list[str]:
    """What can make a difference wrong (workload differences and per-difference notes are stored apart)."""
    ref = cmp.reference
    out: list[str] = []
    for r in cmp.runs[1:]:
        if r.target and ref.target and r.target != ref.target:
            out.append(f"{r.name}: target weights differ from the reference's ({r.target[:10]} vs "
                       f"{ref.target[:10]}): a different model file (or quantisation) changes outputs and "
                       "acceptance, not only speed")
    for r in cmp.runs:
        if r.status != "complete":
            out.append(f"{r.name}: run {r.status}: what it did not measure is missing here")
    return out


def _notes(cmp: RunComparison) -> list[str]:
    """How the comparison was made."""
    out = [f"reference: {cmp.reference.label}; every difference is paired by request across runs (the same "
           "conversation, turn and repeat, served by different servers): pairing removes prompt difficulty from "
           "the interval, not differences between machines or drift between the runs"]
    for pc in cmp.points:
        for slot in pc.configs:
            if slot.entries[0] is None:
                where = ", ".join(f"{e.run} {e.config_id}" for e in slot.entries if e is not None)
                out.append(f"{pc.point.label}: {where} has no counterpart in the reference: shown, not compared")
    return out
