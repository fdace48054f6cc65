"""The GPU check's runs side by side: what repeats from one run to the next and what does not.

    python benchmarks/gpu/across.py benchmarks/gpu/results-*-h100-*/

Each folder is what benchmarks/gpu/check.sh wrote (summary.json, run-summary.json), one run of the same sweep on
its own box and day, every run on one kind of GPU (runs of two kinds are refused: their median is neither's). One
run has intervals over its requests; only runs side by side show the drift between boxes and days, so the README
quotes the median and range printed here:

- the throughput speedup per configuration and load: the median over the runs, their range, each run's verdict, and
  the runs pooled into one verdict by `specmeter compare --pool` (the product's own pooling, which this calls);
- the synthetic acceptance measured back (AL), the KV capacity and the GPU memory each server took;
- the planner blind at the left-out K: each run's median and worst error, linear and with the one more term its
  own calibration chose; then each run's term held fixed (its shape and threshold; the cost refitted) on every
  other run: a term that fits the GPU's step cost helps there too, one that fitted one run's noise does not.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# findings reads planner_accuracy from benchmarks/ (check.sh puts it on the path; a plain run of this script does not)
sys.path.insert(1, str(Path(__file__).resolve().parents[1]))
import findings

from specmeter.analysis import pool
from specmeter.schemas.results import RunSummary


@dataclass(frozen=True)
class Run:
    name: str  # the results folder's name
    doc: dict[str, Any]  # its summary.json
    summary: RunSummary  # its run-summary.json


def read(folder: Path) -> Run:
    for name in ("summary.json", "run-summary.json"):
        if not (folder / name).is_file():
            raise SystemExit(f"across: {folder} has no {name}; give folders benchmarks/gpu/check.sh wrote")
    doc = json.loads((folder / "summary.json").read_text(encoding="utf-8"))
    summary = RunSummary.model_validate_json((folder / "run-summary.json").read_text(encoding="utf-8"))
    return Run(folder.resolve().name, doc, summary)


def spread(values: Sequence[float]) -> dict[str, float] | None:
    """Median and range; None where no run measured it."""
    if not values:
        return None
    return {"median": statistics.median(values), "low": min(values), "high": max(values), "n": len(values)}


def speedups(runs: Sequence[Run]) -> list[dict[str, Any]]:
    """Per configuration and load, from `specmeter compare --pool` (analysis/pool.py): each run's throughput speedup and
    verdict, the pooled verdict with its interval (random effects over the runs), whether the runs' own 95%
    intervals share any value, and each run's interval half-width."""
    cells = pool.pooled_cells([(r.name, r.summary) for r in runs])
    loads = {p.id: int(p.load) for r in runs for p in r.summary.plan.points}
    out = []
    for cell in cells:
        values = [c.value for c in cell.runs if c.value is not None]
        half = [(c.high - c.low) / 2 / c.value for c in cell.runs
                if c.value and c.low is not None and c.high is not None]
        out.append({"config": cell.config_id, "concurrency": loads[cell.point_id], "throughput": spread(values),
                    "verdicts": [c.verdict for c in cell.runs], "intervals_overlap": cell.intervals_overlap,
                    "half_width": spread(half), "pooled": {"value": cell.pooled.value, "low": cell.pooled.ci95_low,
                                                           "high": cell.pooled.ci95_high, "verdict": cell.verdict}})
    return out


def acceptance(runs: Sequence[Run]) -> list[dict[str, Any]]:
    """Per configuration: the AL set and the range of AL measured over every load of every run."""
    by: dict[str, list[dict[str, Any]]] = {}
    for run in runs:
        for r in run.doc["findings"]["synthetic"]["rows"]:
            if r.get("measured_al") is not None:
                by.setdefault(r["config"], []).append(r)
    return [{"config": cid, "set_al": rows[0]["set_al"], "measured_al": spread([r["measured_al"] for r in rows]),
             "within": sum(bool(r["within"]) for r in rows), "points": len(rows)} for cid, rows in sorted(by.items())]


def memory(runs: Sequence[Run]) -> list[dict[str, Any]]:
    """Per server: the KV capacity (tokens) and the GPU memory its process took, over the runs."""
    by: dict[str, list[dict[str, Any]]] = {}
    for run in runs:
        for r in run.doc["findings"]["capacity"]["rows"]:
            by.setdefault(r["config"], []).append(r)
    return [{"config": cid,
             "kv_tokens": spread([r["kv_tokens"] for r in rows if r.get("kv_tokens") is not None]),
             "gpu_memory_gib": spread([r["gpu_memory_peak_gib"] for r in rows
                                       if r.get("gpu_memory_peak_gib") is not None])}
            for cid, rows in sorted(by.items())]


