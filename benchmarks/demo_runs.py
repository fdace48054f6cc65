"""The demo's figures over repeated runs: what the README quotes, as the median and range a newcomer sees.

One run's intervals cover the spread between its requests, not the drift between runs minutes apart on a
shared machine, so the README states each speedup as the median and the range over several demo runs
(each on a clean clone), never one run's number. This reads finished demo run directories and prints,
in Markdown: per configuration and point, the throughput speedup over the baseline (median [min, max]
over runs) and the acceptance length; the rounds and requests each point took (sequential sampling); what
the verification loop did in each run (each table verified, whether it held, what a correction changed);
how far the rounds of each sweep decision disagreed (the ratio per round: drift between rounds shows there);
per point, the verified dynamic config against the baseline and against the best static config, and whether
the engine followed it; and each run's wall time to its final answer (server starts included).

Run: for i in 1 2 3; do git clone -q . /tmp/demo$i && (cd /tmp/demo$i && scripts/demo.sh); done
     .venv/bin/python benchmarks/demo_runs.py /tmp/demo*/runs/*-demo
"""

from __future__ import annotations

import argparse
import statistics
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path

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


if __name__ == "__main__":
    main()
