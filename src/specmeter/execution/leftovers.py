"""Servers a killed run left running, found and stopped when the run resumes.

A launched server gets SIGTERM when specmeter dies (PR_SET_PDEATHSIG, engines/launcher.py), and its process group
is killed on every exit specmeter sees. An engine that ignores or hangs on that SIGTERM outlives a SIGKILLed
specmeter, holding its memory and cores, which the resumed run's own servers and measurements then share. The
summary records each launched server's process (group) id and when the kernel started it, so `resume` finds such
a server and stops it before starting its own. Only a process that is the recorded one (the same pid and start
time: a pid the kernel handed on is not it) and no running specmeter owns (its parent is not one: a demo's
verification may still use its sweep's servers) is stopped.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from specmeter.schemas.results import RunSummary

PROC = Path("/proc")
GRACE_S = 20.0


def _stat(pid: int) -> list[str] | None:
    """/proc/PID/stat's fields from the third (state) on; None where the process is gone or there is no /proc.
    The command name (field 2) is in parentheses and may hold spaces: the fields are counted after its closing
    one."""
    try:
        stat = (PROC / str(pid) / "stat").read_text()
    except OSError:
        return None
    return stat[stat.rindex(")") + 2:].split()


def start_ticks(pid: int) -> int | None:
    """When the kernel started process `pid`, in clock ticks since boot (field 22); None where it is gone."""
    fields = _stat(pid)
    return None if fields is None else int(fields[19])


def _parent(pid: int) -> int | None:
    fields = _stat(pid)
    return None if fields is None else int(fields[1])


def _owned_by_specmeter(pid: int) -> bool:
    """Whether the process's parent is a running specmeter (whose server it still is)."""
    parent = _parent(pid)
    if parent is None or parent <= 1:
        return False
    try:
        argv = (PROC / str(parent) / "cmdline").read_bytes().decode(errors="replace").split("\0")
    except OSError:
        return False
    # `specmeter ...`, `python -m specmeter ...`, `python -m specmeter.cli ...`
    return any(Path(arg).name == "specmeter" or arg.startswith("specmeter.") for arg in argv)


def recorded(summary: RunSummary) -> Iterator[tuple[str, int, int]]:
    """(name, pid, start ticks) of every launched server the summary records with its start."""
    for config in summary.configs:
        if config.server_pid is not None and config.server_started is not None:
            yield config.config_id, config.server_pid, config.server_started
        for extra in config.instance_servers:
            if extra.server_pid is not None and extra.server_started is not None:
                yield f"{config.config_id}.{extra.instance + 1}", extra.server_pid, extra.server_started


def stop_leftovers(summary: RunSummary, note: Callable[[str], None]) -> list[int]:
    """Stop the recorded servers still running with no specmeter owning them (SIGTERM to the group, SIGKILL after
    GRACE_S); each one stopped is noted in one line. Returns their pids."""
    stopped: list[int] = []
    for name, pid, ticks in dict.fromkeys(recorded(summary)):
        if start_ticks(pid) != ticks or _owned_by_specmeter(pid):
            continue
        note(f"server {name}: stopping the server (pid {pid}) an earlier, killed run of this directory left "
             "running, so that it shares no cores or memory with this run's")
        _stop_group(pid)
        stopped.append(pid)
    return stopped


def _stop_group(pgid: int) -> None:
    for sig, wait_s in ((signal.SIGTERM, GRACE_S), (signal.SIGKILL, 5.0)):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, sig)
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline and _running(pgid):
            time.sleep(0.1)
        if not _running(pgid):
            return


def _running(pid: int) -> bool:
    """Alive and not a zombie (a stopped process whose parent, gone, no longer reaps it is reaped by init)."""
    fields = _stat(pid)
    return fields is not None and fields[0] != "Z"