def planners(runs: Sequence[Run]) -> dict[str, Any]:
    """Each run's blind errors (linear, with its own term) and each run's term held fixed on every other run."""
    own = []
    for run in runs:
        # Diagnosed again from the run's summary, so that runs written by an older check show every diagnosis too.
        left_out_k = run.doc["findings"]["planner"]["left_out_k"]
        pl = findings.planner(run.summary, Path(run.name), left_out_k)
        term = pl["term"]
        own.append({"run": run.name, "left_out_k": left_out_k, "median_abs_error": pl["median_abs_error"],
                    "worst_abs_error": pl["worst_abs_error"], "term": term["term"], "shape": term["shape"],
                    "at": term["at"], "term_median_abs_error": term["median_abs_error"],
                    "term_worst_abs_error": term["worst_abs_error"], "step": term["step"],
                    "drafting": pl["in_sample"]["drafting"]})
    held = []
    for source in own:
        if source["shape"] is None:
            continue
        fixed = [findings.Term(source["shape"], source["at"])]
        for run, mine in zip(runs, own):
            # A run whose calibration chose the same term already shows it held; only another choice is news.
            if run.name == source["run"] or (mine["shape"], mine["at"]) == (source["shape"], source["at"]):
                continue
            refit = findings.planner(run.summary, Path(run.name), mine["left_out_k"], fixed)["term"]
            held.append({"term_of": source["run"], "on": run.name, "term": fixed[0].describe(),
                         "helps": refit["term"] is not None, "linear_residual_sd": refit["linear_residual_sd"],
                         "residual_sd": refit["residual_sd"], "median_abs_error": refit["median_abs_error"],
                         "worst_abs_error": refit["worst_abs_error"], "linear_median_abs_error":
                             mine["median_abs_error"], "linear_worst_abs_error": mine["worst_abs_error"]})
    return {"runs": own, "held": held}


def across(runs: Sequence[Run]) -> dict[str, Any]:
    return {"runs": [{"run": r.name, **{k: r.doc["setup"].get(k) for k in ("device", "engine", "backend", "build_s",
                                                                            "sweep_s", "sweep_calls")}}
                     for r in runs],
            "speedup": speedups(runs), "acceptance": acceptance(runs), "memory": memory(runs),
            "planner": planners(runs)}


def _x(s: dict[str, float] | None, unit: str = "x", fmt: str = ".2f") -> str:
    if s is None:
        return "-"
    if s["n"] == 1:
        return f"{s['median']:{fmt}}{unit}"
    return f"{s['median']:{fmt}}{unit} [{s['low']:{fmt}}, {s['high']:{fmt}}]"


def _pooled(p: dict[str, Any]) -> str:
    if p["value"] is None:
        return "-"
    bounds = f" [{p['low']:.2f}, {p['high']:.2f}]" if p["low"] is not None else ""
    return f"{p['value']:.2f}x{bounds} {p['verdict'] or ''}".strip()


def _pct(v: float | None) -> str:
    return "-" if v is None else f"{v:.0%}"


