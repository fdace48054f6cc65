"""The demo's figures over repeated runs: what the README quotes, as the median and range a newcomer sees.

One run's intervals cover the spread between its requests, not the drift between runs minutes apart on a
shared machine, so the README states each speedup as the median and the range over several demo runs
(each on a clean clone), never one run's number. This reads finished demo run directories and prints,
in Markdown: per configuration and point, the throughput speedup over the baseline (median [min, max]
over runs) and the acceptance length; the rounds and requests each point took (sequential sampling); what
the verification loop did in each run (each table verified, whether it held, what a correction changed);
how far the rounds of each sweep decision disagreed (the ratio per round: drift between rounds shows there);
per point, the verified dynamic config against the baseline and against the best static config, and whether
the engine followed it; each run's wall time to its final answer (server starts included); and the handover cost
at concurrency 1, where configurations take turns request by request: how much faster a request ran right after
its own server's previous one than the same configuration's same prompt right after another server's.

Run: for i in 1 2 3; do git clone -q . /tmp/demo$i && (cd /tmp/demo$i && scripts/demo.sh); done
     .venv/bin/python benchmarks/demo_runs.py /tmp/demo*/runs/*-demo
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
from collections import defaultdict
from collections.abc import Sequence
from datetime import datetime
from itertools import pairwise
from pathlib import Path
from typing import Any

from specmeter.rundir.store import load_summary
from specmeter.schemas.recommend import Recommendation
from specmeter.schemas.results import RunSummary


def spread(values: Sequence[float]) -> str:
    if not values:
        return "-"
    return f"{statistics.median(values):.2f}x [{min(values):.2f}, {max(values):.2f}]"


def verifications(run_dir: Path) -> list[Path]:
    """The run's verification rounds in order: verify/, verify-r2/, ..."""
    found = [d for d in run_dir.iterdir() if d.is_dir() and d.name.startswith("verify")
             and (d / "summary.json").exists()]
    return sorted(found, key=lambda d: int(d.name.rsplit("-r", 1)[1]) if "-r" in d.name else 1)


def minutes(run_dir: Path, summary: RunSummary) -> float:
    """Start of the sweep to the final answer: the last write of recommendation.json or of a summary."""
    files = [run_dir / "summary.json", run_dir / "recommendation.json", *(d / "summary.json"
                                                                          for d in verifications(run_dir))]
    last = max(f.stat().st_mtime for f in files if f.exists())
    start = datetime.fromisoformat(summary.created_utc.replace("Z", "+00:00")).timestamp()
    return (last - start) / 60


def loop_lines(run_dir: Path) -> list[str]:
    """What the verification loop did: each table it verified, and how that went."""
    out = []
    for i, d in enumerate(verifications(run_dir), start=1):
        rec = Recommendation.model_validate_json((d / "recommendation.json").read_text(encoding="utf-8"))
        best = rec.best
        table = best.spec.num_speculative_tokens_per_batch_size if best and best.spec else None
        verdicts = [v.note for v in load_summary(d).analysis.verification if v.disagrees]
        out.append(f"round {i}: {table} -> " + ("; ".join(verdicts) if verdicts else "held"))
    final = run_dir / "recommendation.json"
    if final.exists():
        rec = Recommendation.model_validate_json(final.read_text(encoding="utf-8"))
        out.append(f"final: round {rec.round}, {rec.verification}" + (f" ({'; '.join(rec.changes[:2])})"
                                                                       if rec.changes else ""))
    return out


def executions(run_dir: Path) -> list[Path]:
    """The run's own directory and every one under it that an execution wrote (propose/, verify/, verify-r2/ ...)."""
    return [run_dir, *sorted(d for d in run_dir.iterdir() if (d / "requests.jsonl").exists())]


