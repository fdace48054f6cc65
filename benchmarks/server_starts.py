"""How long the demo's three servers (the baseline, and the draft model at K = 2 and 4) take to serve on a vLLM
CPU build: started together, as execution/servers.start_all starts a CPU build's servers, against started in turn,
each once the one before logged "Warming up done." (its model compiled and warmed up; the design before), in one
run, alternating the order of the designs. With --designs also two that compile once for the servers that share a
compile cache (vLLM's cache key, vllm/config/speculative.py compute_hash, holds the drafter but not K, so K = 4 can
load what K = 2 compiled; the baseline's key is its own):
- led: K = 2's server alone until it serves, then the baseline and K = 4 together;
- keyed: one server of each key together (the baseline and K = 2), then K = 4.

Per cache state it reports the seconds until all three serve and each server's own start, then, with --rounds,
whether how the servers started shows in what they measure: rounds at concurrency 16 (the demo's noisiest point),
each server's cell in turn, the order alternating, and the spread of K = 2's and K = 4's throughput over the
baseline's across the rounds:
- warm: the machine's compile caches as they are (a second demo in the same clone);
- fresh-clone: a new vLLM compile cache (VLLM_CACHE_ROOT), the kernels' cache as it is (a first demo in a new
  clone of a machine that ran one before);
- cold: both new (TORCHINDUCTOR_CACHE_DIR too; a first demo on a new machine), where each server started together
  compiles the model itself.
Then per state the median ratio together / each other design with its range over the repeats.

Run (about 17 minutes on 2 cores for 2 repeats of the three states; nothing else should run meanwhile; --rounds 4
adds about 2.5 minutes per start):
    .venv/bin/python benchmarks/server_starts.py --repeats 2 --out runs/bench-server-starts
    .venv/bin/python benchmarks/server_starts.py --repeats 2 --states warm --rounds 4 --out runs/bench-server-starts
    .venv/bin/python benchmarks/server_starts.py --repeats 2 --states cold --designs together,led,keyed \\
        --out runs/bench-led
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

from cpu_server_env import throughput  # this directory's: output tokens per second of a batch of prompts

from specmeter.config.models import EngineSpec, LoadSpec, SpecConfig, SpecMethod
from specmeter.data.workload import load_conversations
from specmeter.engines.launcher import LaunchedServer
from specmeter.engines.registry import get_engine
from specmeter.execution.servers import Server, start_all
from specmeter.plans.demo import DRAFT, demo_engine, models_dir
from specmeter.schemas.plan import PlannedConfig, Role

STATES = ("warm", "fresh-clone", "cold")
DESIGNS = ("together", "in turn", "led", "keyed")
WARMED_UP = b"Warming up done."  # vllm/v1/worker/cpu_model_runner.py, once the model is compiled and warmed up


def engine_for(state: str, scratch: Path) -> EngineSpec:
    """The demo's engine with the compile caches of `state` (new directories under `scratch` where new)."""
    engine = demo_engine()
    env = dict(engine.env)
    if state != "warm":
        env["VLLM_CACHE_ROOT"] = tempfile.mkdtemp(prefix="vllm-cache-", dir=scratch)
    if state == "cold":
        env["TORCHINDUCTOR_CACHE_DIR"] = tempfile.mkdtemp(prefix="inductor-cache-", dir=scratch)
    return engine.model_copy(update={"env": env})


def servers(engine: EngineSpec, logs: Path) -> list[LaunchedServer]:
    specs = [SpecConfig(), *(SpecConfig(method=SpecMethod.draft_model, num_speculative_tokens=k,
                                        draft_model=str(models_dir() / DRAFT)) for k in (2, 4))]
    return [LaunchedServer(get_engine("vllm").launcher, engine, spec, logs / f"server-{i}.log")
            for i, spec in enumerate(specs)]


def warmed_up(server: LaunchedServer, poll_s: float = 0.25) -> None:
    """Until the server's log says its model warmed up, or it serves or ends first."""
    while server.starting() and not server.poll_ready():
        if WARMED_UP in server.log_path.read_bytes():
            return
        time.sleep(poll_s)


def start(design: str, procs: list[LaunchedServer]) -> float:
    """Seconds until every server serves, started as `design` says."""
    t0 = time.monotonic()
    if design == "together":  # the product's own code: a CPU build's servers are one wave
        by_id = {str(i): p for i, p in enumerate(procs)}
        waves = [Server([PlannedConfig(id=i, role=Role.candidate, spec=p.spec, engine=p.engine, server=i)])
                 for i, p in by_id.items()]

        def spawn(server: Server) -> LaunchedServer:
            by_id[server.head.id].spawn()
            return by_id[server.head.id]

        start_all(waves, spawn, lambda _, proc: proc.wait_ready())
    elif design in ("led", "keyed"):  # K = 4's server (procs[2]) after K = 2's, to start from what it compiled
        steps = [[procs[1]], [procs[0], procs[2]]] if design == "led" else [[procs[0], procs[1]], [procs[2]]]
        for wave in steps:
            for proc in wave:
                proc.spawn()
            for proc in wave:
                proc.wait_ready()
    else:
        for i, proc in enumerate(procs):
            proc.spawn()
            if i < len(procs) - 1:
                warmed_up(proc)
        for proc in procs:
            proc.wait_ready()
    return time.monotonic() - t0


