"""Time to the verified answer: two designs of the demo, or of a sweep file's tune loop (two git revisions), on the
same machine, in one run.

The cost of an answer is what a user pays for specmeter: every server start and every round is machine time
(GPU time, on a real model). This runs `specmeter demo` (with --sweep FILE: `specmeter sweep FILE --verify`, the
same loop over a sweep file of the repository's) from a fresh clone of each revision, `--repeats` times,
alternating which design goes first (so drift on a shared machine falls on both alike), and reports per run:
- wall time, split into setup (only with --setup: `scripts/setup.sh` in the clone, a fresh environment),
  server starts, the sweep's measuring, the measuring of the Ks the step-cost model proposed, the verification
  rounds' measuring, and the rest (process start, recommend, calibration, reports);
- requests sent (warm-ups apart) and servers started;
- the sweep's rounds per point and its round spread there (how much a configuration's speedup over the baseline
  moved from round to round: what drift the design lets through);
- the final table (the answer's round and its verification) and whether it matches the first run of the
  `--before` design.
Then the median and range per design, and the ratios after / before of wall time and requests.

Without --setup a clone reuses this checkout's environment (.venv linked), so only the design differs.

With --cold it times one revision (--after) as a new user meets it and as a returning one does, in one run: "cold",
a fresh clone with its own new environment (`scripts/setup.sh`, pip's cache off: PIP_NO_CACHE_DIR) and empty compile
caches (VLLM_CACHE_ROOT and TORCHINDUCTOR_CACHE_DIR new, in the clone), against "warm", a fresh clone on this
checkout's environment and the machine's caches as they are; the two alternate which goes first:
    .venv/bin/python benchmarks/time_to_answer.py --cold --repeats 3 --out runs/tta-cold

Run (about 30 minutes per repeat of both designs on 2 cores; the larger sweep about 75):
    .venv/bin/python benchmarks/time_to_answer.py --before 0b49660 --after HEAD --repeats 3 --out runs/tta
    .venv/bin/python benchmarks/time_to_answer.py --before 0b49660 --sweep examples/demo-sweep.yaml --out runs/tta-sweep
With --drift S a background process burns one core for S seconds, rests S seconds, over and over, while each tune
loop runs: the drift of a shared machine (a neighbour's job coming and going), the same for both designs:
    .venv/bin/python benchmarks/time_to_answer.py --before 3f7992c --after HEAD --drift 20 --out runs/tta-drift
The phases of demos that already ran (say, `scripts/demo.sh` on three fresh clones), without running anything:
    .venv/bin/python benchmarks/time_to_answer.py --read /tmp/demo*/runs/*-demo
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
# One core busy for `period` seconds, then idle as long, until killed: a neighbour's job coming and going.
BURN = ("import sys, time\nperiod = float(sys.argv[1])\nwhile True:\n    end = time.monotonic() + period\n"
        "    while time.monotonic() < end:\n        pass\n    time.sleep(period)\n")


@contextmanager
def drifting(period: float | None) -> Iterator[subprocess.Popen[bytes] | None]:
    """With a period, BURN runs in the background for the block's duration (the process is yielded)."""
    if period is None:
        yield None
        return
    burner = subprocess.Popen([sys.executable, "-c", BURN, str(period)])
    try:
        yield burner
    finally:
        burner.kill()
        burner.wait()


@dataclass
class Timing:
    """One demo run of one design, read from its own run directory."""

    design: str
    rev: str
    repeat: int
    run_dir: str
    wall_s: float
    setup_s: float
    starts_s: float
    sweep_s: float
    propose_s: float
    verify_s: float
    other_s: float
    requests: int
    warmup_requests: int
    servers_started: int
    verify_rounds: int
    table: list[list[int]] | None
    static_k: int | None
    answer: str
    matches: bool | None = None
    points: dict[str, int] = field(default_factory=dict)  # rounds per point of the sweep
    round_sd: dict[str, float] = field(default_factory=dict)  # per point of the sweep: see round_spread


# The demo's verification rounds are verify/, verify-r2/, ...; `sweep --verify`'s <timestamp>-verify/, ...-verify-r2/.
VERIFY_DIR = re.compile(r"(?:.+-)?verify(?:-r(\d+))?")


def verify_dirs(run_dir: Path) -> list[Path]:
    """The run's verification rounds in order."""
    found = [(int(m.group(1) or 1), d) for d in run_dir.iterdir()
             if d.is_dir() and (m := VERIFY_DIR.fullmatch(d.name)) and (d / "summary.json").exists()]
    return [d for _, d in sorted(found)]


