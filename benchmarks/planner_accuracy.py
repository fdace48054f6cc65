"""How far to trust the planner: calibrate on the baseline and one K (then two Ks) at a few loads, predict every
other K and load blind, and compare with what the same sweep measured there.

    .venv/bin/python benchmarks/planner_accuracy.py --engine vllm --out runs/planner     # sweep, then score
    .venv/bin/python benchmarks/planner_accuracy.py --run runs/planner/<id>-sweep        # score a stored sweep
    .venv/bin/python benchmarks/planner_accuracy.py --render a.json b.json              # README table
    .venv/bin/python benchmarks/planner_accuracy.py --committed                         # every committed run

The sweep runs the demo pair (the speculation-off baseline and the draft model at K = 1, 2, 3, 4; on llama.cpp
also synthetic acceptance profiles) at concurrency 1 to 32, all servers up together. For each K in turn, the
step-cost model is calibrated on the baseline and that K (at every load, or at --calibration-loads only), with
that K's acceptance profile, then on each pair of Ks; every other (configuration, load) is then predicted without
having been seen: other Ks (a larger K's later positions extrapolated from the calibration K's conditional rates),
the loads the calibration did not see, and synthetic profiles at their set rates. The figure of merit is the error
of the predicted TPOT speedup against the measured paired one: goal median |error| <= 10%, worst <= 20%.

Each calibration chooses its own step-cost form by its held-out error (specmeter.predict.forms); every row names
the form its calibration chose. --committed scores every run the repository holds (the vLLM CPU sweeps under
benchmarks/planner/, the stored demo run, the GPU checks under benchmarks/gpu/) into one table: blind median and
worst error, and how many measurements fell inside their predicted intervals.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

from specmeter.predict.acceptance import AcceptanceProfile
from specmeter.predict.calibration import calibrate
from specmeter.predict.observations import request_mix
from specmeter.predict.predict import Predictor, checks, measured_points
from specmeter.predict.profiles import drafter_profiles, set_profiles
from specmeter.rundir.store import load_summary
from specmeter.schemas.planner import Calibration
from specmeter.schemas.results import RunSummary

ROOT = Path(__file__).resolve().parents[1]
# The runs the repository holds: vLLM CPU sweeps of this script, the stored demo run, the GPU checks.
COMMITTED = (*sorted((ROOT / "benchmarks" / "planner").glob("*/summary.json")),
             ROOT / "tests" / "fixtures" / "runs" / "20261123-180233-demo" / "summary.json",
             *sorted((ROOT / "benchmarks" / "gpu").glob("results-*/run-summary.json")))
LOADS = (1, 2, 4, 8, 16, 32)
KS = (1, 2, 3, 4)
SYNTHETIC = ([0.9, 0.7, 0.5, 0.3], [0.6, 0.3, 0.15, 0.05])  # llama.cpp: profiles the calibration never sees


def sweep_file(engine: str, models: Path) -> dict[str, Any]:
    candidates: list[dict[str, Any]] = [{"method": "draft_model", "model": str(models / "demo-draft"),
                                         "num_speculative_tokens": list(KS)}]
    if engine == "llamacpp":
        for rates in SYNTHETIC:
            candidates.append({"id": "synthetic-" + "-".join(f"{r:g}" for r in rates), "method": "draft_model",
                               "model": str(models / "demo-draft"), "num_speculative_tokens": len(rates),
                               "synthetic_acceptance": {"rates": rates}})
    engine_spec: dict[str, Any] = {"kind": engine, "model": str(models / "demo-target"), "dtype": "float32",
                                   "max_model_len": 1024}
    if engine == "vllm":
        engine_spec["env"] = {"VLLM_CPU_KVCACHE_SPACE": "2"}
        engine_spec["max_num_seqs"] = 64
    else:
        engine_spec["max_num_seqs"] = max(LOADS)
    return {"workload": {"dataset": "sample", "num_prompts": 24}, "engine": engine_spec, "candidates": candidates,
            "load": {"concurrency": list(LOADS), "max_tokens": 96, "temperature": 0, "warmup": 2,
                     "precision": "fixed"},
            "repeats": 2, "interleave": True}


def run_sweep(engine: str, out: Path) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"planner-{engine}.yaml"
    path.write_text(json.dumps(sweep_file(engine, ROOT / "models"), indent=2), encoding="utf-8")  # YAML reads JSON
    name = f"planner-{engine}-{os.getpid()}"
    cmd = [str(Path(sys.executable).parent / "specmeter"), "sweep", str(path), "--out", str(out), "--name", name]
    print("running:", " ".join(cmd), file=sys.stderr)
    subprocess.run(cmd, check=True, stdout=sys.stderr)  # stdout carries the result alone
    return out / name


def _without(summary: RunSummary, keep: set[str], loads: set[str]) -> RunSummary:
    """The summary with only the calibration's points: the rest of the sweep is what is predicted."""
    configs = []
    for res in summary.configs:
        planned = next(c for c in summary.plan.configs if c.id == res.config_id)
        if planned.spec.enabled and res.config_id not in keep:
            configs.append(res.model_copy(update={"points": []}))
            continue
        configs.append(res.model_copy(update={"points": [p for p in res.points if p.point_id in loads]}))
    return summary.model_copy(update={"configs": configs})


