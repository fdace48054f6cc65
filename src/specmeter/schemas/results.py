"""The versioned run summary written to summary.json (machines read it; reports render it)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

from specmeter.metrics.categories import CategoryBreakdown
from specmeter.metrics.latency import LatencySummary
from specmeter.metrics.sd_summary import SDSummary

SCHEMA_VERSION = 1


class LevelResult(BaseModel):
    """One load level (a concurrency) of one phase."""

    concurrency: int
    latency: LatencySummary
    sd: SDSummary
    categories: CategoryBreakdown | None = None
    resumed: bool = Field(default=False, description="Finished by --resume on a new server: wall time and "
                          "throughput span two servers; SD comes from per-request stats.")


class PhaseResult(BaseModel):
    """One engine configuration measured over all levels: e.g. 'sd' or 'baseline' (speculation off)."""

    name: str
    spec_label: str
    spec: dict[str, Any]
    workload: str = Field(default="main", description="Which workload this phase sent (compare-workloads).")
    engine_version: str | None = None
    server_command: list[str] | None = None
    server_log: str | None = None
    server_pid: int | None = Field(default=None, description="Process (group) id of the launched server.")
    startup_s: float | None = None
    levels: list[LevelResult] = Field(default_factory=list)

    def level(self, concurrency: int) -> LevelResult | None:
        return next((lv for lv in self.levels if lv.concurrency == concurrency), None)


class Ratio(BaseModel):
    value: float | None
    ci95_low: float | None = None
    ci95_high: float | None = None


class SpeedupResult(BaseModel):
    """SD against the same engine with speculation off, at one concurrency, on identical work."""

    concurrency: int
    workload: str = "main"
    sd_phase: str = "sd"
    baseline_phase: str = "baseline"
    output_throughput: Ratio = Field(description="SD output tok/s / baseline output tok/s.")
    tpot: Ratio = Field(description="Baseline mean TPOT / SD mean TPOT (>1 means SD is faster).")
    ttft: Ratio = Field(description="Baseline mean TTFT / SD mean TTFT.")
    same_work: bool = Field(description="Both phases completed the same requests.")
    note: str | None = None


class RunSummary(BaseModel):
    schema_version: int = SCHEMA_VERSION
    specmeter_version: str
    created_utc: str
    status: Literal["running", "complete", "incomplete"] = "running"
    incomplete_reason: str | None = None
    command: list[str] = Field(default_factory=list)
    config: dict[str, Any] = Field(default_factory=dict)
    workload: dict[str, Any] = Field(default_factory=dict)
    models: dict[str, Any] = Field(default_factory=dict, description="Model paths and content hashes.")
    environment: dict[str, Any] = Field(default_factory=dict)
    phases: list[PhaseResult] = Field(default_factory=list)
    speedup: list[SpeedupResult] = Field(default_factory=list)
    wall_s: float | None = None

    def phase(self, name: str) -> PhaseResult | None:
        return next((p for p in self.phases if p.name == name), None)
