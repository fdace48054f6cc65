"""Sequential sampling against the fixed design, on the same data: the requests it saves, what the indifference
zone and resting save on top, and any decision that differs.

A fixed-precision sweep runs every point `max_rounds` rounds and decides on all of them at 95%. The adaptive
design runs the same rounds in the same order but looks after round `min_rounds` and each round after, at the
confidence its alpha spending allows, and stops a point once every decision there is settled. Replaying the
adaptive rule on the fixed sweep's own rounds measures exactly what it saves (no drift between two runs to
muddy the ratio): per point, the rounds, requests and measured wall time each design used, and the choice
each made there (best configuration at the point, and the recommended table). The adaptive rule is replayed
three times: without a zone (only beats and does-not-beat settle, as before ties existed), with the indifference
zone (a costlier configuration at most z better ties, and settles too), and with the zone and resting (a
configuration no open comparison can read sits out the next rounds: each look then reads only the rounds each
configuration would have run).

Run (about 12 minutes here; or give --run-dir of a fixed sweep with repeats = max_rounds):
    .venv/bin/python benchmarks/sequential_sampling.py --out runs/bench-sequential

--resting DIR ... replays resting alone on adaptive runs' own rounds (a demo's run directory, its propose/ and
verify/): the requests and measured seconds it would have left out, at the same stops (seconds, no servers):
    D=runs/<id>-demo; .venv/bin/python benchmarks/sequential_sampling.py --resting $D $D/propose $D/verify

--simulate compares the stopping rules on simulated points (no servers, about a minute): a challenger truly `ratio`
times the incumbent's throughput, per-request hardness shared by both, per-request noise on a steady machine (1.5%)
and busier ones (5%, 10%), 12 requests a configuration a round, looks after rounds 2..4. Per case: the mean rounds
and requests each rule spent and its rate of wrong answers beyond the zone (the cheaper kept where the challenger
is more than z better, or the challenger chosen where it is more than z worse). The rules: tie and futility (old),
with the zone's futility on top (new: analysis.sequential.indifferent), and, for the record, a stop on the
projected interval alone (stop where the interval at the budget, on today's estimate, would still straddle
1 + min gain and 1 + z), which was not taken:
    .venv/bin/python benchmarks/sequential_sampling.py --simulate

--zone DIR ... replays the same runs with resting and futility, without the zone's futility and with it: where
each point would have stopped, what it saves, and whether any choice or table differs (seconds, no servers):
    D=runs/<id>-demo; .venv/bin/python benchmarks/sequential_sampling.py --zone $D $D/propose $D/verify

--futility DIR ... replays the same runs with resting, without futility and with it (load.futility, 5% unless
--gamma says): where each point would have stopped, the requests and measured seconds it saves, and whether any
point's choice or the recommended table differs:
    D=runs/<id>-demo; .venv/bin/python benchmarks/sequential_sampling.py --futility $D $D/propose $D/verify
"""

from __future__ import annotations

import argparse
import math
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from statistics import NormalDist

import numpy as np

from specmeter.analysis.decide import analyze
from specmeter.analysis.headtohead import Side, head_to_head
from specmeter.analysis.recommend import recommend
from specmeter.analysis.sequential import (
    confidence_after,
    distinct,
    futile,
    indifferent,
    point_arena,
    point_walks,
    resting,
    settled,
)
from specmeter.config.models import LoadSpec
from specmeter.execution.runner import execute
from specmeter.plans.demo import demo_plan
from specmeter.rundir.store import RunStore, latest_records, load_summary
from specmeter.schemas.analysis import HeadToHead
from specmeter.schemas.metrics import Distribution, LatencySummary
from specmeter.schemas.plan import Role
from specmeter.schemas.records import RequestRecord
from specmeter.schemas.results import ConfigResult, PointResult, PointSampling, RunSummary
from specmeter.schemas.sd import SDSummary

Ran = dict[str, set[int]]  # configuration -> the rounds (repeats) it ran at a point