def blind(summary: RunSummary, run_dir: Path, calibrated_on: set[str], loads: set[str],
          label: str) -> tuple[Calibration, list[dict[str, Any]]]:
    """Calibrate on the baseline and the configurations `calibrated_on` at `loads` (synthetic ones too: they teach
    cost, not acceptance), then predict every other measured (configuration, load) blind: the calibration and one
    row per prediction, each row's `calibrated_on` being `label`."""
    mix = request_mix(summary)
    assert mix is not None, f"{run_dir}: no completed request"
    ks = {c.id: c.k for c in summary.plan.configs}
    seen = _without(summary, calibrated_on, loads)
    cal = calibrate([(str(run_dir), seen)])
    predictor = Predictor.calibrated(cal, mix)
    profiles: dict[str, AcceptanceProfile] = drafter_profiles(seen, str(run_dir))
    given = set_profiles(summary)  # synthetic configurations: acceptance is given, only the cost is predicted
    full = calibrate([(str(run_dir), summary)])  # its observations: every measured point, batches included
    unseen = [o.model_copy(update={"used": False}) for o in full.observations]
    points = [m for m in measured_points(unseen, summary.analysis.speedups, ks)
              if not (m.config_id in calibrated_on and m.point_id in loads)]
    rows: list[dict[str, Any]] = []
    for m in points:
        (check,) = checks(predictor, [m], profiles, given)
        profile = given.get(m.config_id) or profiles.get(m.drafter)
        chosen = cal.choice is not None and cal.choice.decided
        rows.append({"calibrated_on": label, "form": cal.form.name, "form_chosen": chosen, "config": m.config_id,
                     "point": m.point_id, "k": m.k,
                     "batch": round(m.batch, 1), "base_batch": round(m.base_batch, 1),
                     "al": None if profile is None else profile.al(m.k).al, "synthetic": m.config_id in given,
                     "measured": check.measured_tpot_speedup, "predicted": check.predicted,
                     "low": check.predicted_low, "high": check.predicted_high, "error": check.error,
                     "covered": check.covered, "why": check.why})
    return cal, rows


def read(path: Path) -> tuple[Path, RunSummary]:
    """A run directory, or a run's summary file (a GPU check keeps the run's as run-summary.json beside its own)."""
    if path.is_dir() and (path / "run-summary.json").exists():
        path = path / "run-summary.json"
    if path.is_file():
        return path.parent, RunSummary.model_validate_json(path.read_text(encoding="utf-8"))
    return path, load_summary(path)


def score(run_dir: Path, calibration_loads: set[str] | None = None) -> dict[str, Any]:
    """Per calibration K (then pair of Ks): every other measured point predicted blind, with its error.
    `calibration_loads`: the load points the calibration sees (default: all of them; the other Ks are still never
    seen)."""
    run_dir, summary = read(run_dir)
    loads = calibration_loads or {p.id for p in summary.plan.points}
    real = [c for c in summary.plan.configs if c.spec.enabled and c.spec.synthetic_acceptance is None]
    synthetic = [c for c in summary.plan.configs if c.spec.enabled and c.spec.synthetic_acceptance is not None]
    # A run whose every drafting configuration set its acceptance (the GPU check) calibrates on those: they teach
    # the drafter's cost at each K as well as real acceptance would.
    calibrating = real or synthetic
    rows: list[dict[str, Any]] = []
    for cal_config in calibrating:
        rows += blind(summary, run_dir, {cal_config.id}, loads, cal_config.id)[1]
    for a, b in itertools.combinations(calibrating, 2):
        rows += blind(summary, run_dir, {a.id, b.id}, loads, f"{a.id} + {b.id}")[1]
    errors = [abs(r["error"]) for r in rows if r["error"] is not None]
    return {"run": str(run_dir), "engine": summary.plan.configs[0].engine.kind, "synthetic_configs": len(synthetic),
            "rows": rows, "median_abs_error": statistics.median(errors) if errors else None,
            "worst_abs_error": max(errors) if errors else None,
            "covered": sum(1 for r in rows if r["covered"]) / len(rows) if rows else None}


def _cells(r: dict[str, Any]) -> tuple[str, str]:
    """A row's prediction with its interval, and its error, as printed."""
    pred = "-" if r["predicted"] is None else (f"{r['predicted']:.2f}x" + (
        f" [{r['low']:.2f}, {r['high']:.2f}]" if r["low"] is not None else ""))
    return pred, "-" if r["error"] is None else f"{r['error'] * 100:+.1f}%"


