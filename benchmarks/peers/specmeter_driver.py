"""Drive a server with specmeter's own run machinery, in a process of its own, and print what it measured.

benchmarks/client_overhead.py runs this like any other peer tool, so specmeter's client is measured
the same way as theirs (its whole process's CPU, its own per-request timings). It takes the path a
`specmeter run --endpoint URL --engine vllm --no-baseline` takes: a plan with one attached configuration
and one load point (a closed-loop ConcurrencyPoint, an open-loop RatePoint, or a TracePoint replaying a
schedule of send offsets as a trace replay does), executed by the runner,
with the vLLM engine's stats adapter (its request extensions, its per-chunk stats parsing, its /metrics
snapshots and running-batch sampler), every finished request appended to requests.jsonl through the
store's writer, and the CLI's progress bars (RichReporter on a console made the CLI's way).

`--no-recording` runs the same machinery with nothing recorded: records stay in memory and no progress is
drawn (summary.json is still written between points), so benchmarks/client_overhead.py can put the cost of
recording beside the figures. `--client-processes` sets LoadSpec.client_processes (default: specmeter's
automatic choice), `--event-loop` LoadSpec.event_loop; `--transport aiohttp` streams over aiohttp (a run
streams over specmeter's own HTTP/1.1 transport: this only compares the two). `cpu_s` in the output is this
process's own CPU (client processes are children: benchmarks/client_overhead.py counts the whole tree).

Prompts are `req-<i> ...`, so the server can key its log by request. Output: one JSON object on stdout
(or --out) with per-request `marker`, `ok`, `error`, `start_s`, `scheduled_s`, `ttft_s`, `chunk_offsets_s`.

Run: .venv/bin/python benchmarks/peers/specmeter_driver.py --url http://127.0.0.1:8123 --requests 256 \
       --concurrency 64 --max-tokens 20       (or --rate 500 [--arrival constant], or --schedule offsets.json)
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from rich.console import Console

from specmeter.config.models import (
    REQUESTS_PER_SLOT_FLOOR,
    ConcurrencyPoint,
    EngineSpec,
    LoadSpec,
    RatePoint,
    SpecConfig,
    TracePoint,
)
from specmeter.data.model import Conversation
from specmeter.execution import runner
from specmeter.load.client import OpenAIClient
from specmeter.load.split import client_processes
from specmeter.plans.run import run_plan
from specmeter.report.progress import RichReporter
from specmeter.rundir.store import RunStore
from specmeter.schemas.plan import WorkloadSelection
from specmeter.schemas.progress import Reporter
from specmeter.schemas.records import RequestRecord


class UnrecordedStore(RunStore):
    """The run machinery with nothing recorded: records are kept in memory, requests.jsonl is never opened."""

    def __init__(self, root: Path) -> None:
        super().__init__(root)
        self.records: list[RequestRecord] = []

    def append(self, record: RequestRecord) -> None:
        self.records.append(record)

    def read_records(self) -> list[RequestRecord]:
        return list(self.records)


class KeptStore(RunStore):
    """requests.jsonl written as in a run; the appended records are also kept for the output (reading the file
    back would add CPU per request that a run does not spend)."""

    def __init__(self, root: Path) -> None:
        super().__init__(root)
        self.kept: list[RequestRecord] = []

    def append(self, record: RequestRecord) -> None:
        super().append(record)
        self.kept.append(record)


class AiohttpClient(OpenAIClient):
    """The runner's client streaming over aiohttp, to compare transports."""

    made = 0

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **{**kwargs, "raw_http": False})
        AiohttpClient.made += 1