def cut(summary: RunSummary, records: list[RequestRecord], point_id: str, ran: Ran
        ) -> tuple[RunSummary, list[RequestRecord]]:
    """The run as it stood with each configuration's rounds at one point cut to those it ran (other points whole)."""
    s = summary.model_copy(deep=True)
    for res in s.configs:
        res.points = [p for p in res.points if p.point_id != point_id or p.repeat in ran.get(res.config_id, set())]
    kept = [r for r in records if r.point_id != point_id or r.repeat in ran.get(r.config_id, set())]
    return s, kept


def replay(summary: RunSummary, records: list[RequestRecord], load: LoadSpec, *, rest: bool, zone: bool = True
           ) -> dict[str, tuple[int, bool, Ran]]:
    """Per point, the rounds the adaptive rule would have run on this data, whether it settled there, and the rounds
    each configuration ran (with `rest`, a configuration the look rested sits out the next round; with
    `load.futility`, a point also stops where no open decision is likely to end as a win, and with `zone` too where
    none is likely to end as one beyond the indifference zone, as the runner does)."""
    out: dict[str, tuple[int, bool, Ran]] = {}
    plan = summary.plan
    for point in plan.points:
        ran: Ran = {c.id: set(range(load.min_rounds)) for c in plan.configs if plan.runs(c, point.id)}
        for r in range(load.min_rounds, load.max_rounds + 1):
            s, recs = cut(summary, records, point.id, ran)
            arena = point_arena(s, recs, point.id, confidence_after(r, load))
            walks = point_walks(s, recs, point.id, confidence_after(r, load), arena)
            decisions = distinct(walks)
            done = settled(decisions)
            curtailed = futile(decisions, r, load) is not None or (zone and indifferent(decisions, r, load) is not None)
            if done or r == load.max_rounds or curtailed:
                out[point.id] = (r, done, ran)
                break
            rested = resting(s, walks, point.id, arena.duel) if rest else set()
            for cid, rounds in ran.items():
                if cid not in rested:
                    rounds.add(r)
    return out


def with_zone(summary: RunSummary, indifference: float) -> RunSummary:
    """The run as if planned with this indifference zone (min gain: no ties)."""
    s = summary.model_copy(deep=True)
    s.plan.indifference = indifference
    return s


def adaptive_run(summary: RunSummary, records: list[RequestRecord], load: LoadSpec,
                 stop: dict[str, tuple[int, bool, Ran]]) -> tuple[RunSummary, list[RequestRecord]]:
    """The fixed run cut to the rounds the adaptive rule ran, analysed as the adaptive design would."""
    s = summary.model_copy(deep=True)
    s.plan.load = load
    for res in s.configs:
        res.points = [p for p in res.points if p.repeat in stop[p.point_id][2].get(res.config_id, set())]
    kept = [r for r in records if r.repeat in stop[r.point_id][2].get(r.config_id, set())]
    s.sampling = [PointSampling(point_id=p, precision="adaptive", rounds=n, requests=0,
                                stopped="settled" if done else "budget", confidence=confidence_after(n, load))
                  for p, (n, done, _) in stop.items()]
    s.analysis = analyze(s, kept)
    return s, kept


def usage(summary: RunSummary, records: list[RequestRecord], point_id: str) -> tuple[int, float]:
    """Requests sent (warmups excluded) and measured seconds at a point, every configuration together."""
    n = sum(1 for r in records if r.point_id == point_id and not r.warmup)
    wall = sum(p.latency.wall_s for res in summary.configs for p in res.repeats(point_id))
    return n, wall


@dataclass(frozen=True)
class Replayed:
    """An adaptive run replayed on its own rounds under one rule: where each point stopped, the run cut to those
    rounds, and the requests and measured seconds that used."""

    stop: dict[str, tuple[int, bool, Ran]]
    summary: RunSummary
    records: list[RequestRecord]
    requests: int
    seconds: float


def replayed(summary: RunSummary, records: list[RequestRecord], load: LoadSpec, *, rest: bool,
             zone: bool = True) -> Replayed:
    stop = replay(summary, records, load, rest=rest, zone=zone)
    cut_summary, kept = adaptive_run(summary, records, load, stop)
    used = [usage(cut_summary, kept, p) for p in stop]
    return Replayed(stop, cut_summary, kept, sum(u[0] for u in used), sum(u[1] for u in used))


