"""Fault campaign: a small sweep on the demo models, disturbed by killing its engine servers and specmeter
itself at random moments and resuming after each, against the same sweep run undisturbed.

specmeter is killed with SIGKILL: no handler runs, its record writer dies mid-queue, nothing is fsync'd. A
finished request's record is written (write(2)) by the writer as soon as it gets it, and what is written is
in the kernel's page cache, which outlives the process: so every record on disk at the kill must survive it.
(fsync guards against the machine going down, which this campaign does not do.)

Reported (goal in brackets):
  finished requests lost [0]   a request that was on disk as finished just before a kill (of the server or
                               of specmeter) and is missing from the final results (of how many were);
  damaged record lines [0]     lines of requests.jsonl that do not parse after a kill, a torn last line aside
                               (resume cuts that one off);
  points run twice [0]          a point that was finished (in summary.json) before a kill and received
                               requests again afterwards;
  same request set [yes]        the final successful requests equal the undisturbed sweep's;
  replayed requests             finished turns of a conversation cut short by a kill: resume replays the
                               whole conversation, since later turns depend on the server's replies;
  servers left running [0]     a server the run launched still running 15 s after specmeter was killed (before
                               the resume), or after the sweep completed: known by its pid and kernel start time.

Usage (about 22 minutes with the defaults on 2 cores: every resume restarts a server):
    .venv/bin/python benchmarks/fault_campaign.py --server-kills 20 --self-kills 5
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
SPECMETER = [sys.executable, "-m", "specmeter.cli"]
Cell = tuple[str, str, int]
Key = tuple[str, str, int, str, int]


def sweep_file(path: Path) -> Path:
    models = ROOT / "models"
    sweep = {
        "workload": {"dataset": "sample", "num_prompts": 4},
        # Eager mode: the campaign restarts servers dozens of times; compile warmup would dominate it.
        "engine": {"model": str(models / "demo-target"), "dtype": "float32", "max_model_len": 1024,
                   "env": {"VLLM_CPU_KVCACHE_SPACE": "1"}, "extra_args": ["--enforce-eager"]},
        "candidates": [{"method": "draft_model", "model": str(models / "demo-draft"), "num_speculative_tokens": 2}],
        "load": {"concurrency": [1, 2], "max_tokens": 16, "temperature": 0, "warmup": 1},
        "repeats": 2,
    }
    path.write_text(yaml.safe_dump(sweep), encoding="utf-8")
    return path


def read_json(path: Path) -> dict | None:  # type: ignore[type-arg]
    try:
        return json.loads(path.read_text(encoding="utf-8"))  # type: ignore[no-any-return]
    except (OSError, ValueError):
        return None


def finished_cells(run_dir: Path) -> set[Cell]:
    summary = read_json(run_dir / "summary.json") or {"configs": []}
    return {(c["config_id"], p["point_id"], p["repeat"]) for c in summary["configs"] for p in c["points"]}


def records(run_dir: Path) -> list[dict]:  # type: ignore[type-arg]
    out = []
    path = run_dir / "requests.jsonl"
    if path.exists():
        for line in path.read_text(encoding="utf-8").splitlines():
            try:
                out.append(json.loads(line))
            except ValueError:
                continue  # a line torn by a kill
    return out


def damaged_lines(run_dir: Path) -> int:
    """Lines of requests.jsonl that are not JSON, the last one aside (a torn tail)."""
    path = run_dir / "requests.jsonl"
    lines = path.read_text(encoding="utf-8").splitlines()[:-1] if path.exists() else []
    bad = 0
    for line in lines:
        try:
            json.loads(line)
        except ValueError:
            bad += 1
    return bad


def key(r: dict) -> Key:  # type: ignore[type-arg]
    return (r["config_id"], r["point_id"], r["repeat"], r["conversation_id"], r["turn"])


def final_ok(run_dir: Path) -> set[Key]:
    latest = {(*key(r), r["warmup"]): r for r in records(run_dir)}
    return {k[:5] for k, r in latest.items() if r["ok"] and not r["warmup"]}


def server_pids(run_dir: Path) -> list[int]:
    summary = read_json(run_dir / "summary.json") or {"configs": []}
    return [c["server_pid"] for c in summary["configs"] if c.get("server_pid") and c.get("startup_s")]


def launched(run_dir: Path) -> set[tuple[int, int | None]]:
    """Every server the run's summary names as launched (each instance): (pid, kernel start time)."""
    summary = read_json(run_dir / "summary.json") or {"configs": []}
    found = set()
    for c in summary["configs"]:
        for s in [c, *c.get("instance_servers", [])]:
            if s.get("server_pid"):
                found.add((s["server_pid"], s.get("server_started")))
    return found


