"""How busy the machine was through one round of a point, with work other than the run's own: what the host's
kernel counted (CPU time, steal, load, clock) and, on a GPU node, what nvidia-smi saw. Read by
telemetry/host.py around each round's traffic, stored in the round's captures (so `report --recompute` sees it),
judged by analysis/host.py.

The run's own processes are specmeter, every process it started (servers, client processes, their children) and
the servers it attached to on this machine; everything else is foreign.
"""

from __future__ import annotations

from pydantic import BaseModel, Field


class GpuReading(BaseModel):
    """One GPU at the end of the round, as nvidia-smi reported it (None: not reported)."""

    index: int
    sm_clock_mhz: float | None = None
    max_sm_clock_mhz: float | None = None
    temperature_c: float | None = None
    power_w: float | None = None
    utilization: float | None = Field(default=None, description="Share of the last sample period a kernel ran, 0-1.")
    foreign_pids: list[int] = Field(default_factory=list, description="Compute processes on it that are not the "
                                    "run's own.")


class HostReading(BaseModel):
    """CPU time the machine spent through one round (a wall interval), split into the run's own and foreign."""

    wall_s: float = Field(ge=0)
    cpus: int = Field(ge=1, description="Online CPUs: the machine's capacity is wall_s x cpus CPU-seconds.")
    busy_cpu_s: float = Field(ge=0, description="User, nice and system time of every process (the kernel's "
                              "/proc/stat).")
    own_cpu_s: float = Field(ge=0, description="Of that, the run's own processes (each one's /proc/<pid>/stat, "
                             "children it reaped included).")
    niced_cpu_s: float = Field(ge=0, description="Foreign time at lowered priority (nice > 0): it runs on what the "
                               "run leaves idle, so it is shown, not judged.")
    steal_s: float = Field(default=0.0, ge=0, description="Time a hypervisor gave this machine's CPUs to others.")
    load_avg: float | None = Field(default=None, description="The 1-minute load average at the end of the round.")
    cpu_mhz: float | None = Field(default=None, description="Mean CPU clock at the end of the round, where "
                                  "readable.")
    gpus: list[GpuReading] | None = Field(default=None, description="None: no nvidia-smi on this machine.")

    @property
    def foreign_cpu_s(self) -> float:
        """CPU time of other work at normal priority or above, plus steal: what took CPU the run could have used."""
        return max(0.0, self.busy_cpu_s - self.own_cpu_s - self.niced_cpu_s) + self.steal_s

    @property
    def foreign_share(self) -> float:
        """foreign_cpu_s as a share of the machine's capacity over the round (0: nothing else ran; 0.5: one of two
        cores kept busy)."""
        capacity = self.wall_s * self.cpus
        return min(1.0, self.foreign_cpu_s / capacity) if capacity > 0 else 0.0

    @property
    def foreign_gpu_pids(self) -> list[int]:
        return sorted({pid for gpu in self.gpus or [] for pid in gpu.foreign_pids})