def resting_on(run_dirs: list[Path]) -> None:
    """Each adaptive run replayed on its own rounds with every configuration running and with resting."""
    totals = {False: [0, 0.0], True: [0, 0.0]}
    print("| run | points: rounds (settled) | all: requests / seconds | resting: requests / seconds |")
    print("|---|---|---|---|")
    for run_dir in run_dirs:
        summary = load_summary(run_dir)
        records = latest_records(RunStore(run_dir).read_records())
        load = summary.plan.load.model_copy(update={"futility": 0.0})  # resting alone
        runs = [replayed(summary, records, load, rest=rest) for rest in (False, True)]
        for rest, run in zip((False, True), runs, strict=True):
            totals[rest] = [totals[rest][0] + run.requests, totals[rest][1] + run.seconds]
        cells = [f"{run.requests} / {run.seconds:.0f}" for run in runs]
        stops = ", ".join(f"{p} {n}{' (settled)' if done else ''}" for p, (n, done, _) in runs[-1].stop.items())
        print(f"| {run_dir} | {stops} | {' | '.join(cells)} |")
    (n0, w0), (n1, w1) = totals[False], totals[True]
    print(f"\nresting leaves out {n0 - n1} of {n0} requests ({n1 / n0:.3f}x) and {w0 - w1:.0f} of {w0:.0f} measured "
          f"seconds ({w1 / w0:.3f}x)")


def futility_on(run_dirs: list[Path], futility: float) -> None:
    """Each adaptive run replayed on its own rounds, with resting, without futility and with it (and the zone's)."""
    rules = {"without futility": (0.0, False), "with": (futility, True)}
    _compare_on(run_dirs, rules, f"futility at {futility:.0%}")


def zone_on(run_dirs: list[Path], futility: float) -> None:
    """Each adaptive run replayed on its own rounds, with resting and futility, without the zone's futility and
    with it."""
    rules = {"without the zone's futility": (futility, False), "with": (futility, True)}
    _compare_on(run_dirs, rules, "the zone's futility")


def _compare_on(run_dirs: list[Path], rules: dict[str, tuple[float, bool]], what: str) -> None:
    """Two rules (name -> futility, the zone's futility on?) replayed on each run's own rounds, with resting: where
    each point stopped, the requests and measured seconds, and whether any choice or the recommended table differs."""
    (before, _), (after, _) = rules.items()
    totals = [[0, 0.0], [0, 0.0]]
    print(f"| run | points: rounds {before} / {after} | {before}: requests / seconds | {after}: requests / seconds "
          "| choices, table |")
    print("|---|---|---|---|---|")
    for run_dir in run_dirs:
        summary = load_summary(run_dir)
        records = latest_records(RunStore(run_dir).read_records())
        runs = [replayed(summary, records, summary.plan.load.model_copy(update={"futility": g}), rest=True, zone=z)
                for g, z in rules.values()]
        for total, run in zip(totals, runs, strict=True):
            total[0], total[1] = total[0] + run.requests, total[1] + run.seconds
        cells = [f"{run.requests} / {run.seconds:.0f}" for run in runs]
        picks = [{c.point_id: c.best_config_id for c in run.summary.analysis.choices} for run in runs]
        tables = [_table(run) if summary.plan.kind in ("sweep", "demo") else None for run in runs]
        rounds = ", ".join(f"{p} {n} / {runs[1].stop[p][0]}" for p, (n, _, _) in runs[0].stop.items())
        same = "same" if picks[0] == picks[1] and tables[0] == tables[1] else f"differ: {picks} {tables}"
        print(f"| {run_dir} | {rounds} | {' | '.join(cells)} | {same} |")
    (n0, w0), (n1, w1) = totals
    print(f"\n{what} leaves out {n0 - n1} of {n0} requests ({n1 / n0:.3f}x) and {w0 - w1:.0f} of "
          f"{w0:.0f} measured seconds ({w1 / w0:.3f}x)")


def _table(run: Replayed) -> list[list[int]] | None:
    """The table the replayed run recommends (None: none)."""
    best = recommend(run.summary, run.records).best
    return [r.entry for r in best.ranges] if best else None


