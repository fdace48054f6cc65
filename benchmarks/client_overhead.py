"""Side by side: how much does each load generator cost, and how far off are its numbers, at hundreds of streams?

One paced streaming server (tests/fakeengine/paced.py, a process of its own) streams every request as
`--chunks` chunks `--gap-ms` apart and logs when it wrote each one: the truth. The same server is then driven,
one tool at a time (taking turns at each point), by specmeter's client and by the clients users would otherwise
pick: `vllm bench serve`, AIPerf and GuideLLM, each as a process of its own with its own per-request output.
For every tool and load point:

  CPU per chunk   the tool's whole process tree (children, grandchildren, daemons), as the marginal cost
                  between a run of N and one of 2N requests: (cpu_2N - cpu_N) / (chunks_2N - chunks_N), so
                  start-up (imports, tokenizer, dataset) cancels out (with --repeats: the least-squares slope).
                  "x" columns are ratios to specmeter's at the same point.
  chunks/s        chunks the server wrote per second over the middle 80% of the 2N run (no ramp, no drain).
                  At the paced points it is what the tool kept flowing; at the capacity point (gap 0) it is
                  the tool's ceiling.
  TTFT error      |tool's TTFT - server's (first chunk written - first byte of the request received)|.
  gap error       |tool's inter-chunk gap - server's gap between the same two writes|, per gap. GuideLLM
                  keeps no per-chunk times; for it, and for every tool in "mean-gap error", the per-request
                  mean gap is compared instead.
  send lag        open loop only: how late the server saw each request against the fixed-interval schedule
                  the tool was asked for (request i due at i/rate, anchored at the earliest request).

Points: the capacity point (gap 0, `--capacity-concurrency` streams); a closed loop at each `--concurrency`;
an open loop with constant intervals, by default each tool at `--rate-fraction` of its own capacity (`--rate`;
`specmeter-unrecorded` at specmeter's, so the cost of recording is read at one rate); then the trace case:
specmeter's own tools replay `--trace`'s arrivals (default examples/trace-mooncake.jsonl, again after itself
as often as N takes) sped up so the trace's busiest second offers `--trace-peak-rate` requests (default:
specmeter's open-loop rate), as a trace replay sends them (a trace point, no cap in flight). Its table gives each
figure over the same tool's at the open loop in the same run: does a trace's peak cost more than today's figures?
Its send lag is against the trace's own schedule.

specmeter runs the path a `specmeter run` against the server takes (benchmarks/peers/specmeter_driver.py: the
runner, the vLLM engine's stats adapter, every finished request appended to requests.jsonl through the store's
writer, the progress bars), with its default client processes (one below 512 streams, then one per 256 up to
the usable cores, all timing on one monotonic clock) and its own HTTP/1.1 streaming transport.
`specmeter-unrecorded` is the same run with nothing recorded (records kept in memory, no progress): the table
under the main one gives specmeter's figures over its figures at each point, the cost of recording.
`specmeter-1p` forces one process, `specmeter-mp` one per core (at least 2) at every point, `specmeter-aiohttp`
streams over aiohttp, `specmeter-asyncio` runs on asyncio's own event loop instead of uvloop.

Peers: `vllm bench serve` comes with the project's .venv; AIPerf and GuideLLM live in their own
environments: run benchmarks/peers/setup.sh once. Nothing is downloaded: tokenizers come from --tokenizer.

Run: .venv/bin/python benchmarks/client_overhead.py                       (full: c64, c256, c1024)
     .venv/bin/python benchmarks/client_overhead.py --concurrency 16,64 --requests 256 --capacity-concurrency 64
     .venv/bin/python benchmarks/client_overhead.py --tools specmeter-1p,specmeter-mp --concurrency 1024 \
         --requests 2048 --capacity-concurrency 0 --rate none      (one process against several, at c1024)
     .venv/bin/python benchmarks/client_overhead.py --json > run1.json   (... run2.json, run3.json), then
     .venv/bin/python benchmarks/client_overhead.py --render run1.json run2.json run3.json   (median and range)
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import resource
import shlex
import shutil
import signal
import sys
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from overhead.measures import Point, Row, Run, summarize, trace_schedule
from overhead.output import add_ratios, markdown, markdown_over_runs
from overhead.processes import PacedServer, ToolFailed, become_subreaper, run_tool
from overhead.tools import DEFAULT_TOKENIZER, TOOLS, Setup, Specmeter, SpecmeterUnrecorded, Tool

from specmeter.data.traces.formats import read_trace

TRACE = Path(__file__).resolve().parents[1] / "examples" / "trace-mooncake.jsonl"


def parse_list(text: str, kind: Callable[[str], Any]) -> list[Any]:
    return [kind(x) for x in text.split(",") if x.strip()]


def say(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def parse_args() -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tools", default="specmeter,specmeter-unrecorded,vllm,aiperf,guidellm",
                    help="comma-separated, from: " + ", ".join(TOOLS))
    ap.add_argument("--concurrency", default="64,256,1024", help="closed-loop points ('' for none)")
    ap.add_argument("--requests", type=int, default=None,
                    help="N: each point runs N then 2N requests (default: max(--min-requests, "
                         "--requests-per-slot x concurrency), open loop: max(--min-requests, rate x --open-seconds))")
    ap.add_argument("--requests-per-slot", type=int, default=4)
    ap.add_argument("--repeats", type=int, default=1,
                    help="run the N, 2N pair this many times per tool and point (CPU per chunk: the fitted slope)")
    ap.add_argument("--min-requests", type=int, default=1000,
                    help="N floor: N x chunks must dwarf the noise of a tool's start-up CPU (AIPerf, GuideLLM: ~10 s)")
    ap.add_argument("--chunks", type=int, default=20, help="content chunks per request")
    ap.add_argument("--gap-ms", type=float, default=20.0, help="inter-chunk gap of the paced points")
    ap.add_argument("--ttft-ms", type=float, default=None, help="time to the first chunk (default: the gap)")
    ap.add_argument("--capacity-concurrency", type=int, default=256,
                    help="streams of the capacity point (gap 0); 0 skips it")
    ap.add_argument("--rate", default="own",
                    help="open loop: 'own': each tool at --rate-fraction of its own capacity (how well it holds "
                         "a schedule near its limit); 'shared': every tool at --rate-fraction of specmeter's "
                         "capacity; or request rates in req/s, comma-separated; 'none' skips it")
    ap.add_argument("--rate-fraction", type=float, default=0.8)
    ap.add_argument("--open-seconds", type=float, default=5.0)
    ap.add_argument("--trace", type=Path, default=TRACE,
                    help="trace case: specmeter's tools replay this trace's arrivals (any format specmeter reads), "
                         "sped up so its busiest second offers --trace-peak-rate ('' skips it)")
    ap.add_argument("--trace-peak-rate", default="open",
                    help="the trace's peak rate in req/s, or 'open': specmeter's open-loop rate in this run")
    ap.add_argument("--api", choices=["chat", "completions"], default="chat")
    ap.add_argument("--tokenizer", type=Path, default=DEFAULT_TOKENIZER,
                    help="local Hugging Face tokenizer directory (the peers need one; never downloaded)")
    ap.add_argument("--timeout", type=float, default=1800.0, help="seconds per tool run")
    ap.add_argument("--workdir", type=Path, default=None, help="keep every tool's inputs, logs and outputs here")
    ap.add_argument("--extra-args", action="append", default=[], metavar="TOOL=ARGS",
                    help="more arguments for one tool's command line, e.g. aiperf='--use-server-token-count' "
                         "(repeatable)")
    ap.add_argument("--json", action="store_true", help="print JSON instead of the Markdown table")
    ap.add_argument("--render", type=Path, nargs="+", metavar="JSON",
                    help="only print the Markdown table of a --json output; of several: the median (min-max) of "
                         "each figure over them")
    args = ap.parse_args()
    if args.render:
        return args
    args.tool_args = {}
    for item in args.extra_args:
        name, sep, rest = item.partition("=")
        if not sep or name not in TOOLS:
            ap.error(f"--extra-args {item!r}: expected TOOL=ARGS with TOOL one of {', '.join(TOOLS)}")
        args.tool_args[name] = [*args.tool_args.get(name, []), *shlex.split(rest)]
    unknown = [t for t in parse_list(args.tools, str) if t not in TOOLS]
    if unknown:
        ap.error(f"unknown tool(s) {', '.join(unknown)} (known: {', '.join(TOOLS)})")
    if str(args.trace) in ("", ".") or (args.rate == "none" and args.trace_peak_rate == "open"):
        args.trace = None
    elif not args.trace.is_file():
        ap.error(f"--trace {args.trace}: no such file ('' skips the trace case)")
    if not args.tokenizer.is_dir():
        ap.error(f"--tokenizer {args.tokenizer} is not a directory")
    return args


class Bench:
    """Every tool at every point against one paced server; rows in the order they ran."""

    def __init__(self, args: argparse.Namespace, tools: list[Tool], server: PacedServer, work: Path) -> None:
        self.args, self.tools, self.server, self.work = args, tools, server, work
        self.setup = Setup(url=server.url, chunks=args.chunks, api=args.api, tokenizer=args.tokenizer.resolve())
        self.gap_s = args.gap_ms / 1e3
        self.ttft_s = self.gap_s if args.ttft_ms is None else args.ttft_ms / 1e3
        self.rows: list[Row] = []

    def n_for(self, slots: float) -> int:
        return int(self.args.requests or max(self.args.min_requests, round(slots)))

    def closed_points(self) -> list[Point]:
        a = self.args
        points = []
        if a.capacity_concurrency > 0:
            c = a.capacity_concurrency
            points.append(Point("capacity", self.n_for(a.requests_per_slot * c), 0.0, 0.0, concurrency=c))
        for c in parse_list(a.concurrency, int):
            points.append(Point("closed", self.n_for(a.requests_per_slot * c), self.gap_s, self.ttft_s, concurrency=c))
        return points

    def capacity(self, tool: str) -> float | None:
        return next((r.chunks_per_s for r in self.rows if r.tool == tool and r.point.startswith("capacity")
                     and r.chunks_per_s), None)

    def open_points(self) -> list[tuple[Point, list[Tool]]]:
        """After the closed points, which measure the capacities the 'own' and 'shared' rates derive from."""
        a = self.args
        frac = a.rate_fraction

        def point(rate: float, group: str | None = None) -> Point:
            rate = round(rate, 1)
            return Point("open", self.n_for(rate * a.open_seconds), self.gap_s, self.ttft_s, rate=rate, group=group)

        if a.rate == "none":
            return []
        if a.rate == "shared":
            cap = self.capacity(Specmeter.name)
            if cap is None:
                say("skipping the open loop: --rate shared needs specmeter's capacity point")
                return []
            return [(point(frac * cap / a.chunks), self.tools)]
        if a.rate == "own":
            out = []
            # The unrecorded twin runs with specmeter, on its schedule: the cost of recording is read at one rate.
            twin = [t for t in self.tools if isinstance(t, SpecmeterUnrecorded)]
            for tool in self.tools:
                if tool in twin:
                    continue
                cap = self.capacity(tool.name)
                if cap is None:
                    say(f"skipping {tool.name}'s open loop: --rate own needs its capacity point")
                    continue
                group = [tool, *twin] if tool.name == Specmeter.name else [tool]
                out.append((point(frac * cap / a.chunks, f"open {frac:g}x own capacity"), group))
            return out
        return [(point(r), self.tools) for r in parse_list(a.rate, float)]

    def trace_point(self) -> Point | None:
        """The trace case, after the open loop: the trace's arrivals sped up so its busiest second offers the peak
        rate (by default specmeter's open-loop rate here, so its figures stand beside the open loop's), N requests
        the open loop's count at that rate."""
        a = self.args
        if a.trace is None:
            return None
        if a.trace_peak_rate == "open":
            peak = next((r.rate for r in self.rows if r.tool == Specmeter.name and r.point.startswith("open")
                         and r.rate), None)
            if peak is None:
                say("skipping the trace case: --trace-peak-rate open needs specmeter's open-loop point")
                return None
        else:
            peak = float(a.trace_peak_rate)
        arrivals = [row.arrival_s for row in read_trace(a.trace).rows]
        n = self.n_for(peak * a.open_seconds)
        return Point("trace", n, self.gap_s, self.ttft_s, rate=peak, group=f"trace {a.trace.name} at peak {peak:g}/s",
                     schedule=trace_schedule(arrivals, 2 * n, peak))

    def run_point(self, point: Point, tools: Sequence[Tool]) -> None:
        """Every tool's N and 2N runs (repeated). The tools take turns at each request count, in reverse order at
        every other one, so load from elsewhere on the machine, which drifts, and what a run leaves behind for the
        next (the tool before it, its teardown), fall on all of them alike."""
        counts = [n for _ in range(self.args.repeats) for n in (point.requests, 2 * point.requests)]
        runs: dict[str, list[Run]] = {t.name: [] for t in tools}
        failed: dict[str, str] = {}
        for k, n in enumerate(counts):
            for tool in (t for t in (tools if k % 2 == 0 else tools[::-1]) if t.name not in failed):
                say(f"{point.label}: {tool.name}, {n} requests ...")
                name = f"{point.label}-{tool.name}-{n}" + (f"-{k // 2 + 1}" if self.args.repeats > 1 else "")
                slug = re.sub(r"[^a-z0-9]+", "-", name.lower())
                try:
                    r = run_tool(tool, self.setup, self.server, point, n, self.work / slug, self.args.timeout,
                                 self.args.tool_args.get(tool.key, []))
                except ToolFailed as exc:
                    say(f"  {tool.name} failed: {exc}")
                    failed[tool.name] = f"failed: {str(exc)[:300]}"
                    continue
                runs[tool.name].append(r)
                say(f"  {r.chunks} chunks ({r.sustained_cps:.0f}/s sustained) in {r.span_s:.2f} s, tool CPU "
                    f"{r.cpu_s:.2f} s, server CPU {r.server_cpu_s:.2f} s, wall {r.wall_s:.1f} s, "
                    f"matched {r.matched}, failed {r.failed}")
        for tool in tools:
            if tool.name in failed:
                self.rows.append(Row(tool=tool.name, point=point.label, requests=point.requests, rate=point.rate,
                                     error=failed[tool.name]))
            else:
                self.rows.append(summarize(tool.name, point, runs[tool.name]))

    def meta(self) -> dict[str, Any]:
        a = self.args
        return {
            "settings": {"chunks": a.chunks, "gap_ms": a.gap_ms, "ttft_ms": 1e3 * self.ttft_s, "api": a.api,
                         "tokenizer": str(a.tokenizer), "workdir": str(self.work), "extra_args": a.tool_args},
            "versions": {t.name: t.version() for t in self.tools},
            "machine": f"{os.cpu_count()} CPUs, {platform.machine()}, Python {platform.python_version()}",
        }


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt(signal.Signals(signum).name)


