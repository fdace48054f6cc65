"""The paced server, and one tool run against it as a process tree whose CPU is all counted."""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import re
import resource
import shlex
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from overhead.measures import Point, Run, compare, schedule_lags, send_lags, sustained_rate
from overhead.tools import MODEL, ROOT, Setup, Tool


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
            [sys.executable, "-m", "fakeengine.paced", "--port", str(self.port), "--chunks", str(chunks),
             "--model", MODEL], stdout=self._log, stderr=subprocess.STDOUT, cwd=ROOT / "tests")
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
    elif point.kind == "trace":
        run.send_lag = schedule_lags([e["arrival"] for e in log], point.schedule[:n])
    if matched < len(records) * 0.9:
        raise ToolFailed(f"only {matched} of its {len(records)} records matched the server's log; see {work}")
    return run