SIM_LOAD = LoadSpec(precision="adaptive", min_rounds=2, max_rounds=4)
SIM_ZONE, SIM_GAIN, SIM_REQUESTS = 0.03, 0.01, 12  # the default zone and minimum gain; requests a round
SIM_NOISES = (0.015, 0.05, 0.10)
SIM_RATIOS = (0.97, 1.0, 1.01, 1.02, 1.03, 1.04, 1.05, 1.08)
Rule = Callable[[HeadToHead, int], bool]  # stop a look whose comparison is open (outcome unsettled)?


def sim_side(cid: str, rounds: list[np.ndarray]) -> Side:
    """A side from its per-request E2E seconds per round, 100 output tokens each."""
    recs = [RequestRecord(config_id=cid, point_id="c1", repeat=r, conversation_id=f"q{i}", ok=True, ttft_s=0.01,
                          e2e_s=float(x), output_tokens=100) for r, e2e in enumerate(rounds) for i, x in enumerate(e2e)]
    res = ConfigResult(config_id=cid, role=Role.candidate, spec_label=cid, points=[
        PointResult(point_id="c1", repeat=r, latency=_latency(float(e2e.sum()), 100 * len(e2e)),
                    sd=SDSummary(available=False)) for r, e2e in enumerate(rounds)])
    return Side.of(res, recs, "c1")


def _latency(wall: float, tokens: int) -> LatencySummary:
    d = Distribution(count=SIM_REQUESTS)
    return LatencySummary(num_requests=SIM_REQUESTS, num_ok=SIM_REQUESTS, wall_s=wall, output_tokens=tokens,
                          prompt_tokens=100, output_tokens_per_s=tokens / wall, requests_per_s=1.0, ttft_s=d,
                          tpot_s=d, inter_chunk_s=d, itl_per_token_s=d, e2e_s=d, queued_s=d, tokens_per_chunk=1.0)


def sim_looks(rng: np.random.Generator, ratio: float, noise: float) -> list[tuple[int, HeadToHead]]:
    """One simulated point: the looks the runner takes (rounds run, the comparison at that look's confidence), up to
    the budget or a beats / does-not-beat / tie, which every rule reads alike."""
    a: list[np.ndarray] = []
    b: list[np.ndarray] = []
    out: list[tuple[int, HeadToHead]] = []
    for done in range(1, SIM_LOAD.max_rounds + 1):
        hard = rng.lognormal(0.0, 0.5, SIM_REQUESTS)
        a.append(hard / ratio * (1 + rng.normal(0, noise, SIM_REQUESTS)).clip(0.5))
        b.append(hard * (1 + rng.normal(0, noise, SIM_REQUESTS)).clip(0.5))
        if done < SIM_LOAD.min_rounds:
            continue
        h = head_to_head(sim_side("a", a), sim_side("b", b), "c1", "output_throughput", min_gain=SIM_GAIN,
                         indifference=SIM_ZONE, confidence=confidence_after(done, SIM_LOAD))
        out.append((done, h))
        if h.outcome != "unsettled":
            break
    return out


def projected(h: HeadToHead, rounds: int) -> bool:
    """The stop not taken: the interval at the budget, its half-width shrunk with the rounds on today's estimate,
    would still straddle both 1 + min gain and 1 + z, so the budget could settle nothing."""
    if h.ratio.value is None or h.low is None or rounds >= SIM_LOAD.max_rounds:
        return False
    normal = NormalDist()
    now, end = (normal.inv_cdf(0.5 + c / 2) for c in (h.ratio.confidence, confidence_after(SIM_LOAD.max_rounds,
                                                                                             SIM_LOAD)))
    half = (h.ratio.value - h.low) / now * end * math.sqrt(rounds / SIM_LOAD.max_rounds)
    return h.ratio.value - half < h.threshold and h.ratio.value + half > 1.0 + SIM_ZONE


SIM_RULES: dict[str, Rule] = {
    "old": lambda h, r: futile([h], r, SIM_LOAD) is not None,
    "new": lambda h, r: futile([h], r, SIM_LOAD) is not None or indifferent([h], r, SIM_LOAD) is not None,
    "projected": lambda h, r: futile([h], r, SIM_LOAD) is not None or projected(h, r),
}