def propose_dirs(run_dir: Path) -> list[Path]:
    """The run's measurements of proposed Ks: propose/, propose-2/, ... (none before the tune loop proposed)."""
    return sorted((d for d in run_dir.iterdir() if d.is_dir() and d.name.split("-")[0] == "propose"
                   and (d / "summary.json").exists()), key=lambda d: d.name)


def _summary(d: Path) -> dict[str, Any]:
    return dict(json.loads((d / "summary.json").read_text(encoding="utf-8")))


def _requests(d: Path) -> tuple[int, int]:
    measured = warmup = 0
    with (d / "requests.jsonl").open(encoding="utf-8") as f:
        for line in f:
            if line.strip():
                if json.loads(line).get("warmup"):
                    warmup += 1
                else:
                    measured += 1
    return measured, warmup


def read_run(run_dir: Path, *, design: str, rev: str, repeat: int, wall_s: float, setup_s: float) -> Timing:
    """Split a finished demo's wall time into its phases from the run directory's own records: each summary's
    wall time, and the time its servers took to start (a server reused from the pool started in 0 s)."""
    sweep = _summary(run_dir)
    proposals = [_summary(d) for d in propose_dirs(run_dir)]
    verifies = [_summary(d) for d in verify_dirs(run_dir)]

    def starts(s: dict[str, Any]) -> list[float]:
        return [float(c["startup_s"]) for c in s["configs"] if c.get("startup_s")]

    def starting(d: Path, s: dict[str, Any]) -> float:
        """Seconds the directory's execution spent starting servers: from its start to its first measured cell
        (servers that overlap their starts count once), or their summed starts where no cell was captured."""
        if not starts(s):
            return 0.0
        first = [float(a["started_s"]) for f in (d / "captures").glob("*/*.json")
                 for a in json.loads(f.read_text(encoding="utf-8")).get("attempts", []) if a.get("started_s")]
        return min(first) if first else sum(starts(s))

    sweep_starts = starts(sweep)
    propose_starts = [x for p in proposals for x in starts(p)]
    verify_starts = [x for v in verifies for x in starts(v)]
    # Per phase, each directory's (wall time, time starting servers), its captures read once.
    phases = [[(float(s["wall_s"] or 0.0), starting(d, s)) for d, s in dirs] for dirs in (
        [(run_dir, sweep)], zip(propose_dirs(run_dir), proposals), zip(verify_dirs(run_dir), verifies))]
    starts_s = sum(start for phase in phases for _, start in phase)
    sweep_s, propose_s, verify_s = (sum(wall - start for wall, start in phase) for phase in phases)
    counts = [_requests(d) for d in (run_dir, *propose_dirs(run_dir), *verify_dirs(run_dir))]
    rec = json.loads((run_dir / "recommendation.json").read_text(encoding="utf-8"))
    best = rec["drafters"][0] if rec.get("drafters") else {}
    spec = best.get("spec") or {}
    return Timing(
        design=design, rev=rev, repeat=repeat, run_dir=str(run_dir), wall_s=wall_s, setup_s=setup_s,
        starts_s=starts_s, sweep_s=sweep_s, propose_s=propose_s, verify_s=verify_s,
        other_s=wall_s - setup_s - starts_s - sweep_s - propose_s - verify_s,
        requests=sum(c[0] for c in counts), warmup_requests=sum(c[1] for c in counts),
        servers_started=len(sweep_starts) + len(propose_starts) + len(verify_starts), verify_rounds=len(verifies),
        table=spec.get("num_speculative_tokens_per_batch_size"), static_k=best.get("static_k"),
        answer=f"round {rec.get('round')}, {rec.get('verification')}",
        points={p["point_id"]: int(p["rounds"]) for p in sweep.get("sampling") or []},
        round_sd=round_spread(sweep),
    )


def round_spread(summary: dict[str, Any]) -> dict[str, float]:
    """Per point, how much a round's speedup moves from round to round: the standard deviation across rounds of each
    configuration's output throughput over the baseline's in the same round (the per-round values of the sweep's own
    speedups, which decisions read), averaged over the configurations with at least two rounds there. What drift a
    round design lets through shows here; the sequential rounds stop sooner where it is small."""
    sds: dict[str, list[float]] = {}
    for speedup in (summary.get("analysis") or {}).get("speedups") or []:
        rounds = [r for r in speedup["output_throughput"].get("repeat_values") or [] if r is not None]
        if len(rounds) >= 2:
            sds.setdefault(speedup["point_id"], []).append(statistics.stdev(rounds))
    return {point_id: statistics.mean(values) for point_id, values in sds.items()}


