"""Does a demo run's answer hold on the next run? N demo runs from fresh clones, in one benchmark run, and how far
each run's intervals cover the others.

A verdict users deploy on must survive a rerun. Each run here is `specmeter demo` from a fresh clone of `--after`
(the clones share this checkout's environment; with --before, runs of that revision alternate with them, for the
time to the verified answer against it), one after another on the same machine. Then, from the runs' own
summaries:
- coverage: for each run and cell (configuration, point), whether every other run's estimate of the cell's speedup
  lies inside this run's interval: its 95% interval over requests, the wider bounds its decisions read (the rounds'
  and instances' spread), and its rerun interval (where it says the next run's estimate lands: analysis.noise)
  the share over all (run, cell, other run) is the figure;
- leave one out: each run's estimate against the others pooled (`specmeter compare --pool`): what pooling buys;
- how quiet the machine was in each run (its analysis.host), so a figure is quoted from quiet runs only;
- the final tables (the answer's latest round) and whether they agree, and the pooled answer over all the runs,
  each measured stretch saying whether every run chose its K and, where not, whether the pooled evidence ties them;
- the time to the verified answer per run (benchmarks/time_to_answer.py's phases), per design.

Run (about 6 minutes a run on 2 cores; keep the machine otherwise idle, the runs record whether it was):
    .venv/bin/python benchmarks/rerun_coverage.py --runs 5 --out runs/coverage
    .venv/bin/python benchmarks/rerun_coverage.py --runs 5 --before 51bbb1a --before-runs 2 --out runs/coverage
Finished demos (say, `scripts/demo.sh` on fresh clones), without running anything:
    .venv/bin/python benchmarks/rerun_coverage.py --read /tmp/demo*/runs/*-demo
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

sys.path.insert(1, str(Path(__file__).resolve().parent))
import time_to_answer as tta

from specmeter.analysis.headtohead import decision_bounds
from specmeter.analysis.pool import pool
from specmeter.report.pool import held_lines
from specmeter.rundir.store import load_summary
from specmeter.schemas.analysis import Ratio
from specmeter.schemas.results import RunSummary


@dataclass(frozen=True)
class Run:
    name: str
    summary: RunSummary
    timing: tta.Timing


def _headline(summary: RunSummary) -> dict[tuple[str, str], Ratio]:
    """Each cell's ratio its verdict reads."""
    return {(s.config_id, s.point_id): (s.tpot if s.decided_on == "tpot" else s.output_throughput)
            for s in summary.analysis.speedups}


def coverage(runs: Sequence[Run]) -> dict[str, Any]:
    """Per run and cell, how many of the other runs' estimates its intervals hold; the shares over everything."""
    cells = [_headline(r.summary) for r in runs]
    rows = []
    held = {"ci95": 0, "decision": 0, "rerun": 0, "pooled_others": 0}
    judged = {"ci95": 0, "decision": 0, "rerun": 0, "pooled_others": 0}
    for i, run in enumerate(runs):
        others = [(runs[j].name, cells[j]) for j in range(len(runs)) if j != i]
        pooled = pool([(o.name, o.summary) for j, o in enumerate(runs) if j != i]) if len(runs) > 2 else None
        pooled_at = {(c.config_id, c.point_id): c.pooled for c in pooled.cells} if pooled else {}
        for key, ratio in cells[i].items():
            values = [c[key].value for _, c in others if key in c and c[key].value is not None]
            bounds = {"ci95": (ratio.ci95_low, ratio.ci95_high), "decision": decision_bounds(ratio),
                      "rerun": (ratio.rerun_low, ratio.rerun_high)}
            row: dict[str, Any] = {"run": run.name, "config": key[0], "point": key[1], "value": ratio.value,
                                   "others": values, "rerun_interval": None if ratio.rerun_low is None
                                   or ratio.rerun_high is None else (ratio.rerun_low, ratio.rerun_high)}
            for what, (low, high) in bounds.items():
                if low is None or high is None:
                    continue
                inside = sum(low <= v <= high for v in values)
                row[what] = f"{inside}/{len(values)}"
                held[what] += inside
                judged[what] += len(values)
            others_pooled = pooled_at.get(key)
            if others_pooled is not None and ratio.value is not None and others_pooled.ci95_low is not None \
                    and others_pooled.ci95_high is not None:
                inside_pooled = others_pooled.ci95_low <= ratio.value <= others_pooled.ci95_high
                row["pooled_others"] = "in" if inside_pooled else "out"
                held["pooled_others"] += int(inside_pooled)
                judged["pooled_others"] += 1
            rows.append(row)
    return {"rows": rows, "share": {k: (held[k] / judged[k] if judged[k] else None) for k in held},
            "counted": judged}


def quiet(run: Run) -> str:
    host = run.summary.analysis.host
    if host is None:
        return "not read"
    state = "quiet" if host.quiet else f"busy ({len(host.disturbed)} of {host.rounds} rounds disturbed)"
    return f"{state}, other work {host.median_foreign_share:.0%} median, {host.max_foreign_share:.0%} at most"


