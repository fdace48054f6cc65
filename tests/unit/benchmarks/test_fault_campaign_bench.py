"""benchmarks/fault_campaign.py's check that no launched server outlives specmeter: the servers a summary names
(every instance), known by pid and kernel start time, so a pid the kernel gave to another process is not one."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest
from bench_script import load

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def campaign() -> ModuleType:
    return load("fault_campaign")


def _started(pid: int) -> int:
    stat = Path(f"/proc/{pid}/stat").read_text(encoding="utf-8")
    return int(stat[stat.rindex(")") + 2:].split()[19])


def test_every_launched_instance_is_found_and_a_running_one_counted(campaign: ModuleType, tmp_path: Path) -> None:
    with subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"]) as server:
        try:
            started = _started(server.pid)
            summary = {"configs": [
                {"server_pid": server.pid, "server_started": started,
                 "instance_servers": [{"server_pid": 4_000_000, "server_started": 1}]},
                {"server_pid": None},  # an attached server: nothing launched
            ]}
            (tmp_path / "summary.json").write_text(json.dumps(summary), encoding="utf-8")
            found = campaign.launched(tmp_path)
            assert found == {(server.pid, started), (4_000_000, 1)}
            assert campaign.still_running(server.pid, started)
            assert not campaign.still_running(server.pid, started + 1)  # the pid, but another process's
            assert campaign.left_running(found, grace_s=0.0) == 1
        finally:
            server.kill()
            server.wait()
    assert campaign.left_running(found, grace_s=0.0) == 0
