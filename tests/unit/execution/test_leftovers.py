"""A server a killed run left running is stopped when the run resumes (execution/leftovers.py): only the recorded
process itself (pid and start time), and only where no running specmeter owns it."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest

from specmeter.execution import leftovers
from specmeter.execution.leftovers import start_ticks, stop_leftovers
from specmeter.plans.run import BASELINE
from specmeter.schemas.plan import Role
from specmeter.schemas.results import ConfigResult, InstanceServer, RunSummary

pytestmark = pytest.mark.timeout(60)

# A "server" that ignores SIGTERM, as a hung engine does, in a process group of its own.
STUBBORN = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(60)"
SPAWN = ("import subprocess, sys, time; p = subprocess.Popen([sys.executable, '-c', {script!r}], process_group=0); "
         "print(p.pid, flush=True); time.sleep({linger})")


def _server(linger: float, *tag: str) -> tuple[int, subprocess.Popen[str]]:
    """The stubborn server's pid, spawned by a parent that exits at once (the server is then an orphan, as after
    a SIGKILLed run) or stays `linger` seconds; `tag`: more arguments on the parent's command line."""
    parent = subprocess.Popen([sys.executable, "-c", SPAWN.format(script=STUBBORN, linger=linger), *tag],
                              stdout=subprocess.PIPE, text=True)
    assert parent.stdout is not None
    return int(parent.stdout.readline()), parent


@pytest.fixture
def quick(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[int]]:
    monkeypatch.setattr(leftovers, "GRACE_S", 0.5)
    pids: list[int] = []
    yield pids
    for pid in pids:  # whatever a failed test left
        try:
            os.killpg(pid, 9)
        except (ProcessLookupError, PermissionError):
            pass


def _summary(servers: list[tuple[int, int | None]]) -> RunSummary:
    (pid, ticks), *more = servers
    result = ConfigResult(config_id=BASELINE, role=Role.baseline, spec_label="off", server_pid=pid,
                          server_started=ticks,
                          instance_servers=[InstanceServer(instance=i + 1, server_pid=p, server_started=t)
                                            for i, (p, t) in enumerate(more)])
    return RunSummary.model_construct(configs=[result])


def _gone(pid: int, within_s: float = 10.0) -> bool:
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        if not leftovers._running(pid):
            return True
        time.sleep(0.05)
    return False


def test_an_orphaned_server_of_the_killed_run_is_stopped_even_if_it_ignores_sigterm(quick: list[int]) -> None:
    first, parent = _server(0)
    second, other = _server(0)
    quick += [first, second]
    parent.wait(10)
    other.wait(10)
    said: list[str] = []
    summary = _summary([(first, start_ticks(first)), (second, start_ticks(second))])
    assert stop_leftovers(summary, said.append) == [first, second]
    assert _gone(first) and _gone(second)
    assert len(said) == 2 and f"pid {first}" in said[0] and said[1].startswith("server baseline.2:")


def test_a_process_that_only_has_the_recorded_pid_is_left_alone(quick: list[int]) -> None:
    pid, parent = _server(0)
    quick.append(pid)
    parent.wait(10)
    ticks = start_ticks(pid)
    assert ticks is not None
    assert stop_leftovers(_summary([(pid, ticks + 1)]), lambda _: None) == []  # another start: another process
    assert not _gone(pid, within_s=0.3)


def test_a_server_a_running_specmeter_still_owns_is_left_alone(quick: list[int]) -> None:
    """A demo's verification still runs on its sweep's servers while the sweep's directory is resumed."""
    pid, parent = _server(30, "specmeter")  # its command line as `python -m specmeter ...` shows
    quick.append(pid)
    try:
        assert stop_leftovers(_summary([(pid, start_ticks(pid))]), lambda _: None) == []
        assert not _gone(pid, within_s=0.3)
    finally:
        parent.kill()


def test_no_proc_no_start_time() -> None:
    assert start_ticks(2**22 + 12345) is None  # above pid_max: never a process
    assert start_ticks(os.getpid()) is not None