def sim_stop(looks: list[tuple[int, HeadToHead]], rule: Rule) -> tuple[bool, int]:
    """Where `rule` stops on these looks: whether the challenger was chosen (a win), and the rounds run."""
    for done, h in looks:
        if h.outcome != "unsettled" or rule(h, done):
            return h.outcome == "beats", done
    return False, looks[-1][0]


def wrong_beyond_zone(ratio: float, chosen: bool) -> bool:
    """The answer costs more than the zone: the cheaper kept where the challenger is more than z better, or the
    challenger chosen where it is more than z worse."""
    return (not chosen and ratio > 1.0 + SIM_ZONE) or (chosen and ratio < 1.0 / (1.0 + SIM_ZONE))


def simulate(points: int, seed: int = 7) -> dict[tuple[float, float], dict[str, tuple[float, float]]]:
    """Per (noise, ratio): each rule's mean requests per point (both configurations) and wrong-answer rate."""
    out: dict[tuple[float, float], dict[str, tuple[float, float]]] = {}
    for noise in SIM_NOISES:
        for ratio in SIM_RATIOS:
            rng = np.random.default_rng(seed)
            sims = [sim_looks(rng, ratio, noise) for _ in range(points)]
            out[(noise, ratio)] = {}
            for name, rule in SIM_RULES.items():
                stops = [sim_stop(looks, rule) for looks in sims]
                requests = float(np.mean([r for _, r in stops])) * 2 * SIM_REQUESTS
                out[(noise, ratio)][name] = requests, float(np.mean([wrong_beyond_zone(ratio, c) for c, _ in stops]))
    return out