def still_running(pid: int, started: int | None) -> bool:
    """The process is there and is the one started then (a pid the kernel gave to another is not it)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text(encoding="utf-8")
    except OSError:
        return False
    fields = stat[stat.rindex(")") + 2:].split()  # after the command name, which may hold spaces
    return fields[0] != "Z" and (started is None or int(fields[19]) == started)


def left_running(servers: set[tuple[int, int | None]], grace_s: float = 15.0) -> int:
    """How many of `servers` still run once `grace_s` has passed (they stop with their parent)."""
    deadline = time.monotonic() + grace_s
    while (alive_now := [s for s in servers if still_running(*s)]) and time.monotonic() < deadline:
        time.sleep(0.5)
    return len(alive_now)


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except OSError:
        return False
    return True


def run_to_end(cmd: list[str], log: Path) -> int:
    with log.open("a") as fh:
        return subprocess.run(cmd, stdout=fh, stderr=subprocess.STDOUT, timeout=3600).returncode


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--server-kills", type=int, default=20)
    ap.add_argument("--self-kills", type=int, default=5)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--max-delay", type=float, default=8.0, help="Longest wait (s) before a kill, once serving.")
    ap.add_argument("--work", type=Path, default=None, help="Directory for the runs (default: a temp dir).")
    args = ap.parse_args()
    rng = random.Random(args.seed)
    work = args.work or Path(tempfile.mkdtemp(prefix="fault-campaign-"))
    work.mkdir(parents=True, exist_ok=True)
    sweep = sweep_file(work / "sweep.yaml")
    log = work / "campaign.log"
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "VLLM_NO_USAGE_STATS": "1"}
    os.environ.update(env)

    t0 = time.monotonic()
    ref_dir = work / "undisturbed"
    rc = run_to_end([*SPECMETER, "sweep", str(sweep), "--out", str(work), "--name", ref_dir.name], log)
    if rc != 0:
        sys.exit(f"the undisturbed sweep failed (exit {rc}); see {log}")
    reference = final_ok(ref_dir)
    print(f"undisturbed sweep: {len(reference)} requests in {time.monotonic() - t0:.0f} s", flush=True)

    kills = ["server"] * args.server_kills + ["self"] * args.self_kills
    rng.shuffle(kills)
    totals = {"server": 0, "self": 0, "lost": 0, "twice": 0, "replayed": 0, "sweeps": 0, "differ": 0,
              "at_stake": 0, "damaged": 0, "left_running": 0}
    # A small sweep ends before it can take every kill: start disturbed sweeps until the kills are spent,
    # and check each one against the undisturbed sweep when it completes.
    while kills:
        totals["sweeps"] += 1
        run_dir = work / f"disturbed-{totals['sweeps']}"
        result = disturb(run_dir, sweep, kills, rng, args.max_delay, log, totals)
        lost, twice, final, replayed = result
        totals["lost"] += len(lost)
        totals["twice"] += len(twice)
        totals["replayed"] += replayed
        totals["differ"] += final != reference
        print(f"{run_dir.name}: lost {len(lost)}, points run twice {len(twice)}, same request set: "
              f"{'yes' if final == reference else 'NO'} ({len(final)} vs {len(reference)})", flush=True)
    print(f"kills done: server {totals['server']}, specmeter {totals['self']}, "
          f"over {totals['sweeps']} disturbed sweeps")
    print(f"finished requests lost: {totals['lost']} (of {totals['at_stake']} on disk at one kill or more)")
    print(f"damaged record lines after a kill: {totals['damaged']}")
    print(f"points run twice: {totals['twice']}")
    print(f"disturbed sweeps whose final requests differ from the undisturbed sweep's: {totals['differ']}")
    print(f"replayed requests (turns of conversations cut short): {totals['replayed']}")
    print(f"servers left running after a kill of specmeter or at the end: {totals['left_running']}")
    print(f"wall time: {time.monotonic() - t0:.0f} s; runs in {work}")


def disturb(run_dir: Path, sweep: Path, kills: list[str], rng: random.Random, max_delay: float, log: Path,
            totals: dict[str, int]) -> tuple[set[Key], set[Cell], set[Key], int]:
    """Run one sweep, killing a server or specmeter (taken from `kills`) at random moments and resuming
    after each, until it completes; then finish it and compare what survived."""
    cmd = [*SPECMETER, "sweep", str(sweep), "--out", str(run_dir.parent), "--name", run_dir.name]
    seen_finished: set[Key] = set()
    cells_before: dict[Cell, int] = {}
    servers: set[tuple[int, int | None]] = set()  # every server the run launched, checked gone after each exit
    while kills and (read_json(run_dir / "summary.json") or {}).get("status") != "complete":
        with log.open("a") as fh:
            proc = subprocess.Popen(cmd, stdout=fh, stderr=subprocess.STDOUT)
        cmd = [*SPECMETER, "resume", str(run_dir)]
        # Wait until a server is up and measuring, then a random moment more.
        deadline = time.monotonic() + 600
        while proc.poll() is None and not any(alive(p) for p in server_pids(run_dir)) and time.monotonic() < deadline:
            time.sleep(0.2)
        time.sleep(rng.uniform(0.0, max_delay))
        if proc.poll() is None:
            # What is on disk now must survive the kill.
            seen_finished |= {key(r) for r in records(run_dir) if r["ok"] and not r["warmup"]}
            for cell in finished_cells(run_dir):
                cells_before.setdefault(cell, sum(1 for r in records(run_dir) if key(r)[:3] == cell))
            what = kills.pop()
            servers |= launched(run_dir)
            if what == "server":
                pids = [p for p in server_pids(run_dir) if alive(p)]
                if pids:
                    os.killpg(pids[0], signal.SIGKILL)
            else:
                proc.kill()
            totals[what] += 1
        proc.wait(timeout=600)
        servers |= launched(run_dir)
        totals["left_running"] += left_running(servers)  # none outlives specmeter, killed or not
        totals["damaged"] += damaged_lines(run_dir)
    if (read_json(run_dir / "summary.json") or {}).get("status") != "complete":
        run_to_end([*SPECMETER, "resume", str(run_dir)], log)
        totals["left_running"] += left_running(launched(run_dir) - servers)
    final = final_ok(run_dir)
    totals["at_stake"] += len(seen_finished)
    all_records = records(run_dir)
    twice = {cell for cell, count in cells_before.items()
             if sum(1 for r in all_records if key(r)[:3] == cell) != count}
    measured = [r for r in all_records if not r["warmup"]]
    return seen_finished - final, twice, final, len(measured) - len({key(r) for r in measured})

if __name__ == "__main__":
    main()