def main() -> None:
    args = parse_args()
    if args.render:
        runs = []
        for path in args.render:
            saved = json.loads(path.read_text())
            rows = [Row(**{**r, "cpu_ratio": None, "chunks_ratio": None}) for r in saved.pop("results")]
            add_ratios(rows)
            runs.append(rows)
        print(markdown(runs[0], saved) if len(runs) == 1 else markdown_over_runs(runs, saved))
        return
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))  # 1024 streams need more than 1024 sockets
    become_subreaper()
    signal.signal(signal.SIGTERM, _interrupt)  # like Ctrl-C: stop the running tool and the server first
    signal.signal(signal.SIGINT, _interrupt)  # even when started in the background (SIGINT ignored)
    tools: list[Tool] = []
    for name in parse_list(args.tools, str):
        tool = TOOLS[name]()
        why = tool.missing()
        if why:
            say(f"skipping {tool.name}: {why}")
        else:
            tools.append(tool)
    if not tools:
        sys.exit("no tool can run")
    work = args.workdir or Path(tempfile.mkdtemp(prefix="client-overhead-"))
    work.mkdir(parents=True, exist_ok=True)
    server = PacedServer(work, args.chunks)
    try:
        bench = Bench(args, tools, server, work)
        for point in bench.closed_points():
            bench.run_point(point, tools)
        for point, some in bench.open_points():
            bench.run_point(point, some)
        trace = bench.trace_point()
        if trace is not None:  # specmeter's own tools: the peers replay traces their own ways, or not at all
            bench.run_point(trace, [t for t in tools if isinstance(t, Specmeter)])
    finally:
        server.stop()
    add_ratios(bench.rows)
    if args.json:
        print(json.dumps({**bench.meta(), "results": [asdict(r) for r in bench.rows]}, indent=2))
    else:
        print(markdown(bench.rows, bench.meta()))
    if args.workdir is None:
        if any(r.error for r in bench.rows):
            say(f"kept {work}: the failed tools' logs are there")
        else:
            shutil.rmtree(work, ignore_errors=True)



if __name__ == "__main__":
    try:
        main()
    except KeyboardInterrupt as exc:
        sys.exit(f"interrupted ({exc or 'SIGINT'}): the running tool and the paced server were stopped")
