"""Drive a server with specmeter's own load generator, in a process of its own, and print what it measured.

benchmarks/client_overhead.py runs this like any other peer tool, so specmeter's client is measured
the same way as theirs (its whole process's CPU, its own per-request timings). It goes through the
same code as a real run: `run_point` with a closed-loop ConcurrencyPoint or an open-loop RatePoint,
OpenAIClient, and the request bodies `build_request` makes (chat, continuous usage, and the vLLM
adapter's request extensions, as the runner sends them). `--client-processes` sets
LoadSpec.client_processes (default: specmeter's automatic choice), `--event-loop` LoadSpec.event_loop;
`cpu_s` in the output is this process's own CPU (client processes are children: benchmarks/client_overhead.py
counts the whole tree).

Prompts are `req-<i> ...`, so the server can key its log by request. Output: one JSON object on stdout
(or --out) with per-request `marker`, `ok`, `error`, `start_s`, `scheduled_s`, `ttft_s`, `chunk_offsets_s`.

Run: .venv/bin/python benchmarks/peers/specmeter_driver.py --url http://127.0.0.1:8123 --requests 200 \
       --concurrency 64 --max-tokens 20       (or --rate 500 [--arrival constant])
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import time
from typing import Any

from specmeter.config import ConcurrencyPoint, EventLoop, LoadSpec, RatePoint
from specmeter.data.model import Conversation
from specmeter.engines.vllm import VLLMStats
from specmeter.load import eventloop
from specmeter.load.client import OpenAIClient
from specmeter.load.point import run_point
from specmeter.load.traffic import PointKey, PointTraffic


async def drive(url: str, model: str, requests: int, point: ConcurrencyPoint | RatePoint,
                max_tokens: int, api: str, client_processes: int | None = None,
                raw_http: bool = True, event_loop: EventLoop = "auto") -> PointTraffic:
    convs = [Conversation(id=f"req-{i}", turns=[f"req-{i} Say something."]) for i in range(requests)]
    load = LoadSpec(api=api, max_tokens=max_tokens, warmup=0, temperature=0.0, max_error_rate=1.0,  # type: ignore[arg-type]
                    client_processes=client_processes, event_loop=event_loop)
    adapter = VLLMStats()
    async with OpenAIClient(url, extra_body=adapter.request_extensions(load.temperature),
                            raw_http=raw_http) as client:
        return await run_point(client, point, convs, load, model, PointKey("bench", point.id), lambda r: None)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--url", required=True)
    ap.add_argument("--model", default="paced")
    ap.add_argument("--requests", type=int, required=True)
    ap.add_argument("--max-tokens", type=int, default=20)
    ap.add_argument("--api", choices=["chat", "completions"], default="chat")
    mode = ap.add_mutually_exclusive_group(required=True)
    mode.add_argument("--concurrency", type=int, help="closed loop: this many requests in flight")
    mode.add_argument("--rate", type=float, help="open loop: requests/s")
    ap.add_argument("--arrival", choices=["constant", "poisson"], default="constant")
    ap.add_argument("--client-processes", default="auto",
                    help="client processes (LoadSpec.client_processes): a number, or 'auto' (specmeter's default: "
                         "1 below 512 requests in flight)")
    ap.add_argument("--transport", choices=["raw", "aiohttp"], default="raw",
                    help="streaming transport: specmeter's own HTTP/1.1 (default) or aiohttp (to compare)")
    ap.add_argument("--event-loop", choices=["auto", "uvloop", "asyncio"], default="auto",
                    help="LoadSpec.event_loop: uvloop, asyncio's own, or auto (uvloop when installed)")
    ap.add_argument("--out", help="write the JSON here instead of stdout")
    args = ap.parse_args()
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    point: ConcurrencyPoint | RatePoint = (
        ConcurrencyPoint(concurrency=args.concurrency) if args.concurrency is not None
        else RatePoint(rate=args.rate, arrival=args.arrival))
    processes = None if args.client_processes == "auto" else int(args.client_processes)
    cpu0 = time.process_time()
    with eventloop.runner(args.event_loop) as loop_runner:
        traffic = loop_runner.run(drive(args.url, args.model, args.requests, point, args.max_tokens, args.api,
                                        processes, raw_http=args.transport == "raw", event_loop=args.event_loop))
    records = traffic.records
    out: dict[str, Any] = {
        "wall_s": traffic.wall_s, "cpu_s": time.process_time() - cpu0, "client_processes": traffic.processes,
        "requests": [{"marker": int(r.conversation_id.removeprefix("req-")), "ok": r.ok, "error": r.error,
                      "start_s": r.start_s, "scheduled_s": r.scheduled_s, "ttft_s": r.ttft_s,
                      "chunk_offsets_s": r.chunk_offsets_s} for r in records],
    }
    text = json.dumps(out)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)
    else:
        sys.stdout.write(text + "\n")


if __name__ == "__main__":
    main()
