"""Does the demo pair need vLLM's compilation? The demo's three servers (the baseline, the draft model at K = 2 and
4) on a vLLM CPU build, compiled (torch.compile and inductor, the default) against `--enforce-eager` (no
compilation: PyTorch's own kernels), in one run:
- starts: seconds until all three serve, started together as the demo starts them, on empty compile caches (a new
  machine: VLLM_CACHE_ROOT and TORCHINDUCTOR_CACHE_DIR new) and then on the caches that start filled;
- steps: output throughput at concurrency 1, 4 and 16 on the same prompts, each server's cell in turn, the order
  alternating between rounds, and K = 2's and K = 4's throughput over the baseline's, per round.
It prints a table per figure: compiled, eager and eager / compiled (median over the rounds, range).

Run (about 15 minutes on 2 cores for 2 rounds; nothing else should run meanwhile):
    .venv/bin/python benchmarks/eager_vs_compiled.py --rounds 2 --out runs/bench-eager
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

from cpu_server_env import throughput  # this directory's: output tokens per second of a batch of prompts
from server_starts import servers  # the demo's three servers on an engine

from specmeter.config.models import EngineSpec, LoadSpec
from specmeter.data.workload import load_conversations
from specmeter.engines.launcher import LaunchedServer
from specmeter.plans.demo import demo_engine

MODES = ("compiled", "eager")
CONCURRENCY = (1, 4, 16)
MAX_TOKENS = 96


def engine_for(mode: str, caches: Path) -> EngineSpec:
    """The demo's engine in `mode`, its compile caches under `caches` (empty until its first start)."""
    engine = demo_engine()
    env = {**engine.env, "VLLM_CACHE_ROOT": str(caches / "vllm"), "TORCHINDUCTOR_CACHE_DIR": str(caches / "inductor")}
    extra = [*engine.extra_args, "--enforce-eager"] if mode == "eager" else list(engine.extra_args)
    return engine.model_copy(update={"env": env, "extra_args": extra})


def start_together(procs: list[LaunchedServer]) -> float:
    """Seconds until every server serves, all spawned at once (the demo's CPU wave)."""
    t0 = time.monotonic()
    for proc in procs:
        proc.spawn()
    for proc in procs:
        proc.wait_ready()
    return time.monotonic() - t0


def rounds(procs: list[LaunchedServer], prompts: list[str], n: int) -> list[dict[str, list[float]]]:
    """Per round, each concurrency's tok/s per server (baseline, K = 2, K = 4), the servers in turn."""
    out = []
    for r in range(n):
        order = list(range(len(procs))) if r % 2 == 0 else list(range(len(procs)))[::-1]
        row: dict[str, list[float]] = {}
        for c in CONCURRENCY:
            sent = prompts[:max(12, 3 * c)]
            tok_s = {i: throughput(procs[i].base_url, str(procs[i].engine.model), sent, MAX_TOKENS, c) for i in order}
            row[f"c{c}"] = [tok_s[i] for i in range(len(procs))]
        out.append(row)
    return out


def _median_range(values: list[float]) -> str:
    return f"{statistics.median(values):.2f} [{min(values):.2f}, {max(values):.2f}]"


def _figure(row: dict[str, list[float]], c: int, i: int) -> float:
    """Server i's tok/s at concurrency c (the baseline, i = 0), else its ratio over the baseline's."""
    return row[f"c{c}"][i] / (row[f"c{c}"][0] if i else 1.0)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=2, help="rounds of every concurrency on the warm servers")
    ap.add_argument("--out", type=Path, required=True, help="a directory for the servers' logs and results.json")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    convs, _ = load_conversations("sample", None, LoadSpec(num_prompts=48, max_tokens=MAX_TOKENS))
    prompts = [c.turns[0] for c in convs]
    starts: dict[str, dict[str, float]] = {}
    measured: dict[str, list[dict[str, list[float]]]] = {}
    for mode in MODES:
        caches = Path(tempfile.mkdtemp(prefix=f"caches-{mode}-", dir=args.out))
        starts[mode] = {}
        for state in ("empty", "filled"):
            logs = args.out / f"{mode}-{state}"
            logs.mkdir(exist_ok=True)
            procs = servers(engine_for(mode, caches), logs)
            try:
                starts[mode][state] = start_together(procs)
                print(f"{mode}, caches {state}: all three serving after {starts[mode][state]:.0f} s", flush=True)
                if state == "filled":
                    measured[mode] = rounds(procs, prompts, args.rounds)
            finally:
                for proc in procs:
                    proc.stop()
        for r, row in enumerate(measured[mode]):
            print(f"{mode}, round {r}: " + "; ".join(f"{c} {', '.join(f'{x:.0f}' for x in v)} tok/s"
                                                      for c, v in row.items()), flush=True)
    (args.out / "results.json").write_text(json.dumps({"start_s": starts, "rounds": measured}, indent=1))
    print("\n| figure | compiled | eager | eager / compiled |\n|---|---|---|---|")
    for state in ("empty", "filled"):
        comp, eag = starts["compiled"][state], starts["eager"][state]
        print(f"| start, caches {state} (s) | {comp:.0f} | {eag:.0f} | {eag / comp:.2f} |")
    for c in CONCURRENCY:
        for i, name in enumerate(("baseline tok/s", "K = 2 / baseline", "K = 4 / baseline")):
            cv = [_figure(r, c, i) for r in measured["compiled"]]
            ev = [_figure(r, c, i) for r in measured["eager"]]
            over = [b / a for a, b in zip(cv, ev, strict=True)]
            print(f"| c{c} {name} | {_median_range(cv)} | {_median_range(ev)} | {_median_range(over)} |")


if __name__ == "__main__":
    main()
