"""nvidia-smi while the check runs: the GPU's state about once a second (memory, load, power, clocks, temperature)
and each process's GPU memory, written as CSV beside the run, then read back into the summary.

Each server's memory comes from the process nvidia-smi lists under its pid (the run records each server's pid), so
the memory the servers really took stands beside what the placement rule gave them.
"""

from __future__ import annotations

import csv
import shutil
import subprocess
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

GPU_FIELDS = ("index", "name", "memory.used", "memory.total", "utilization.gpu", "power.draw", "clocks.sm",
              "clocks.mem", "temperature.gpu")
APP_FIELDS = ("pid", "used_memory")
GPU_CSV, APPS_CSV, QUERY_TXT = "nvidia-smi-gpu.csv", "nvidia-smi-apps.csv", "nvidia-smi-q.txt"


def available() -> bool:
    return shutil.which("nvidia-smi") is not None


def _query(args: Sequence[str]) -> list[list[str]]:
    """Rows of a --format=csv,noheader,nounits query (none where nvidia-smi fails)."""
    try:
        done = subprocess.run(["nvidia-smi", *args, "--format=csv,noheader,nounits"], capture_output=True, text=True,
                              timeout=20, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return []
    if done.returncode != 0:
        return []
    return [[cell.strip() for cell in line.split(",")] for line in done.stdout.splitlines() if line.strip()]


def gpus() -> list[dict[str, str]]:
    """One dict per GPU, keyed by GPU_FIELDS (the name may hold no comma: nvidia-smi's names do not)."""
    return [dict(zip(GPU_FIELDS, row)) for row in _query(["--query-gpu=" + ",".join(GPU_FIELDS)])
            if len(row) == len(GPU_FIELDS)]


class Sampler:
    """Reads nvidia-smi every `interval_s` in a thread into `out` (GPU_CSV, APPS_CSV), with `nvidia-smi -q` as it
    stood at the first start (QUERY_TXT). Used as a context manager around the sweep; a second sampler on the same
    folder (the sweep resumed) appends, and t_s (Unix seconds) keeps the calls' readings in one time line."""

    def __init__(self, out: Path, interval_s: float = 1.0) -> None:
        self.out = out
        self.interval_s = interval_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="nvidia-smi", daemon=True)

    def __enter__(self) -> Sampler:
        self.out.mkdir(parents=True, exist_ok=True)
        if not (self.out / QUERY_TXT).is_file():
            full = subprocess.run(["nvidia-smi", "-q"], capture_output=True, text=True, timeout=60, check=False)
            (self.out / QUERY_TXT).write_text(full.stdout, encoding="utf-8")
        self._thread.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self._stop.set()
        self._thread.join(timeout=30)

    def _loop(self) -> None:
        new_gpu, new_apps = (not (self.out / name).is_file() for name in (GPU_CSV, APPS_CSV))
        with (self.out / GPU_CSV).open("a", newline="", encoding="utf-8") as g, \
                (self.out / APPS_CSV).open("a", newline="", encoding="utf-8") as a:
            gpu_rows, app_rows = csv.writer(g), csv.writer(a)
            if new_gpu:
                gpu_rows.writerow(["t_s", *GPU_FIELDS])
            if new_apps:
                app_rows.writerow(["t_s", *APP_FIELDS])
            while not self._stop.is_set():
                t = f"{time.time():.1f}"
                for row in _query(["--query-gpu=" + ",".join(GPU_FIELDS)]):
                    gpu_rows.writerow([t, *row])
                for row in _query(["--query-compute-apps=" + ",".join(APP_FIELDS)]):
                    app_rows.writerow([t, *row])
                g.flush()
                a.flush()
                self._stop.wait(self.interval_s)


def number(text: str | None) -> float | None:
    """A reading as a number (None for nvidia-smi's '[N/A]', '[Not Supported]' and the like)."""
    try:
        return float(text) if text is not None else None
    except ValueError:
        return None


def read_csv(path: Path) -> list[dict[str, str]]:
    if not path.is_file():
        return []
    with path.open(newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


def peak_memory_by_pid(rows: Sequence[dict[str, str]]) -> dict[int, float]:
    """The most GPU memory (MiB) each process held at any reading."""
    peak: dict[int, float] = {}
    for row in rows:
        pid, used = number(row.get("pid")), number(row.get("used_memory"))
        if pid is not None and used is not None:
            peak[int(pid)] = max(peak.get(int(pid), 0.0), used)
    return peak


def gpu_summary(rows: Sequence[dict[str, str]]) -> list[dict[str, Any]]:
    """Per GPU over the readings: its name and memory, the peak memory used, power, SM clocks and load."""
    out: list[dict[str, Any]] = []
    for index in sorted({r["index"] for r in rows}):
        mine = [r for r in rows if r["index"] == index]

        def values(field: str, rows: list[dict[str, str]] = mine) -> list[float]:
            return [v for r in rows if (v := number(r.get(field))) is not None]

        used, power, sm, util, temp = (values(f) for f in ("memory.used", "power.draw", "clocks.sm",
                                                             "utilization.gpu", "temperature.gpu"))
        out.append({"index": index, "name": mine[0]["name"], "memory_total_mib": number(mine[0]["memory.total"]),
                    "readings": len(mine), "memory_used_peak_mib": max(used, default=None),
                    "power_peak_w": max(power, default=None), "sm_clock_mhz": [min(sm, default=None),
                                                                             max(sm, default=None)],
                    "utilization_mean_pct": sum(util) / len(util) if util else None,
                    "temperature_peak_c": max(temp, default=None)})
    return out