def simulated(points: int) -> None:
    """The table: per case, requests and wrong answers under each rule, and what the new one saves."""
    table = simulate(points)
    print(f"{points} simulated points a case; zone {SIM_ZONE:.0%}, min gain {SIM_GAIN:.0%}, looks after rounds "
          f"{SIM_LOAD.min_rounds}..{SIM_LOAD.max_rounds}, {SIM_REQUESTS} requests a configuration a round\n")
    print("| noise | true ratio | requests old / new / projected | saved by new | wrong beyond the zone old / new / "
          "projected |")
    print("|---|---|---|---|---|")
    for (noise, ratio), rules in table.items():
        (old_n, old_w), (new_n, new_w), (pro_n, pro_w) = (rules[name] for name in SIM_RULES)
        print(f"| {noise:.1%} | {ratio:.2f} | {old_n:.1f} / {new_n:.1f} / {pro_n:.1f} | "
              f"{1 - new_n / old_n:.1%} | {old_w:.1%} / {new_w:.1%} / {pro_w:.1%} |")
    near = [rules for (_, ratio), rules in table.items() if 1.0 <= ratio <= 1.0 + SIM_ZONE]
    print()
    for name in SIM_RULES:
        spent = sum(rules[name][0] for rules in near) / len(near)
        wrong = np.mean([rules[name][1] for rules in table.values()])
        print(f"{name}: {spent:.1f} requests a near-tie point (ratio 1 to 1 + z), {wrong:.1%} wrong beyond the zone "
              "over every case")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--resting", type=Path, nargs="+", metavar="DIR", help="replay resting on these adaptive runs")
    ap.add_argument("--futility", type=Path, nargs="+", metavar="DIR",
                    help="replay these adaptive runs without futility and with it")
    ap.add_argument("--zone", type=Path, nargs="+", metavar="DIR",
                    help="replay these adaptive runs with futility, without the zone's futility and with it")
    ap.add_argument("--simulate", type=int, nargs="?", const=200, metavar="POINTS",
                    help="compare the stopping rules on simulated points (POINTS a case; default 200)")
    ap.add_argument("--gamma", type=float, default=0.05, help="the futility replayed (--futility; default 5%%)")
    ap.add_argument("--run-dir", type=Path, help="a finished fixed sweep (interleaved, repeats = max rounds)")
    ap.add_argument("--out", type=Path, default=Path(tempfile.mkdtemp(prefix="specmeter-seq-")))
    ap.add_argument("--min-rounds", type=int, default=2)
    ap.add_argument("--max-rounds", type=int, default=4)
    ap.add_argument("--indifference", type=float, help="the zone replayed (default: the run's)")
    args = ap.parse_args()
    if args.simulate:
        simulated(args.simulate)
        return 0
    if args.resting:
        resting_on(args.resting)
        return 0
    if args.futility:
        futility_on(args.futility, args.gamma)
        return 0
    if args.zone:
        zone_on(args.zone, args.gamma)
        return 0
    run_dir = args.run_dir
    if run_dir is None:  # the demo's sweep (its pair, K 2 and 4, concurrency 1/4/16), in the fixed design
        run_dir = args.out / "fixed"
        given = {"concurrency": [1, 4, 16], "num_prompts": 12, "max_tokens": 96}
        ex = demo_plan([2, 4], given, repeats=args.max_rounds, precision="fixed")
        execute(ex, RunStore(run_dir))
    fixed = load_summary(run_dir)
    records = latest_records(RunStore(run_dir).read_records())
    load = fixed.plan.load.model_copy(update={"precision": "adaptive", "min_rounds": args.min_rounds,
                                             "max_rounds": args.max_rounds})
    zone = fixed.plan.indifference if args.indifference is None else args.indifference
    zoned = f"{zone:.0%} zone"
    designs = {"no zone": (with_zone(fixed, fixed.plan.min_gain), False), zoned: (with_zone(fixed, zone), False),
               f"{zoned}, resting": (with_zone(fixed, zone), True)}
    stops = {name: replay(s, records, load, rest=rest) for name, (s, rest) in designs.items()}
    runs = {name: adaptive_run(designs[name][0], records, load, stop) for name, stop in stops.items()}
    choice = {name: {c.point_id: c.best_config_id for c in s.analysis.choices}
              for name, (s, _) in {"fixed": (fixed, records), **runs}.items()}

    print(f"run: {run_dir} (the fixed design's rounds at every point; adaptive: looks after rounds "
          f"{args.min_rounds}..{args.max_rounds}, min gain {fixed.plan.min_gain:.0%})\n")
    print("| point | fixed: rounds / requests / seconds | " + " | ".join(
        f"adaptive, {name}: rounds / requests / seconds" for name in runs) + " | choice: fixed / " +
        " / ".join(runs) + " |")
    print("|---|---|" + "---|" * len(runs) + "---|")
    totals = {name: [0, 0.0] for name in choice}
    for point in fixed.plan.points:
        fn, fw = usage(fixed, records, point.id)
        totals["fixed"] = [totals["fixed"][0] + fn, totals["fixed"][1] + fw]
        ran = len({r.repeat for r in records if r.point_id == point.id})
        cells = [f"{ran} / {fn} / {fw:.0f}"]
        for name, (s, kept) in runs.items():
            an, aw = usage(s, kept, point.id)
            totals[name] = [totals[name][0] + an, totals[name][1] + aw]
            rounds, done, _ = stops[name][point.id]
            cells.append(f"{rounds}{'' if done else ' (unsettled)'} / {an} / {aw:.0f}")
        picks = [choice[name].get(point.id, "-") for name in choice]
        same = "" if len(set(picks)) == 1 else " (differs)"
        print(f"| {point.label()} | {' | '.join(cells)} | {' / '.join(picks)}{same} |")
    n0, w0 = totals["fixed"]
    print(f"| all | {n0} requests, {w0:.0f} s | " + " | ".join(
        f"{n} requests ({n / n0:.2f}x), {w:.0f} s ({w / w0:.2f}x)" for name, (n, w) in totals.items()
        if name != "fixed") + " | |")
    (plain_n, plain_w), (zoned_n, zoned_w), (rest_n, rest_w) = (totals[name] for name in runs)
    print(f"\nthe {zone:.0%} zone saves {plain_n - zoned_n} requests and {plain_w - zoned_w:.0f} measured seconds "
          f"over the adaptive design without it; resting saves {zoned_n - rest_n} requests and "
          f"{zoned_w - rest_w:.0f} measured seconds more")
    tables = {"fixed": recommend(fixed, records).best,
              **{name: recommend(s, kept).best for name, (s, kept) in runs.items()}}
    print("recommended table: " + "; ".join(f"{name} {[r.entry for r in t.ranges] if t else '-'}"
                                            for name, t in tables.items()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