def show(result: dict[str, Any]) -> None:
    print(f"{result['run']} ({result['engine']}): blind TPOT-speedup predictions")
    print(f"{'calibrated on':<18} {'config':<28} {'point':<6} {'batch':>6} {'measured':>9} {'predicted':>22} "
          f"{'error':>8}")
    for r in result["rows"]:
        pred, err = _cells(r)
        print(f"{r['calibrated_on']:<18} {r['config']:<28} {r['point']:<6} {r['batch']:>6} "
              f"{r['measured']:>8.2f}x {pred:>22} {err:>8}")
    for line in summary_lines(result):
        print(line)


def summary_lines(result: dict[str, Any]) -> list[str]:
    """Median and worst |error| and interval coverage per calibration, then over the one-K and the two-K ones."""
    lines = []
    groups = list(dict.fromkeys(r["calibrated_on"] for r in result["rows"]))
    one = [r for r in result["rows"] if " + " not in r["calibrated_on"]]
    two = [r for r in result["rows"] if " + " in r["calibrated_on"]]
    for name, rows in [*((g, [r for r in result["rows"] if r["calibrated_on"] == g]) for g in groups),
                       ("one K, all", one), ("two Ks, all", two)]:
        errors = [abs(r["error"]) for r in rows if r["error"] is not None]
        if errors:
            covered = sum(1 for r in rows if r["covered"]) / len(rows)
            lines.append(f"calibrated on {name}: median |error| {statistics.median(errors):.1%}, worst "
                         f"{max(errors):.1%}, inside the interval {covered:.0%} ({len(errors)} points)")
    return lines


def accuracy_table(results: list[dict[str, Any]]) -> list[str]:
    """One Markdown row per run: blind median and worst |error|, coverage, and the forms its calibrations chose."""
    lines = ["| run | engine | calibrations | points | one K: median / worst | two Ks: median / worst | "
             "all: median / worst | inside the interval | forms chosen |", "|---|---|---|---|---|---|---|---|---|"]
    for result in results:
        rows = result["rows"]
        cells = []
        for pick in (lambda r: " + " not in r["calibrated_on"], lambda r: " + " in r["calibrated_on"],
                     lambda r: True):
            errors = [abs(r["error"]) for r in rows if pick(r) and r["error"] is not None]
            cells.append(f"{statistics.median(errors):.1%} / {max(errors):.1%}" if errors else "-")
        judged = [r["covered"] for r in rows if r["covered"] is not None]
        forms: dict[str, set[str]] = {}
        for r in rows:
            forms.setdefault(r["form"] + ("" if r["form_chosen"] else " (default)"), set()).add(r["calibrated_on"])
        chosen = "; ".join(f"{name} x{len(cals)}" for name, cals in sorted(forms.items(), key=lambda f: -len(f[1])))
        name = Path(result["run"]).name
        lines.append(f"| {name} | {result['engine']} | {len({r['calibrated_on'] for r in rows})} | {len(rows)} | "
                     f"{' | '.join(cells)} | {sum(judged) / len(judged):.0%} of {len(judged)} | {chosen} |"
                     if judged else f"| {name} | {result['engine']} | - | {len(rows)} | - | - | - | - | {chosen} |")
    return lines


def render(paths: list[Path]) -> None:
    """A markdown table per run: the K calibrated on x the point predicted, then the errors' median and worst."""
    for path in paths:
        result = json.loads(path.read_text(encoding="utf-8"))
        print(f"\n{result['engine']} ({result['run']}):\n")
        for line in summary_lines(result):
            print(f"- {line}")
        print()
        print("| calibrated on | predicted | point (batch) | measured | predicted [95%] | error |")
        print("|---|---|---|---|---|---|")
        for r in result["rows"]:
            pred, err = _cells(r)
            print(f"| {r['calibrated_on']} | {r['config']} | {r['point']} ({r['batch']}) | {r['measured']:.2f}x | "
                  f"{pred} | {err} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--engine", choices=("vllm", "llamacpp"), default="vllm")
    parser.add_argument("--out", type=Path, default=Path("runs/planner"))
    parser.add_argument("--run", type=Path, help="Score this stored sweep instead of running one.")
    parser.add_argument("--calibration-loads", help="Load points the calibration sees, e.g. c1,c4,c16 (default: "
                        "all; the Ks not calibrated on are predicted at every load either way).")
    parser.add_argument("--json", action="store_true", help="Print the result as JSON.")
    parser.add_argument("--render", type=Path, nargs="+", help="Markdown tables from --json outputs.")
    parser.add_argument("--committed", action="store_true", help="Score every run the repository holds into one "
                        "Markdown table (with --json: the per-run results).")
    args = parser.parse_args()
    if args.render:
        render(args.render)
        return
    if args.committed:
        results = [score(path.parent if path.name == "summary.json" else path) for path in COMMITTED]
        print(json.dumps(results, indent=2) if args.json else "\n".join(accuracy_table(results)))
        return
    run_dir = args.run or run_sweep(args.engine, args.out)
    result = score(run_dir, set(args.calibration_loads.split(",")) if args.calibration_loads else None)
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        show(result)


if __name__ == "__main__":
    main()