def rounds_at_16(procs: list[LaunchedServer], prompts: list[str], rounds: int) -> list[list[float]]:
    """Per round, K = 2's and K = 4's output throughput over the baseline's at concurrency 16, each server's cell
    in turn (the order alternating between rounds), as the demo's rounds at 16 run."""
    out = []
    for r in range(rounds):
        order = list(range(len(procs))) if r % 2 == 0 else list(range(len(procs)))[::-1]
        tok_s = {i: throughput(procs[i].base_url, str(procs[i].engine.model), prompts, 96, 16) for i in order}
        out.append([tok_s[i] / tok_s[0] for i in range(1, len(procs))])
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--states", default=",".join(STATES), help=f"a comma-separated subset of {', '.join(STATES)}")
    ap.add_argument("--designs", default="together,in turn",
                    help=f"a comma-separated subset of {', '.join(DESIGNS)}; the others are set against the first")
    ap.add_argument("--rounds", type=int, default=0, help="rounds at concurrency 16 once the servers serve (0: none)")
    ap.add_argument("--out", type=Path, required=True, help="a directory for the servers' logs, caches and starts.json")
    args = ap.parse_args()
    states = [s for s in args.states.split(",") if s]
    if unknown := set(states) - set(STATES):
        ap.error(f"--states: unknown {', '.join(sorted(unknown))}; choose from {', '.join(STATES)}")
    designs = [d for d in args.designs.split(",") if d]
    if unknown := set(designs) - set(DESIGNS):
        ap.error(f"--designs: unknown {', '.join(sorted(unknown))}; choose from {', '.join(DESIGNS)}")
    if len(designs) < 2:
        ap.error("--designs: give at least two, to set against each other")
    args.out.mkdir(parents=True, exist_ok=True)
    convs, _ = load_conversations("sample", None, LoadSpec(num_prompts=12, max_tokens=96))
    prompts = [c.turns[0] for c in convs] * 6  # 72 requests at 16 in flight: about the demo's 65 there
    rows: list[dict[str, object]] = []
    totals: dict[tuple[str, str], list[float]] = {}  # (state, design) -> seconds until all three serve, per start
    at_16: dict[tuple[str, str], list[list[list[float]]]] = {}  # (state, design) -> per start, per round
    for state in states:
        for r in range(args.repeats):
            for design in designs if r % 2 == 0 else designs[::-1]:  # alternate which goes first
                logs = args.out / f"{state}-{r}-{design.replace(' ', '-')}"
                logs.mkdir(parents=True, exist_ok=True)
                procs = servers(engine_for(state, args.out), logs)
                try:
                    total = start(design, procs)
                    ratios = rounds_at_16(procs, prompts, args.rounds)
                finally:
                    for proc in procs:
                        proc.stop()
                each = [round(p.startup_seconds or 0.0, 1) for p in procs]
                rows.append({"state": state, "repeat": r, "design": design, "all_s": total, "each_s": each,
                             "ratios_16": ratios})
                totals.setdefault((state, design), []).append(total)
                at_16.setdefault((state, design), []).append(ratios)
                shown = "; ".join(f"K = {k}/baseline {', '.join(f'{x[j]:.3f}' for x in ratios)}"
                                  for j, k in enumerate((2, 4))) if ratios else ""
                print(f"{state}, repeat {r}, {design}: all three serving after {total:.1f} s (each {each}) {shown}",
                      flush=True)
    (args.out / "starts.json").write_text(json.dumps(rows, indent=1))
    print(f"\nseconds until the demo's three servers serve, median [range] over {args.repeats} repeats\n")
    first, others = designs[0], designs[1:]
    print(f"| caches | {' | '.join(designs)} | {' | '.join(f'{first} / {d}' for d in others)} |")
    print("|---" * (1 + len(designs) + len(others)) + "|")
    for state in states:
        seconds = [f"{statistics.median(totals[(state, d)]):.0f}" for d in designs]
        against = []
        for d in others:
            over = [a / b for a, b in zip(totals[(state, first)], totals[(state, d)], strict=True)]
            against.append(f"{statistics.median(over):.2f} [{min(over):.2f}, {max(over):.2f}]")
        print(f"| {state} | {' | '.join(seconds)} | {' | '.join(against)} |")
    if args.rounds > 1:
        print(f"\nat concurrency 16, {args.rounds} rounds a start: the standard deviation of a round's throughput "
              "ratio over the baseline, per start (median over the starts of each design)\n")
        print("| caches | design | K = 2 / baseline | K = 4 / baseline |")
        print("|---|---|---|---|")
        for state in states:
            for design in designs:
                sds = [[statistics.stdev(x[j] for x in start) for start in at_16[(state, design)]] for j in range(2)]
                print(f"| {state} | {design} | {statistics.median(sds[0]):.3f} | {statistics.median(sds[1]):.3f} |")


if __name__ == "__main__":
    main()