def tables(runs: Sequence[Run]) -> dict[str, Any]:
    """The runs' final tables, whether they agree, and the pooled answer with how each stretch held."""
    finals = [r.timing.table for r in runs]
    doc: dict[str, Any] = {"tables": finals, "agree": len({json.dumps(t) for t in finals}) == 1}
    pooled = pool([(r.name, r.summary) for r in runs]) if len(runs) > 1 else None
    if pooled is not None and pooled.recommendation is not None and pooled.recommendation.best is not None:
        doc["pooled_table"] = [r.entry for r in pooled.recommendation.best.ranges]
        doc["held"] = held_lines(pooled)
    elif pooled is not None:
        doc["pooled_table"], doc["held"] = None, [pooled.no_answer or "-"]
    return doc


def report(runs: Sequence[Run], befores: Sequence[tta.Timing]) -> str:
    cov, tab = coverage(runs), tables(runs)
    lines = ["| run | machine | wall min | final table |", "|---|---|---|---|"]
    lines += [f"| {r.name} | {quiet(r)} | {r.timing.wall_s / 60:.1f} | {r.timing.table} |" for r in runs]
    share = cov["share"]

    def pct(key: str) -> str:
        value = share[key]
        return "-" if value is None else f"{value:.0%} of {cov['counted'][key]}"

    lines += ["", f"coverage of the other runs' estimates by each run's 95% interval over requests: {pct('ci95')}; "
              f"by the bounds its decisions read: {pct('decision')}; by its rerun interval: {pct('rerun')}; each "
              f"run's estimate inside the others pooled: {pct('pooled_others')}", "",
              "| run | configuration | point | value | rerun interval | others | in 95% | in decision bounds "
              "| in rerun | in the others pooled |",
              "|---|---|---|---|---|---|---|---|---|---|"]
    for row in cov["rows"]:
        others = ", ".join(f"{v:.2f}" for v in row["others"])
        value = "-" if row["value"] is None else f"{row['value']:.2f}"
        rerun = "-" if row["rerun_interval"] is None else "[{:.2f}, {:.2f}]".format(*row["rerun_interval"])
        lines.append(f"| {row['run']} | {row['config']} | {row['point']} | {value} | {rerun} | {others} | "
                     f"{row.get('ci95', '-')} | {row.get('decision', '-')} | {row.get('rerun', '-')} | "
                     f"{row.get('pooled_others', '-')} |")
    lines += ["", f"final tables {'agree' if tab['agree'] else 'differ'}: "
              + "; ".join(str(t) for t in tab["tables"]),
              f"pooled over {len(runs)} runs: {tab.get('pooled_table')}", *[f"- {h}" for h in tab.get("held", [])]]
    walls = [r.timing.wall_s / 60 for r in runs]
    lines += ["", f"time to the verified answer: {tta.spread(walls, ' min')} (median [min, max] over {len(runs)})"]
    if befores:
        before = [t.wall_s / 60 for t in befores]
        lines.append(f"the design before ({befores[0].rev}): {tta.spread(before, ' min')} over {len(befores)}; "
                     f"after / before (medians) {statistics.median(walls) / statistics.median(before):.2f}")
    return "\n".join(lines)


def _git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=tta.REPO, check=True, capture_output=True, text=True).stdout.strip()


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--after", default="HEAD", help="the revision whose runs are measured (default HEAD)")
    ap.add_argument("--runs", type=int, default=5, help="demo runs of --after, from fresh clones (default 5)")
    ap.add_argument("--before", help="also time this revision's demo (today's design), alternating with --after")
    ap.add_argument("--before-runs", type=int, default=2, help="demo runs of --before (default 2)")
    ap.add_argument("--out", type=Path, help="a new directory for the clones, runs and results (unless --read)")
    ap.add_argument("--read", nargs="+", type=Path, metavar="RUN_DIR", help="run nothing: the coverage of demos that "
                    "already ran (runs/<id>-demo)")
    args = ap.parse_args(argv)
    if args.read:
        runs = [Run(d.name, load_summary(d), tta.read_finished(d, i)) for i, d in enumerate(args.read, start=1)]
        print(report(runs, []))
        return
    if args.out is None:
        ap.error("--out is required (or --read RUN_DIR ... for demos that already ran)")
    if args.runs < 2:
        ap.error("--runs: coverage needs two runs or more")
    args.out.mkdir(parents=True, exist_ok=False)
    after = _git("rev-parse", "--short", args.after)
    before = _git("rev-parse", "--short", args.before) if args.before else None
    order = [("after", i) for i in range(1, args.runs + 1)]
    for i in range(1, (args.before_runs if before else 0) + 1):  # spread among the after runs, alternating
        order.insert(min(len(order), 2 * i - 1), ("before", i))
    runs: list[Run] = []
    befores: list[tta.Timing] = []
    for design, i in order:
        rev = after if design == "after" else before
        assert rev is not None
        print(f"{design} run {i} ({rev})", file=sys.stderr, flush=True)
        timing = tta.run_design(design, rev, i, args.out, setup=False, sweep=None, args=[])
        if design == "after":
            runs.append(Run(f"run {i}", load_summary(Path(timing.run_dir)), timing))
        else:
            befores.append(timing)
        (args.out / "timings.json").write_text(json.dumps([asdict(r.timing) for r in runs]
                                                          + [asdict(t) for t in befores], indent=1))
    text = report(runs, befores)
    (args.out / "rerun_coverage.md").write_text(text + "\n", encoding="utf-8")
    print(text)


if __name__ == "__main__":
    main()