def handover(run_dirs: Sequence[Path]) -> tuple[float, float, int] | None:
    """(geometric mean, its standard error as a factor, pairs) of a request's rate right after its own server's
    previous request over the same configuration's same prompt right after another server's, in rounds of
    concurrency 1 that took turns (records are kept in the order they finish, which in turns is the order sent;
    each round's first request, right after the warm-ups, is left out)."""
    logs: list[float] = []
    for d in (e for r in run_dirs for e in executions(r)):
        turned = {(f.parent.name, f.stem) for f in (d / "captures").glob("*/c1-r*.json")
                  if (a := json.loads(f.read_text(encoding="utf-8")).get("attempts")) and a[-1].get("turns_with")}
        rounds: dict[int, list[dict[str, Any]]] = defaultdict(list)
        with (d / "requests.jsonl").open(encoding="utf-8") as f:
            for line in f:
                r = json.loads(line)
                if (r["point_id"] == "c1" and not r["warmup"] and r["ok"] and r["e2e_s"]
                        and (r["config_id"], f"c1-r{r['repeat']}") in turned):
                    rounds[r["repeat"]].append(r)
        rates: dict[tuple[str, str, int], dict[bool, list[float]]] = defaultdict(lambda: defaultdict(list))
        for sent in rounds.values():
            for before, r in pairwise(sent):
                key = (r["config_id"], r["conversation_id"], r["turn"])
                rates[key][before["config_id"] == r["config_id"]].append(r["output_tokens"] / r["e2e_s"])
        logs += [math.log(statistics.mean(by[True]) / statistics.mean(by[False]))
                 for by in rates.values() if by[True] and by[False]]
    if len(logs) < 2:
        return None
    return (math.exp(statistics.mean(logs)), math.exp(statistics.stdev(logs) / math.sqrt(len(logs))), len(logs))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("runs", nargs="+", type=Path, help="demo run directories (runs/<id>-demo)")
    args = ap.parse_args()
    sweeps = [load_summary(d) for d in args.runs]
    # The verification of each run's final table (the last round).
    verifies = [load_summary(found[-1]) if (found := verifications(d)) else None for d in args.runs]
    plan = sweeps[0].plan
    print(f"{len(sweeps)} runs: {', '.join(str(d) for d in args.runs)}\n")

    print("| configuration (AL) | " + " | ".join(p.label() for p in plan.points) + " |")
    print("|---|" + "---|" * len(plan.points))
    for config in plan.configs:
        if config.role.value != "candidate":
            continue
        als = [c.acceptance_length for s in sweeps if (r := s.config(config.id)) for p in r.points
               if (c := p.sd.headline) is not None and c.acceptance_length is not None]
        cells = [spread([v for s in sweeps for sp in s.analysis.speedups
                         if sp.config_id == config.id and sp.point_id == p.id
                         and (v := sp.output_throughput.value) is not None]) for p in plan.points]
        al = f" ({statistics.median(als):.2f})" if als else ""
        print(f"| {config.id}{al} | " + " | ".join(cells) + " |")

    print("\nrounds / requests per configuration at each point (sequential sampling):")
    for d, s in zip(args.runs, sweeps):
        print(f"  {d.name}: " + ", ".join(f"{x.point_id} {x.rounds} / {x.requests} ({x.stopped})"
                                          for x in s.sampling))

    print("\neach sweep decision's ratio per round (its spread: how far the rounds disagreed):")
    for d, s in zip(args.runs, sweeps):
        for choice in s.analysis.choices:
            for h in choice.evidence:
                rounds = h.ratio.repeat_values
                if len(rounds) > 1:
                    print(f"  {d.name} {h.point_id}: {h.config_id} / {h.against}: "
                          f"{', '.join(f'{r:.3f}' for r in rounds)} (spread {max(rounds) - min(rounds):.3f})")
    print("\nthe verification loop:")
    for d in args.runs:
        print(f"  {d.name}: " + " | ".join(loop_lines(d)))

    print("\nthe final table, verified (last round):")
    print("\n| point | dynamic vs baseline | dynamic vs best static | engine followed the table |")
    print("|---|---|---|---|")
    for p in plan.points:
        rows = [v for s in verifies if s for v in s.analysis.verification if v.point_id == p.id]
        vs_base = [x for v in rows if v.vs_baseline and (x := v.vs_baseline.output_throughput.value) is not None]
        vs_static = [x for v in rows if v.vs_static and (x := v.vs_static.output_throughput.value) is not None]
        followed = sum(bool(v.drafted.followed) for v in rows)
        print(f"| {p.label()} | {spread(vs_base)} | {spread(vs_static)} | {followed} of {len(rows)} runs |")

    walls = [minutes(d, s) for d, s in zip(args.runs, sweeps)]
    print(f"\nwall time to the final answer (sweep, recommend, every verification round): "
          f"{statistics.median(walls):.1f} min "
              f"[{min(walls):.1f}, {max(walls):.1f}] (server starts included, setup not)")
    cost = handover(args.runs)
    if cost is not None:
        print(f"\nat concurrency 1 in turns, a request right after its own server's previous one ran {cost[0]:.3f}x "
              f"(x/÷ {cost[1]:.3f}) the rate of the same prompt right after another server's ({cost[2]} pairs)")


if __name__ == "__main__":
    main()
