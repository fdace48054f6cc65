"""The demo's figures over repeated runs: what the README quotes, as the median and range a newcomer sees.

One run's intervals cover the spread between its requests, not the drift between runs minutes apart on a
shared machine, so the README states each speedup as the median and the range over several demo runs
(each on a clean clone), never one run's number. This reads finished demo run directories and prints,
in Markdown: per configuration and point, the throughput speedup over the baseline (median [min, max]
over runs) and the acceptance length; the recommended table of each run; per point, the verified dynamic
config against the baseline and against the best static config, and whether the engine followed it;
and each run's wall time (first request to last result, server starts included).

Run: for i in 1 2 3; do git clone -q . /tmp/demo$i && (cd /tmp/demo$i && scripts/demo.sh); done
     .venv/bin/python benchmarks/demo_runs.py /tmp/demo*/runs/*-demo
"""

from __future__ import annotations

import argparse
import statistics
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path

from specmeter.schemas.recommend import Recommendation
from specmeter.schemas.results import RunSummary
from specmeter.store import load_summary


def spread(values: Sequence[float]) -> str:
    if not values:
        return "-"
    return f"{statistics.median(values):.2f}x [{min(values):.2f}, {max(values):.2f}]"


def minutes(run_dir: Path, summary: RunSummary) -> float:
    """Start of the sweep to the last write of the verification's results."""
    last = max((run_dir / "verify" / "summary.json", run_dir / "summary.json"), key=lambda f: f.exists())
    start = datetime.fromisoformat(summary.created_utc.replace("Z", "+00:00")).timestamp()
    return (last.stat().st_mtime - start) / 60


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("runs", nargs="+", type=Path, help="demo run directories (runs/<id>-demo)")
    args = ap.parse_args()
    sweeps = [load_summary(d) for d in args.runs]
    verifies = [load_summary(d / "verify") if (d / "verify" / "summary.json").exists() else None
                for d in args.runs]
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

    print("\nrecommended tables:")
    for d in args.runs:
        path = d / "recommendation.json"
        if path.exists():
            best = Recommendation.model_validate_json(path.read_text(encoding="utf-8")).best
            table = best.spec.num_speculative_tokens_per_batch_size if best and best.spec else None
            print(f"  {d.name}: {table or 'speculation off everywhere'}")

    print("\n| point | dynamic vs baseline | dynamic vs best static | engine followed the table |")
    print("|---|---|---|---|")
    for p in plan.points:
        rows = [v for s in verifies if s for v in s.analysis.verification if v.point_id == p.id]
        vs_base = [x for v in rows if v.vs_baseline and (x := v.vs_baseline.output_throughput.value) is not None]
        vs_static = [x for v in rows if v.vs_static and (x := v.vs_static.output_throughput.value) is not None]
        followed = sum(bool(v.drafted.followed) for v in rows)
        print(f"| {p.label()} | {spread(vs_base)} | {spread(vs_static)} | {followed} of {len(rows)} runs |")

    walls = [minutes(d, s) for d, s in zip(args.runs, sweeps)]
    print(f"\nwall time, sweep + recommend + verify: {statistics.median(walls):.1f} min "
              f"[{min(walls):.1f}, {max(walls):.1f}] (server starts included, setup not)")


if __name__ == "__main__":
    main()
