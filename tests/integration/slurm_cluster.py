"""A real one-node Slurm cluster on this machine, for tests: munge, slurmctld and slurmd (Debian's slurm-wlm,
installed by scripts/setup-slurm.sh), configured here and started as plain processes this module owns and stops.
CPU only: the node is this machine's cores and memory, one partition. Needs root (the daemons run as root and
munged as its own user); without it, or without Slurm installed, the tests that use it fail and say so."""

from __future__ import annotations

import os
import pwd
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

ETC = Path("/etc/slurm")
MUNGE_KEY = Path("/etc/munge/munge.key")
DAEMONS = ("munged", "slurmctld", "slurmd", "sbatch", "squeue", "sinfo", "scancel")


def _slurm_conf(host: str, cpus: int, memory_mb: int) -> str:
    # Settings seen working here (README of the test setup): cgroup v1 process tracking so that scancel reaches
    # every process of a job (its servers too), DefMemPerCPU so that array tasks can share the node.
    return f"""ClusterName=specmeter-test
SlurmctldHost={host}
SlurmUser=root
AuthType=auth/munge
ProctrackType=proctrack/cgroup
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
DefMemPerCPU=1000
KillWait=10
ReturnToService=2
MpiDefault=none
StateSaveLocation=/var/spool/slurmctld
SlurmdSpoolDir=/var/spool/slurmd
SlurmctldPidFile=/run/slurmctld.pid
SlurmdPidFile=/run/slurmd.pid
SlurmctldLogFile=/var/log/slurm/slurmctld.log
SlurmdLogFile=/var/log/slurm/slurmd.log
NodeName={host} CPUs={cpus} RealMemory={memory_mb} State=UNKNOWN
PartitionName=debug Nodes={host} Default=YES MaxTime=INFINITE State=UP
"""


def _memory_mb() -> int:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemTotal:"):
            return int(line.split()[1]) // 1024 - 1024  # the rest for the system
    raise RuntimeError("no MemTotal in /proc/meminfo")


def _wait_idle(host: str, timeout_s: float = 90.0) -> None:
    deadline = time.monotonic() + timeout_s
    last = ""
    while time.monotonic() < deadline:
        done = subprocess.run(["sinfo", "-h", "-n", host, "-o", "%T"], capture_output=True, text=True)
        last = (done.stdout + done.stderr).strip()
        if done.returncode == 0 and last in ("idle", "mixed", "allocated"):
            return
        time.sleep(1.0)
    pytest.fail(f"the one-node Slurm cluster did not come up in {timeout_s:.0f} s (sinfo: {last!r}); see "
                "/var/log/slurm/slurmctld.log and slurmd.log")


@contextmanager
def slurm_cluster() -> Iterator[str]:
    """Configure and start the cluster, yield its partition, stop what was started here."""
    if os.geteuid() != 0:
        pytest.fail("the Slurm test starts slurmctld, slurmd and munged, which needs root; run it as root")
    missing = [d for d in DAEMONS if shutil.which(d) is None]
    if missing:
        pytest.fail(f"Slurm is not installed ({', '.join(missing)} missing); run scripts/setup-slurm.sh as root")
    host = socket.gethostname().split(".")[0]
    if subprocess.run(["scontrol", "ping"], capture_output=True).returncode == 0:
        pytest.fail("a Slurm controller already runs on this machine; stop it (the test configures its own)")
    ETC.mkdir(parents=True, exist_ok=True)
    (ETC / "slurm.conf").write_text(_slurm_conf(host, os.cpu_count() or 1, _memory_mb()))
    (ETC / "cgroup.conf").write_text("CgroupPlugin=cgroup/v1\n")
    for d in ("/var/spool/slurmctld", "/var/spool/slurmd", "/var/log/slurm"):
        Path(d).mkdir(parents=True, exist_ok=True)
    munge = pwd.getpwnam("munge")
    if not MUNGE_KEY.exists():
        MUNGE_KEY.parent.mkdir(parents=True, exist_ok=True)
        MUNGE_KEY.write_bytes(os.urandom(1024))
    os.chown(MUNGE_KEY, munge.pw_uid, munge.pw_gid)
    MUNGE_KEY.chmod(0o400)
    for d in ("/run/munge", "/var/lib/munge", "/var/log/munge"):
        Path(d).mkdir(parents=True, exist_ok=True)
        os.chown(d, munge.pw_uid, munge.pw_gid)
    started: list[subprocess.Popen[bytes]] = []
    logs = Path("/var/log/slurm")

    def start(argv: list[str], **kw: int) -> None:
        with (logs / f"{argv[0]}.out").open("ab") as out:  # the daemons' own chatter, away from the test's
            started.append(subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, start_new_session=True, **kw))

    try:
        start(["munged", "-F"], user=munge.pw_uid, group=munge.pw_gid)
        time.sleep(1.0)
        start(["slurmctld", "-D", "-c"])  # -c: a clean state, no jobs of an earlier cluster
        start(["slurmd", "-D"])
        _wait_idle(host)
        yield "debug"
    finally:
        for proc in reversed(started):  # only the daemons started here, by their own process
            proc.terminate()
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