def _git(*args: str, cwd: Path = REPO) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout.strip()


def answer_command(sweep: str | None, runs: Path, args: Sequence[str]) -> list[str]:
    """The tune loop to time: the demo, or a sweep file's sweep with --verify (the file's path read in the clone)."""
    if sweep is None:
        return ["demo", "--out", str(runs), *args]
    return ["sweep", sweep, "--verify", "--name", "answer", "--out", str(runs), *args]


def run_design(design: str, rev: str, repeat: int, out: Path, *, setup: bool, sweep: str | None,
               args: Sequence[str], drift: float | None = None, cold: bool = False) -> Timing:
    """A fresh clone of `rev`, then (with `setup`) its own environment, then the tune loop from it; `cold`: pip's
    cache off and the compile caches new and empty, as on a machine that never ran it."""
    clone = out / f"{design}-{repeat}"
    subprocess.run(["git", "clone", "-q", "--shared", str(REPO), str(clone)], check=True)
    _git("checkout", "-q", rev, cwd=clone)
    env = {**os.environ, "PYTHONPATH": str(clone / "src")}  # the clone's code, not this checkout's
    if cold:
        env.update(PIP_NO_CACHE_DIR="1", VLLM_CACHE_ROOT=str(clone / ".cold-cache/vllm"),
                   TORCHINDUCTOR_CACHE_DIR=str(clone / ".cold-cache/inductor"))
    t0 = time.perf_counter()
    if setup:
        subprocess.run(["scripts/setup.sh"], cwd=clone, env=env, check=True)
    else:
        (clone / ".venv").symlink_to(REPO / ".venv")
    setup_s = time.perf_counter() - t0
    runs = clone / "runs"
    with drifting(drift):
        subprocess.run([str(clone / ".venv/bin/python"), "-m", "specmeter", *answer_command(sweep, runs, args)],
                       cwd=clone, env=env, check=True, stdout=subprocess.DEVNULL)
    wall_s = time.perf_counter() - t0
    (run_dir,) = runs.glob("*-demo" if sweep is None else "answer")
    return read_run(run_dir, design=design, rev=rev, repeat=repeat, wall_s=wall_s, setup_s=setup_s)


def spread(values: Sequence[float], unit: str = "") -> str:
    return f"{statistics.median(values):.1f}{unit} [{min(values):.1f}, {max(values):.1f}]"


def read_finished(run_dir: Path, repeat: int) -> Timing:
    """A demo that already ran (runs/<id>-demo): its phases, from the sweep's start (its summary's created_utc) to
    the last write of a summary or recommendation.json (setup and the process's own start are not seen there)."""
    files = [run_dir / "recommendation.json", *(d / "summary.json"
                                                for d in (run_dir, *propose_dirs(run_dir), *verify_dirs(run_dir)))]
    start = datetime.fromisoformat(_summary(run_dir)["created_utc"]).timestamp()
    wall = max(f.stat().st_mtime for f in files if f.exists()) - start
    return read_run(run_dir, design="read", rev=run_dir.name, repeat=repeat, wall_s=wall, setup_s=0.0)


