"""What CPU_SERVER_ENV's process layout costs a vLLM CPU server: one launched with the default (the model in the
engine-core process, VLLM_ENABLE_V1_MULTIPROCESSING=0) against one with the worker process vLLM starts otherwise
(=1), alternating which goes first, each started alone on the demo's models and sent the demo's prompts.

Per start it reports the seconds to serving, then output throughput (tokens over wall time) at concurrency 1 and
at 4; then per figure the median ratio of the default over the worker process, with its range over the repeats.

Run (about 6 minutes on 2 cores for 3 repeats; nothing else should run meanwhile):
    .venv/bin/python benchmarks/cpu_server_env.py --repeats 3 --out runs/bench-cpu-server-env
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from pairing_noise import send  # this directory's: one request, its output tokens and seconds

from specmeter.config.models import LoadSpec, SpecConfig, SpecMethod
from specmeter.data.workload import load_conversations
from specmeter.engines.launcher import LaunchedServer
from specmeter.engines.registry import get_engine
from specmeter.plans.demo import DRAFT, demo_engine, models_dir

LAYOUTS = {"engine core": "0", "worker process": "1"}  # VLLM_ENABLE_V1_MULTIPROCESSING


def throughput(url: str, model: str, prompts: list[str], max_tokens: int, concurrency: int) -> float:
    """Output tokens per second of wall time, the prompts sent `concurrency` at a time."""
    t0 = time.perf_counter()
    with ThreadPoolExecutor(concurrency) as pool:
        tokens = sum(pool.map(lambda p: send(url, model, p, max_tokens)[0], prompts))
    return tokens / (time.perf_counter() - t0)


def measure(layout: str, k: int, prompts: list[str], max_tokens: int, out: Path) -> dict[str, float]:
    engine = demo_engine()
    engine = engine.model_copy(update={"env": {**engine.env, "VLLM_ENABLE_V1_MULTIPROCESSING": LAYOUTS[layout]}})
    spec = SpecConfig(method=SpecMethod.draft_model, num_speculative_tokens=k,
                      draft_model=str(models_dir() / DRAFT)) if k else SpecConfig()
    server = LaunchedServer(get_engine("vllm").launcher, engine, spec, out / f"server-{layout.replace(' ', '-')}.log")
    t0 = time.monotonic()
    try:
        server.start()
        figures = {"start_s": time.monotonic() - t0}
        for prompt in prompts[:2]:
            send(server.base_url, str(engine.model), prompt, 16)  # warm-up, as the demo's rounds have
        for c in (1, 4):
            figures[f"c{c}_tok_s"] = throughput(server.base_url, str(engine.model), prompts, max_tokens, c)
        return figures
    finally:
        server.stop()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--k", type=int, default=2, help="the draft model's K on the servers (0: speculation off)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--prompts", type=int, default=12, help="first turns of the demo's workload sent per level")
    ap.add_argument("--max-tokens", type=int, default=96)
    ap.add_argument("--out", type=Path, required=True, help="a directory for the servers' logs and starts.json")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    convs, _ = load_conversations("sample", None, LoadSpec(num_prompts=args.prompts, max_tokens=args.max_tokens))
    prompts = [c.turns[0] for c in convs[: args.prompts]]
    layouts = list(LAYOUTS)
    rows: list[dict[str, float | str | int]] = []
    for r in range(args.repeats):
        for layout in layouts if r % 2 == 0 else layouts[::-1]:  # alternate which goes first
            figures = measure(layout, args.k, prompts, args.max_tokens, args.out)
            rows.append({"repeat": r, "layout": layout, **figures})
            print(f"repeat {r}, {layout}: serving after {figures['start_s']:.1f} s, "
                  f"{figures['c1_tok_s']:.1f} tok/s at 1, {figures['c4_tok_s']:.1f} at 4", flush=True)
    (args.out / "starts.json").write_text(json.dumps(rows, indent=1))
    print(f"\nK = {args.k}; {args.prompts} prompts x {args.max_tokens} tokens per level; engine core over worker "
          f"process, median [range] over {args.repeats} repeats\n")
    print("| figure | engine core | worker process | ratio |")
    print("|---|---|---|---|")
    for figure in ("start_s", "c1_tok_s", "c4_tok_s"):
        values = {lay: [float(row[figure]) for row in rows if row["layout"] == lay] for lay in layouts}
        ratios = [a / b for a, b in zip(values[layouts[0]], values[layouts[1]], strict=True)]
        print(f"| {figure} | {statistics.median(values[layouts[0]]):.1f} | {statistics.median(values[layouts[1]]):.1f} "
              f"| {statistics.median(ratios):.2f} [{min(ratios):.2f}, {max(ratios):.2f}] |")


if __name__ == "__main__":
    main()
