"""The GPU check's measuring half (benchmarks/gpu/check.sh builds llama-server first, then runs this): make the
random-weight pair, sweep it on llama-server with every server interleaved on the one GPU, and write what the run
shows (findings.py) beside nvidia-smi's readings.

Two profiles run the identical steps:
- gpu: a 986M-parameter target (TinyLlama's shape over the demo vocabulary) and a 53M draft, float16, concurrency
  1 to 64, 128 output tokens: what one H100 or H200 measures within minutes;
- cpu: a tiny pair, float32, concurrency 1 to 8 with short outputs, on the CPU build: the same script where there
  is no GPU, so that a GPU run never fails on a typo (the test command runs it).

The sweep: the speculation-off baseline and the draft model at K = 2 and 4, each at a realistic synthetic
acceptance profile and at the ceiling (every draft accepted). `--ks 1,2,3,4,6 --no-ceiling` sweeps more Ks at the
realistic profile alone instead (each server about 70-85 s of sweep on an H100 or H200): what tells whether
drafting costs per pass or per speculative step (benchmarks/planner_accuracy.py --run scores it per K and per pair
of Ks).

Output: OUT/runs/gpu-check (the run directory) and OUT/results-<date>-<device>/ (summary.md, summary.json, the
sweep file, the figures and nvidia-smi's readings: what to commit).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import re
import subprocess
import sys
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import findings
import smi
import yaml
from pair import Shape, make_pair, vocab_size

from specmeter.engines.gguf import llamacpp_home
from specmeter.rundir.store import load_summary
from specmeter.schemas.results import RunSummary

RUN_NAME = "gpu-check"
STATE = "check.json"  # the profile, the build and each step's seconds: what a later call continues from
READINGS = "nvidia-smi"
# Unconditional per-position acceptance: between SPEED-Bench's EAGLE-3 on Llama-3.3-70B (AL 2.45 at K = 3) and a
# good draft model (AR 0.5-0.75). Each K takes the first K positions, so K = 2 and 4 draft alike in every design.
RATES = (0.75, 0.55, 0.4, 0.3, 0.22, 0.16, 0.12, 0.09)
KS = (2, 4)
LEFT_OUT_K = 4  # the planner is calibrated without it and predicts it blind (the largest K where a design lacks it)


def left_out_k(ks: tuple[int, ...]) -> int:
    return LEFT_OUT_K if LEFT_OUT_K in ks else max(ks)


def parse_ks(text: str) -> tuple[int, ...]:
    """`--ks`: two or more distinct Ks from 1 to len(RATES), comma-separated."""
    try:
        ks = tuple(sorted({int(part) for part in text.split(",") if part.strip()}))
    except ValueError:
        raise argparse.ArgumentTypeError(f"--ks {text!r}: give Ks as integers, e.g. 1,2,3,4,6") from None
    if len(ks) < 2 or ks[0] < 1 or ks[-1] > len(RATES):
        raise argparse.ArgumentTypeError(f"--ks {text!r}: give two Ks or more, each from 1 to {len(RATES)} (the "
                                         "positions the realistic profile sets)")
    return ks


@dataclass(frozen=True)
class Profile:
    name: str
    target: Shape
    draft: Shape
    dtype: str
    concurrency: tuple[int, ...]
    num_prompts: int
    max_tokens: int
    max_model_len: int


PROFILES = {
    "gpu": Profile("gpu", target=Shape(layers=22, hidden=2048, kv_heads=4, intermediate=5632),
                   draft=Shape(layers=4, hidden=1024, kv_heads=4, intermediate=2816), dtype="float16",
                   concurrency=(1, 2, 4, 8, 16, 32, 64), num_prompts=24, max_tokens=128, max_model_len=1024),
    # Two shared cores serve five servers: three loads and a handful of short requests keep it near a minute.
    "cpu": Profile("cpu", target=Shape(layers=4, hidden=128, kv_heads=2, intermediate=352),
                   draft=Shape(layers=2, hidden=64, kv_heads=1, intermediate=176), dtype="float32",
                   concurrency=(1, 2, 8), num_prompts=8, max_tokens=16, max_model_len=1024),
}


def sweep_file(profile: Profile, target: Path, draft: Path, ks: tuple[int, ...] = KS,
               ceiling: bool = True) -> dict[str, Any]:
    """The sweep: baseline, and the draft model at each K with the realistic profile and (`ceiling`) at the
    ceiling."""
    candidates: list[dict[str, Any]] = []
    for k in ks:
        base = {"method": "draft_model", "model": str(draft), "num_speculative_tokens": k}
        candidates.append({**base, "synthetic_acceptance": {"rates": list(RATES[:k])}})
        if ceiling:
            candidates.append({**base, "synthetic_acceptance": {"length": k + 1}})
    return {"workload": {"dataset": "sample", "num_prompts": profile.num_prompts},
            "engine": {"kind": "llamacpp", "model": str(target), "dtype": profile.dtype,
                       "max_model_len": profile.max_model_len, "max_num_seqs": max(profile.concurrency)},
            "candidates": candidates,
            # Random weights end a reply wherever their argmax lands on the end token: every reply is forced to
            # max_tokens, so every configuration does the same work (acceptance is set, not earned).
            "load": {"concurrency": list(profile.concurrency), "max_tokens": profile.max_tokens, "ignore_eos": True,
                     "temperature": 0, "warmup": 2, "precision": "fixed", "stop_at_saturation": False},
            "interleave": True}


def slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


def device_name(gpus: list[dict[str, str]], summary: RunSummary) -> str:
    if gpus:
        return ", ".join(sorted({g["name"] for g in gpus}))
    return f"CPU: {summary.environment.get('cpu') or 'unknown'} x{summary.environment.get('cpu_count', '?')}"


def built() -> dict[str, Any]:
    """The llama-server build: its backend (setup-llamacpp.sh's stamp) and, where check.sh timed it, its seconds."""
    home = llamacpp_home()
    stamps = sorted(home.glob(".built-*"))
    backend = stamps[-1].read_text(encoding="utf-8").strip() if stamps else "?"
    info: dict[str, Any] = {"backend": backend or "cpu"}  # an empty stamp predates CUDA builds: a CPU build
    timed = home / "build-seconds.json"
    if timed.is_file():
        info.update(json.loads(timed.read_text(encoding="utf-8")))
    return info


def _describe(shape: Shape, dtype: str) -> str:
    return (f"{shape.params(vocab_size()) / 1e6:,.0f}M parameters ({shape.layers} layers, hidden {shape.hidden}, "
            f"{shape.heads} heads / {shape.kv_heads} KV heads, MLP {shape.intermediate}), {dtype}, random weights")


def planner_figure(planner: dict[str, Any], out: Path) -> None:
    """The left-out K's TPOT speedup over concurrency: measured, predicted blind (with its interval) and, where one
    more term (a knee or a cap) fitted the calibration better, predicted with it."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.2))
    for i, cid in enumerate(sorted({r["config"] for r in planner["rows"]})):
        rows = sorted((r for r in planner["rows"] if r["config"] == cid), key=lambda r: r["concurrency"])
        color = f"C{i}"
        xs = [r["concurrency"] for r in rows]
        ax.plot(xs, [r["measured"] for r in rows], "o", color=color, label=f"{cid}: measured")
        ax.plot(xs, [r["predicted"] for r in rows], "-", color=color, label="predicted blind (linear)")
        lows, highs = [r["low"] for r in rows], [r["high"] for r in rows]
        if None not in lows and None not in highs:
            ax.fill_between(xs, lows, highs, color=color, alpha=0.15)
        if any(r.get("predicted_term") is not None for r in rows):
            ax.plot(xs, [r.get("predicted_term") for r in rows], "--", color=color,
                    label=f"predicted blind ({planner['term']['shape']} term)")
    ax.axhline(1.0, color="grey", lw=0.8)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("concurrency")
    ax.set_ylabel("TPOT speedup over the baseline")
    ax.set_title(f"K = {planner['left_out_k']} predicted without having been measured")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out, dpi=120)
    plt.close(fig)


def sweep(out: Path, work: Path, profile: Profile, seed: int, gpus: list[dict[str, str]], ks: tuple[int, ...],
          ceiling: bool) -> dict[str, Any]:
    """Make the pair and run the sweep into a new OUT; the check's state (STATE) records the profile, the design,
    the build and the seconds each step took."""
    started = time.monotonic()
    target, draft = make_pair(work / f"pair-{profile.name}", profile.target, profile.draft, profile.dtype, seed)
    state: dict[str, Any] = {"profile": profile.name, "ks": list(ks), "ceiling": ceiling, "build": built(),
                             "pair_s": time.monotonic() - started, "sweep_s": []}
    out.mkdir(parents=True, exist_ok=True)
    sweep_path = out / "sweep.yaml"
    sweep_path.write_text(yaml.safe_dump(sweep_file(profile, target, draft, ks, ceiling), sort_keys=False),
                          encoding="utf-8")
    _save(out, state)
    return _measured(out, state, gpus, ["sweep", str(sweep_path), "--out", str(out / "runs"), "--name", RUN_NAME])


def _measured(out: Path, state: dict[str, Any], gpus: list[dict[str, str]], args: list[str]) -> dict[str, Any]:
    """Run `specmeter ARGS` with nvidia-smi sampled beside it (readings appended across calls), timing it."""
    cmd = [sys.executable, "-m", "specmeter", *args]
    print("check: " + " ".join(cmd), file=sys.stderr, flush=True)
    started = time.monotonic()
    try:
        with smi.Sampler(out / READINGS) if gpus else contextlib.nullcontext():
            subprocess.run(cmd, check=False)
    finally:  # also when a time limit interrupts the call: the next call resumes and adds its own seconds
        state["sweep_s"].append(time.monotonic() - started)
        _save(out, state)
    return state


def _save(out: Path, state: dict[str, Any]) -> None:
    (out / STATE).write_text(json.dumps(state, indent=2) + "\n", encoding="utf-8")


def write_results(out: Path, state: dict[str, Any], gpus: list[dict[str, str]]) -> int:
    """OUT/results-<date>-<device>/ from the finished run and nvidia-smi's readings, and its summary printed."""
    run_dir = out / "runs" / RUN_NAME
    profile = PROFILES[state["profile"]]
    ks = tuple(state.get("ks", KS))  # a state written before --ks swept the default
    summary = load_summary(run_dir)
    readings = out / READINGS
    # The readings name the GPU the run measured, also where the results are written on another machine.
    gpu_rows = smi.read_csv(readings / smi.GPU_CSV)
    device = device_name(gpus or gpu_rows, summary)
    results = out / f"results-{datetime.now(UTC):%Y%m%d}-{slug(device if gpus or gpu_rows else 'cpu')}"
    figures = results / "figures"
    subprocess.run([sys.executable, "-m", "specmeter", "report", str(run_dir), "--plots", str(figures), "-q"],
                   check=False, stdout=subprocess.DEVNULL)
    findings_started = time.monotonic()
    peaks = smi.peak_memory_by_pid(smi.read_csv(readings / smi.APPS_CSV))
    found = findings.all_findings(summary, run_dir, profile.target.kv_bytes_per_token(profile.dtype), peaks,
                                  left_out_k(ks))
    engine = next((c.engine_version for c in summary.configs if c.engine_version), "llama.cpp (version unknown)")
    build = state["build"]
    doc = {"setup": {"device": device, "engine": engine, "backend": build["backend"], "build_s": build.get("seconds"),
                     "profile": profile.name, "target": _describe(profile.target, profile.dtype),
                     "draft": _describe(profile.draft, profile.dtype),
                     "sweep": f"{len(summary.plan.configs)} servers interleaved, concurrency "
                              f"{', '.join(map(str, profile.concurrency))}, {profile.num_prompts} conversations per "
                              f"point, {profile.max_tokens} output tokens, K = {', '.join(map(str, ks))}, synthetic "
                              f"rates {list(RATES[:max(ks)])}" + ("" if state.get("ceiling", True) else ", no ceiling"),
                     "status": summary.status, "pair_s": state["pair_s"], "sweep_s": sum(state["sweep_s"]),
                     "sweep_calls": len(state["sweep_s"]), "findings_s": time.monotonic() - findings_started},
           "gpus": smi.gpu_summary(gpu_rows), "findings": found}
    results.mkdir(parents=True, exist_ok=True)
    planner_figure(found["planner"], figures / "planner-blind.png")
    for name in (smi.GPU_CSV, smi.APPS_CSV, smi.QUERY_TXT):
        if (readings / name).is_file():
            (results / name).write_bytes((readings / name).read_bytes())
    (results / "sweep.yaml").write_bytes((out / "sweep.yaml").read_bytes())
    (results / "run-summary.json").write_bytes((run_dir / "summary.json").read_bytes())
    (results / "summary.json").write_text(json.dumps(doc, indent=2, default=str) + "\n", encoding="utf-8")
    text = findings.markdown(doc)
    (results / "summary.md").write_text(text, encoding="utf-8")
    print(text)
    print(f"check: {results}", file=sys.stderr)
    return 0 if summary.status == "complete" else 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--profile", choices=sorted(PROFILES), help="default: gpu where nvidia-smi lists one")
    parser.add_argument("--out", type=Path, required=True,
                        help="Where the run and its results go: a new folder, or one an earlier call left (its run "
                             "is resumed where it stopped, or, finished, its results written again).")
    parser.add_argument("--work", type=Path, required=True, help="Where the pair is made (kept between runs).")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--ks", type=parse_ks, default=KS,
                        help="The draft model's Ks, at the realistic profile (default: 2,4). A resumed run keeps its "
                             "own.")
    parser.add_argument("--no-ceiling", dest="ceiling", action="store_false",
                        help="Sweep no configuration at the ceiling (every draft accepted): minutes for more Ks.")
    args = parser.parse_args()
    gpus = smi.gpus() if smi.available() else []
    run_dir = args.out / "runs" / RUN_NAME
    if (args.out / STATE).is_file():
        state = json.loads((args.out / STATE).read_text(encoding="utf-8"))
        if args.profile and args.profile != state["profile"]:
            print(f"check: {args.out} holds the {state['profile']} profile's run; give a new --out", file=sys.stderr)
            return 2
        if not (run_dir / "summary.json").is_file():
            print(f"check: {args.out} holds no run ({run_dir} has no summary.json); give a new --out",
                  file=sys.stderr)
            return 2
        if load_summary(run_dir).status != "complete":
            state = _measured(args.out, state, gpus, ["resume", str(run_dir)])
    elif args.out.is_dir() and any(args.out.iterdir()):
        print(f"check: {args.out} is not empty and holds no check; give a new --out", file=sys.stderr)
        return 2
    else:
        state = sweep(args.out, args.work, PROFILES[args.profile or ("gpu" if gpus else "cpu")], args.seed, gpus,
                      args.ks, args.ceiling)
    if not (run_dir / "summary.json").is_file():
        print("check: the sweep wrote no summary; see above", file=sys.stderr)
        return 1
    return write_results(args.out, state, gpus)


if __name__ == "__main__":
    sys.exit(main())