def report(timings: Sequence[Timing]) -> str:
    """Per run, its phases; per design, the median and range; the final tables matched against the first run of
    the design before (or, reading finished runs, the first run read)."""
    reference = next((t for t in timings if t.design in ("before", "warm")), timings[0])
    for t in timings:
        t.matches = (t.table, t.static_k) == (reference.table, reference.static_k)
    lines = ["| design | repeat | wall min | setup | starts | sweep | propose | verify | other | requests | servers | "
             "verify rounds | rounds per point | round spread | final table | answer | matches |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for t in timings:
        lines.append(
            f"| {t.design} ({t.rev}) | {t.repeat} | {t.wall_s / 60:.1f} | {t.setup_s:.0f} s | {t.starts_s:.0f} s | "
            f"{t.sweep_s:.0f} s | {t.propose_s:.0f} s | {t.verify_s:.0f} s | {t.other_s:.0f} s | {t.requests} | "
            f"{t.servers_started} | "
            f"{t.verify_rounds} | {', '.join(f'{p} {r}' for p, r in t.points.items())} | "
            f"{', '.join(f'{p} {sd:.3f}' for p, sd in t.round_sd.items())} | {t.table} | {t.answer} | "
            f"{'yes' if t.matches else 'no'} |")
    by = {d: [t for t in timings if t.design == d] for d in ("before", "after", "cold", "warm", "read")}
    lines.append("")
    for d, ts in by.items():
        if ts:
            lines.append(f"{d}: wall {spread([t.wall_s / 60 for t in ts], ' min')} (median [min, max] over "
                         f"{len(ts)}), requests {spread([float(t.requests) for t in ts])}, servers started "
                         f"{spread([float(t.servers_started) for t in ts])}")
            at = dict.fromkeys(p for t in ts for p in t.round_sd)
            if at:
                lines.append(f"{d}: round spread per point (median over runs): " + ", ".join(
                    f"{p} {statistics.median(t.round_sd[p] for t in ts if p in t.round_sd):.3f}" for p in at))
    for new, old in (("after", "before"), ("cold", "warm")):
        if by[new] and by[old]:
            ratios = {key: float(statistics.median(getattr(t, key) for t in by[new])
                                 / statistics.median(getattr(t, key) for t in by[old]))
                      for key in ("wall_s", "requests", "servers_started")}
            lines.append(f"{new} / {old} (medians): wall {ratios['wall_s']:.2f}, requests {ratios['requests']:.2f}, "
                         f"servers started {ratios['servers_started']:.2f}")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--before", help="the git revision of today's design (required unless --read)")
    ap.add_argument("--after", default="HEAD", help="the git revision of the new design (default HEAD)")
    ap.add_argument("--repeats", type=int, default=1, help="demo runs per design, alternating which goes first")
    ap.add_argument("--setup", action="store_true", help="time scripts/setup.sh in each clone (a fresh environment)")
    ap.add_argument("--cold", action="store_true", help="time --after cold (a new environment, pip's cache off, empty "
                    "compile caches) against warm (this environment, the caches as they are), instead of two designs")
    ap.add_argument("--out", type=Path, help="a new directory for the clones, runs and results (unless --read)")
    ap.add_argument("--sweep", metavar="FILE", help="time `specmeter sweep FILE --verify` instead of the demo (FILE: "
                    "a path in the repository, e.g. examples/demo-sweep.yaml, read in each clone)")
    ap.add_argument("--read", nargs="+", type=Path, metavar="RUN_DIR", help="run nothing: report the phases of demos "
                    "that already ran (runs/<id>-demo), from each sweep's start to the last answer it wrote")
    ap.add_argument("--drift", type=float, metavar="S", help="burn one core S seconds on, S off, while each tune loop "
                    "runs (the setup apart): a shared machine's drift, made repeatable")
    ap.add_argument("args", nargs="*", help="after --: more arguments for `specmeter demo` (or `specmeter sweep`)")
    args = ap.parse_args(argv)
    if args.read:
        for d in args.read:
            if not (d / "summary.json").exists() or not (d / "recommendation.json").exists():
                ap.error(f"{d}: not a finished demo (no summary.json or recommendation.json); --read takes the "
                         "run directories a demo wrote, runs/<id>-demo")
        print(report([read_finished(d, i) for i, d in enumerate(args.read, start=1)]))
        return
    if args.out is None or (args.before is None and not args.cold):
        ap.error("--before (or --cold) and --out are required (or --read RUN_DIR ... to report finished runs)")
    args.out.mkdir(parents=True, exist_ok=False)
    after = _git("rev-parse", "--short", args.after)
    designs = ("warm", "cold") if args.cold else ("before", "after")
    revs = {"warm": after, "cold": after} if args.cold else {"before": _git("rev-parse", "--short", args.before),
                                                              "after": after}
    timings: list[Timing] = []
    for repeat in range(1, args.repeats + 1):
        order = designs if repeat % 2 else designs[::-1]
        for design in order:
            print(f"repeat {repeat}: {design} ({revs[design]})", file=sys.stderr, flush=True)
            cold = design == "cold"
            timings.append(run_design(design, revs[design], repeat, args.out, setup=args.setup or cold,
                                      sweep=args.sweep, args=args.args, drift=args.drift, cold=cold))
            (args.out / "time_to_answer.json").write_text(json.dumps([asdict(t) for t in timings], indent=1))
    drift = f"under drift: one core burnt {args.drift:g} s on, {args.drift:g} s off\n\n" if args.drift else ""
    text = drift + report(timings)
    (args.out / "time_to_answer.md").write_text(text + "\n", encoding="utf-8")
    print(text)


if __name__ == "__main__":
    main()
