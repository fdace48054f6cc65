"""The host's own conditions through a round: how much CPU went to work other than the run's own, read from the
kernel's counters before and after the round's traffic (never inside the timing loop), and what nvidia-smi says of
the GPUs where there is one.

Foreign CPU time is the machine's busy time (/proc/stat: user, nice, system) less the run's own processes' (each
one's /proc/<pid>/stat, with the time of children it reaped): specmeter, every process it started, and the
processes listening on the loopback ports of the servers it attached to (a server the user started on this
machine is part of what is measured, not a disturbance). Interrupt time is left out on both sides: the loopback
traffic of the run itself lands there, in no process. On a machine without /proc (or with
SPECMETER_HOST_PROBE=off, for a /proc that is not the host's) nothing is read and the round has no reading.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from specmeter.schemas.host import GpuReading, HostReading

PROC = Path("/proc")
OFF_ENV = "SPECMETER_HOST_PROBE"  # "off": read nothing (a container whose /proc is not the host's)
LOOPBACK = {"127.0.0.1", "localhost", "::1", "[::1]"}
_TCP_LISTEN = "0A"
_NVIDIA_SMI_TIMEOUT_S = 5.0


@dataclass(frozen=True)
class _Snapshot:
    at: float  # time.perf_counter()
    busy: float  # CPU-seconds, every process
    niced: float  # CPU-seconds at nice > 0, every process
    steal: float
    own: float  # CPU-seconds of the run's own processes
    own_niced: float  # of which at nice > 0


def _ticks() -> float:
    return float(os.sysconf("SC_CLK_TCK")) if hasattr(os, "sysconf") else 100.0


def _system_times(hz: float) -> tuple[float, float, float] | None:
    """(busy, niced, steal) CPU-seconds since boot, all CPUs."""
    try:
        first = (PROC / "stat").read_text().splitlines()[0].split()
    except (OSError, IndexError):
        return None
    values = [float(v) for v in first[1:]]
    user, nice, system = values[0], values[1], values[2]
    steal = values[7] if len(values) > 7 else 0.0
    return (user + nice + system) / hz, nice / hz, steal / hz


def _process_stats() -> dict[int, tuple[int, float, int]]:
    """pid -> (parent pid, CPU ticks of it and its reaped children, nice) for every process."""
    out: dict[int, tuple[int, float, int]] = {}
    for entry in PROC.iterdir() if PROC.is_dir() else []:
        if not entry.name.isdigit():
            continue
        try:
            text = (entry / "stat").read_text()
        except OSError:  # gone between the listing and the read
            continue
        fields = text[text.rfind(")") + 2:].split()  # after the command name, which may hold spaces
        try:
            # fields[0] is field 3 (state): ppid 4, utime 14, stime 15, cutime 16, cstime 17, nice 19
            out[int(entry.name)] = (int(fields[1]), sum(float(f) for f in fields[11:15]), int(fields[16]))
        except (IndexError, ValueError):
            continue
    return out


def _tree(roots: Iterable[int], stats: dict[int, tuple[int, float, int]]) -> set[int]:
    """The roots and every descendant of them."""
    children: dict[int, list[int]] = {}
    for pid, (ppid, _, _) in stats.items():
        children.setdefault(ppid, []).append(pid)
    seen: set[int] = set()
    todo = [r for r in roots if r in stats]
    while todo:
        pid = todo.pop()
        if pid not in seen:
            seen.add(pid)
            todo.extend(children.get(pid, []))
    return seen


def loopback_ports(urls: Sequence[str]) -> set[int]:
    """The ports of the URLs that point at this machine."""
    ports: set[int] = set()
    for url in urls:
        parts = urlsplit(url)
        if parts.hostname in LOOPBACK or (parts.hostname or "").startswith("127."):
            with contextlib.suppress(ValueError):
                ports.add(parts.port or (443 if parts.scheme == "https" else 80))
    return ports


def listeners(ports: set[int]) -> set[int]:
    """The pids holding a listening TCP socket on any of `ports` (what serves an attached loopback URL)."""
    inodes: set[str] = set()
    for table in ("tcp", "tcp6"):
        try:
            lines = (PROC / "net" / table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            cols = line.split()
            if len(cols) > 9 and cols[3] == _TCP_LISTEN and int(cols[1].rsplit(":", 1)[1], 16) in ports:
                inodes.add(f"socket:[{cols[9]}]")
    pids: set[int] = set()
    if not inodes:
        return pids
    for entry in PROC.iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError):
            for fd in (entry / "fd").iterdir():
                with contextlib.suppress(OSError):
                    if os.readlink(fd) in inodes:
                        pids.add(int(entry.name))
                        break
    return pids


def _cpu_mhz() -> float | None:
    try:
        found = [float(line.split(":", 1)[1]) for line in (PROC / "cpuinfo").read_text().splitlines()
                 if line.startswith("cpu MHz")]
    except (OSError, ValueError):
        return None
    return sum(found) / len(found) if found else None


def _load_avg() -> float | None:
    try:
        return float((PROC / "loadavg").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def _smi(args: list[str]) -> list[list[str]] | None:
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return None
    try:
        out = subprocess.run([exe, *args, "--format=csv,noheader,nounits"], capture_output=True, text=True,
                             timeout=_NVIDIA_SMI_TIMEOUT_S, check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    return [[c.strip() for c in line.split(",")] for line in out.splitlines() if line.strip()]


def _number(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:  # "[N/A]", "[Not Supported]"
        return None


def gpu_readings(own: set[int]) -> list[GpuReading] | None:
    """Each GPU's clocks, temperature, power and utilization, and the compute processes on it that are not `own`
    (None: no nvidia-smi, or it did not answer)."""
    gpus = _smi(["--query-gpu=index,uuid,clocks.sm,clocks.max.sm,temperature.gpu,power.draw,utilization.gpu"])
    if gpus is None:
        return None
    apps = _smi(["--query-compute-apps=gpu_uuid,pid"]) or []
    out = []
    for row in gpus:
        if len(row) < 7 or _number(row[0]) is None:
            continue
        util = _number(row[6])
        foreign = sorted(int(p) for uuid, p, *_ in apps if uuid == row[1] and p.isdigit() and int(p) not in own)
        out.append(GpuReading(index=int(float(row[0])), sm_clock_mhz=_number(row[2]), max_sm_clock_mhz=_number(row[3]),
                              temperature_c=_number(row[4]), power_w=_number(row[5]),
                              utilization=util / 100.0 if util is not None else None, foreign_pids=foreign))
    return out


class HostProbe:
    """`start()` before a round's traffic, `stop()` after it: the HostReading of the interval between (None
    where the host cannot be read). `urls`: the servers the round sends to; those on loopback count as the run's
    own."""

    def __init__(self, urls: Sequence[str] = ()) -> None:
        self.enabled = os.environ.get(OFF_ENV, "").lower() != "off" and (PROC / "stat").is_file()
        self.hz = _ticks()
        self.ports = loopback_ports(urls)
        self._roots: set[int] = set()
        self._before: _Snapshot | None = None

    def _own_roots(self) -> set[int]:
        if not self._roots:  # once per round: a server's pid does not change while it runs
            self._roots = {os.getpid(), *(listeners(self.ports) if self.ports else set())}
        return self._roots

    def _snapshot(self) -> tuple[_Snapshot, set[int]] | None:
        system = _system_times(self.hz)
        if system is None:
            return None
        stats = _process_stats()
        own = _tree(self._own_roots(), stats)
        own_ticks = sum(stats[p][1] for p in own)
        own_niced = sum(stats[p][1] for p in own if stats[p][2] > 0)
        busy, niced, steal = system
        return _Snapshot(time.perf_counter(), busy, niced, steal, own_ticks / self.hz, own_niced / self.hz), own

    def start(self) -> None:
        if self.enabled:
            taken = self._snapshot()
            self._before = taken[0] if taken is not None else None

    def stop(self) -> HostReading | None:
        before, self._before = self._before, None
        if before is None:
            return None
        taken = self._snapshot()
        if taken is None:
            return None
        after, own = taken
        own_s = max(0.0, after.own - before.own)
        return HostReading(wall_s=max(0.0, after.at - before.at), cpus=os.cpu_count() or 1,
                           busy_cpu_s=max(0.0, after.busy - before.busy), own_cpu_s=own_s,
                           niced_cpu_s=max(0.0, (after.niced - before.niced) - (after.own_niced - before.own_niced)),
                           steal_s=max(0.0, after.steal - before.steal), load_avg=_load_avg(), cpu_mhz=_cpu_mhz(),
                           gpus=gpu_readings(own))