def markdown(doc: dict[str, Any]) -> str:
    lines = [f"# The GPU check across {len(doc['runs'])} runs", "",
             "| run | device | engine | backend | build | sweep |", "|---|---|---|---|---|---|"]
    for r in doc["runs"]:
        build = "built before" if r["build_s"] is None else f"{r['build_s']:.0f} s"
        lines.append(f"| {r['run']} | {r['device']} | {r['engine']} | {r['backend']} | {build} | "
                     f"{r['sweep_s']:.0f} s in {r['sweep_calls']} call(s) |")
    loads = sorted({c["concurrency"] for c in doc["speedup"]})
    lines += ["", "## Speedup over concurrency", "",
              "Output throughput over the baseline: the median over the runs [their range].", "",
              "| configuration | " + " | ".join(f"c{c}" for c in loads) + " |", "|---|" + "---|" * len(loads)]
    by: dict[str, dict[int, dict[str, Any]]] = {}
    for c in doc["speedup"]:
        by.setdefault(c["config"], {})[c["concurrency"]] = c
    for cid, row in by.items():
        lines.append(f"| {cid} | " + " | ".join(_x(row[c]["throughput"]) if c in row else "-" for c in loads) + " |")
    lines += ["", "The runs pooled into one verdict (`specmeter compare --pool`: random effects over the runs, 95%; "
              "the interval holds every run's estimate):", "",
              "| configuration | " + " | ".join(f"c{c}" for c in loads) + " |", "|---|" + "---|" * len(loads)]
    for cid, row in by.items():
        lines.append(f"| {cid} | " + " | ".join(_pooled(row[c]["pooled"]) if c in row else "-" for c in loads) + " |")
    judged = [c for c in doc["speedup"] if c["intervals_overlap"] is not None]
    apart = [c for c in judged if not c["intervals_overlap"]]
    flips = [c for c in doc["speedup"] if len(set(c["verdicts"])) > 1]
    if judged:
        half = statistics.median(c["half_width"]["median"] for c in judged if c["half_width"] is not None)
        apart_half = statistics.median((c["throughput"]["high"] - c["throughput"]["low"]) / 2
                                       / c["throughput"]["median"] for c in judged)
        lines += ["", f"In {len(apart)} of {len(judged)} cells the runs' 95% intervals share no value. One run's "
                  f"interval is +/-{half:.1%} (median half-width), the runs lie +/-{apart_half:.1%} apart (median "
                  "half-range): only runs side by side show the drift between boxes and days."]
    lines += [f"- the verdict differs at {c['config']}, concurrency {c['concurrency']}: {', '.join(c['verdicts'])}"
              for c in flips]
    lines += ["", "## Synthetic acceptance, KV capacity, GPU memory", "",
              "| configuration | AL set | AL measured | points within sampling error |", "|---|---|---|---|"]
    lines += [f"| {a['config']} | {a['set_al']:.2f} | {_x(a['measured_al'], '')} | {a['within']} of {a['points']} |"
              for a in doc["acceptance"]]
    lines += ["", "| server | KV tokens | GPU memory seen |", "|---|---|---|"]
    lines += [f"| {m['config']} | {_x(m['kv_tokens'], '', '.0f')} | {_x(m['gpu_memory_gib'], ' GiB')} |"
              for m in doc["memory"]]
    pl = doc["planner"]
    lines += ["", "## The planner, blind at the left-out K", "",
              "Median and worst |error| of the left-out K's TPOT speedup: linear, with the one more term the run's "
              "calibration chose, and with that term charging the drafting per speculative step instead of per "
              "draft pass.", "",
              "| run | linear | worst | its term | with it | worst | drafting per step | worst |",
              "|---|---|---|---|---|---|---|---|"]
    lines += [f"| {r['run']} | {_pct(r['median_abs_error'])} | {_pct(r['worst_abs_error'])} | {r['term'] or 'none'} "
              f"| {_pct(r['term_median_abs_error'])} | {_pct(r['term_worst_abs_error'])} | "
              f"{_pct(r['step']['median_abs_error'])} | {_pct(r['step']['worst_abs_error'])} |" for r in pl["runs"]]
    splits = [(r["run"], r["drafting"]) for r in pl["runs"] if r["drafting"] is not None]
    if splits:
        lines += ["", "The drafting's cost, every point fitted at once with the best cap: as the step model charges "
                  "it (per draft pass, K a step, and per drafted token of each sequence), then with a cost fixed per "
                  "speculative step beside them (two Ks tell it from a pass; one K cannot):", "",
                  "| run | per pass | per token | residual sd | per step | per pass | per token | residual sd |",
                  "|---|---|---|---|---|---|---|---|"]
        lines += [f"| {name} | {d['per_pass_only_s'] * 1e3:.2f} ms | {d['per_token_only_s'] * 1e3:.2f} ms | "
                  f"{d['residual_sd']:.3f} | {d['per_step_s'] * 1e3:.2f} ms | {d['per_pass_s'] * 1e3:.2f} ms | "
                  f"{d['per_token_s'] * 1e3:.2f} ms | {d['split_residual_sd']:.3f} |" for name, d in splits]
    terms = {(r["shape"], r["at"]) for r in pl["runs"]}
    if len(terms) == 1 and len(pl["runs"]) > 1:
        only = pl["runs"][0]["term"]
        lines += ["", f"Every run's calibration chose the same term: {only}." if only else
                  "No run's calibration found a term that fits better than the linear step cost."]
    if pl["held"]:
        lines += ["", "Each run's term held fixed on the other runs (its cost refitted on their calibration):", "",
                  "| term of | on | fits better than linear | residual sd (linear) | blind median error (linear) "
                  "| worst (linear) |", "|---|---|---|---|---|---|"]
        for h in pl["held"]:
            sd = "-" if h["residual_sd"] is None else f"{h['residual_sd']:.3f}"
            lines.append(f"| {h['term_of']} | {h['on']} | {'yes' if h['helps'] else 'no'} | {sd} "
                         f"({h['linear_residual_sd']:.3f}) | {_pct(h['median_abs_error'])} "
                         f"({_pct(h['linear_median_abs_error'])}) | {_pct(h['worst_abs_error'])} "
                         f"({_pct(h['linear_worst_abs_error'])}) |")
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("folders", nargs="+", type=Path, help="results folders benchmarks/gpu/check.sh wrote")
    parser.add_argument("--json", type=Path, help="also write the comparison as JSON here")
    args = parser.parse_args(argv)
    runs = [read(f) for f in args.folders]
    devices = sorted({r.doc["setup"]["device"] for r in runs})
    if len(devices) > 1:  # a median over two GPUs' runs is neither GPU's
        raise SystemExit(f"across: the runs measured {len(devices)} devices ({'; '.join(devices)}); give the runs of "
                         "one device, e.g. benchmarks/gpu/results-*-h100-*/")
    doc = across(runs)
    if args.json:
        args.json.write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
    print(markdown(doc), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