def execute(url: str, model: str, requests: int, point: ConcurrencyPoint | RatePoint | TracePoint, load: LoadSpec,
            run_dir: Path, recording: bool, schedule: list[float] | None = None) -> list[RequestRecord]:
    """Run the point as `specmeter run` would (a trace point: each request at its `schedule` offset, as a trace
    replay's rows carry their arrivals); the records as the run kept them."""
    convs = [Conversation(id=f"req-{i}", turns=[f"req-{i} Say something."],
                          metadata={} if schedule is None else {"arrival_s": schedule[i]}) for i in range(requests)]
    engine = EngineSpec(endpoint=url, kind="vllm", served_model_name=model)
    plan = run_plan(engine, SpecConfig(), load.model_copy(update={"points": [point]}), baseline=False,
                    baseline_endpoint=None, workload=WorkloadSelection(dataset="bench", num_prompts=requests))
    ex = runner.Execution(plan=plan, conversations=convs, command=sys.argv)
    if not recording:
        store = UnrecordedStore(run_dir)
        runner.execute(ex, store, Reporter())
        return store.records
    # The console the CLI draws its progress on (stdout, 150 columns when not a terminal).
    kept = KeptStore(run_dir)
    with RichReporter(Console(width=None if sys.stdout.isatty() else 150)) as reporter:
        runner.execute(ex, kept, reporter)
    return kept.kept


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
    mode.add_argument("--schedule", type=Path, help="trace replay: a JSON list of send offsets in seconds, one a "
                      "request (a trace point at scale 1)")
    ap.add_argument("--arrival", choices=["constant", "poisson"], default="constant")
    ap.add_argument("--client-processes", default="auto",
                    help="client processes (LoadSpec.client_processes): a number, or 'auto' (specmeter's default: "
                         "1 below 512 requests in flight)")
    ap.add_argument("--transport", choices=["raw", "aiohttp"], default="raw",
                    help="streaming transport: specmeter's own HTTP/1.1 (default) or aiohttp (to compare)")
    ap.add_argument("--event-loop", choices=["auto", "uvloop", "asyncio"], default="auto",
                    help="LoadSpec.event_loop: uvloop, asyncio's own, or auto (uvloop when installed)")
    ap.add_argument("--no-recording", action="store_true",
                    help="keep records in memory and draw no progress (the cost of recording, by difference)")
    ap.add_argument("--run-dir", type=Path, help="keep the run directory here (default: a temporary one, removed)")
    ap.add_argument("--out", help="write the JSON here instead of stdout")
    args = ap.parse_args()
    if args.concurrency is not None and args.requests < REQUESTS_PER_SLOT_FLOOR * args.concurrency:
        ap.error(f"--requests {args.requests}: a run sends at least {REQUESTS_PER_SLOT_FLOOR} requests per slot "
                 f"(it would repeat prompts); give at least {REQUESTS_PER_SLOT_FLOOR * args.concurrency}")
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    schedule: list[float] | None = None
    point: ConcurrencyPoint | RatePoint | TracePoint
    if args.concurrency is not None:
        point = ConcurrencyPoint(concurrency=args.concurrency)
    elif args.schedule is not None:
        schedule = [float(t) for t in json.loads(args.schedule.read_text())]
        if len(schedule) < args.requests:
            ap.error(f"--schedule {args.schedule}: {len(schedule)} offsets for {args.requests} requests")
        point = TracePoint(scale=1.0)
    else:
        point = RatePoint(rate=args.rate, arrival=args.arrival)
    load = LoadSpec(api=args.api, max_tokens=args.max_tokens, warmup=0, temperature=0.0, max_error_rate=1.0,
                    client_processes=None if args.client_processes == "auto" else int(args.client_processes),
                    event_loop=args.event_loop)
    if args.transport == "aiohttp":
        runner.OpenAIClient = AiohttpClient  # type: ignore[attr-defined]  # the runner makes its client by this name
    cpu0, t0 = time.process_time(), time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="specmeter-driver-") as tmp:
        records = execute(args.url, args.model, args.requests, point, load, args.run_dir or Path(tmp),
                          not args.no_recording, schedule)
    if args.transport == "aiohttp" and not AiohttpClient.made:
        sys.exit("--transport aiohttp: the runner no longer makes its client as runner.OpenAIClient; update "
                 "benchmarks/peers/specmeter_driver.py")
    out: dict[str, Any] = {
        "wall_s": time.perf_counter() - t0, "cpu_s": time.process_time() - cpu0,
        "client_processes": client_processes(point, load),
        "requests": [{"marker": int(r.conversation_id.removeprefix("req-")), "ok": r.ok, "error": r.error,
                      "start_s": r.start_s, "scheduled_s": r.scheduled_s, "ttft_s": r.ttft_s,
                      "chunk_offsets_s": r.chunk_offsets_s} for r in records if not r.warmup],
    }
    text = json.dumps(out)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)
    else:
        sys.stdout.write(text + "\n")


if __name__ == "__main__":
    main()
