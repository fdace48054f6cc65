"""The versioned run summary written to summary.json (machines read it; reports render it)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

from specmeter.schemas.analysis import CapacityGap, Crossover, PointChoice, Speedup, VerifyPoint
from specmeter.schemas.host import HostReading
from specmeter.schemas.jobs import JobAttempt, RanOn
from specmeter.schemas.metrics import (
    CategoryBreakdown,
    Distribution,
    Goodput,
    LatencySummary,
    LengthBreakdown,
    PhaseBreakdown,
    ReplicaShare,
    RunningBatch,
    SteadyState,
)
from specmeter.schemas.offload import GpuOffload
from specmeter.schemas.plan import Plan, Role
from specmeter.schemas.ramp import AxisRamp
from specmeter.schemas.sd import SDSummary
from specmeter.schemas.search import AxisSearch

SCHEMA_VERSION = 2


class PointResult(BaseModel):
    """One configuration at one load point, one repeat."""

    point_id: str
    repeat: int = 0
    instance: int = Field(default=0, description="Which of the configuration's server instances measured it "
                          "(0-based; plan load.instances): rounds alternate between them, so a restart's effect is "
                          "measured.")
    started_s: float | None = Field(default=None, description="Seconds since the run started: shows drift "
                                    "between configurations measured at different times.")
    latency: LatencySummary
    steady: SteadyState | None = Field(default=None, description="None when the load never reached steady state.")
    running_batch: RunningBatch | None = Field(default=None, description="Attached to several replicas: pooled "
                                               "over their samples, so it is one replica's batch (what a dynamic-K "
                                               "table is keyed on), not their sum.")
    sd: SDSummary
    categories: CategoryBreakdown | None = None
    lengths: LengthBreakdown | None = Field(default=None, description="Acceptance per input-length bucket (None: no "
                                            "per-request SD stats).")
    goodput: Goodput | None = Field(default=None, description="Requests/s that met load.slo (None: no SLO given).")
    schedule_error: Distribution | None = Field(default=None, description="Seconds each scheduled send (an open "
                                                "loop's, a trace's) went out after its time: p50 and p99 say how "
                                                "well the load was offered (None: a closed loop).")
    resumed: bool = Field(default=False, description="Finished by --resume on a new server: wall time and "
                          "throughput span two servers; SD comes from per-request stats.")
    replicas: list[ReplicaShare] | None = Field(default=None, description="Attached to several replicas: each "
                                                "one's requests and batch (None: one server). SD sums their counters.")
    host: HostReading | None = Field(default=None, description="How busy the machine was with other work through "
                                     "the round that measured it (None: not read).")

    @property
    def measured(self) -> bool:
        """Some request finished with tokens: a point whose requests all failed (or whose usage said 0 tokens)
        measured nothing, so it is not finished (resume runs it again) and no speedup rests on it."""
        return self.latency.num_ok > 0 and self.latency.output_tokens > 0


class InstanceServer(BaseModel):
    """A configuration's second (third, ...) server instance (load.instances): its process and its log."""

    instance: int = Field(ge=1, description="0-based; instance 0 is the configuration's own server_* fields.")
    server_pid: int | None = None
    server_started: int | None = Field(default=None, description="When the kernel started it (clock ticks since "
                                       "boot): with the pid, what `resume` knows a server a killed run left by.")
    server_log: str | None = None
    startup_s: float | None = None


class ConfigResult(BaseModel):
    """What one plan configuration measured, and the server it ran on."""

    config_id: str
    role: Role
    spec_label: str
    workload: Literal["main", "random"] = "main"
    engine_version: str | None = None
    server_command: list[str] | None = None
    batch_limit: int | None = Field(default=None, description="The running-batch cap its launched server's command "
                                    "set, by its engine's own flag (None: attached, or the engine's default).")
    server_log: str | None = None
    served_model: str | None = Field(default=None, description="The model its server said it serves (requests "
                                     "name it); a resume against a server serving another is refused.")
    server_pid: int | None = Field(default=None, description="Process (group) id of the launched server.")
    server_started: int | None = Field(default=None, description="When the kernel started it (clock ticks since "
                                       "boot): with the pid, what `resume` knows a server a killed run left by.")
    startup_s: float | None = None
    kv_capacity_tokens: int | None = Field(default=None, description="Tokens its server's KV cache holds, as the "
                                           "engine logged it at start (None: attached, or not logged).")
    gpu_offload: GpuOffload | None = Field(default=None, description="The GPUs its launched server could use and "
                                           "the layers of each model it placed on them (None: attached, or an "
                                           "engine that logs no partial offload).")
    server_error: str | None = Field(default=None, description="Why its server did not start (the root-cause "
                                     "line of its log, and the log's path); the rest of the plan went on without it.")
    ran_on: RanOn | None = Field(default=None, description="Slurm: the node, job group and attempt its numbers "
                                 "came from (None: run locally).")
    instance_servers: list[InstanceServer] = Field(default_factory=list, description="Its server's further "
                                                   "instances, where load.instances > 1.")
    points: list[PointResult] = Field(default_factory=list)

    def point(self, point_id: str, repeat: int = 0) -> PointResult | None:
        return next((p for p in self.points if p.point_id == point_id and p.repeat == repeat), None)

    def repeats(self, point_id: str) -> list[PointResult]:
        return [p for p in self.points if p.point_id == point_id]

    def keep(self, result: PointResult) -> None:
        """A point's result, in place of an earlier one of the same point and repeat (a rerun of one that measured
        nothing), else added."""
        self.points = [p for p in self.points if (p.point_id, p.repeat) != (result.point_id, result.repeat)]
        self.points.append(result)


class Mismatch(BaseModel):
    """One request whose candidate output differs from the baseline's."""

    point_id: str
    repeat: int
    conversation_id: str
    turn: int
    first_diff: int = Field(description="Index of the first differing token (or character, see basis).")
    candidate_len: int
    baseline_len: int


class LosslessCheck(BaseModel):
    """At temperature 0 a correct speculative decoder emits exactly the baseline's tokens."""

    config_id: str
    baseline_id: str
    basis: Literal["token ids", "text"] = Field(description="token ids when the engine returned them, else text "
                                                "(first_diff then counts characters).")
    compared: int
    matched: int
    match_rate: float | None
    mismatches: list[Mismatch] = Field(default_factory=list, description="The first mismatches, at most 50.")


class HostConditions(BaseModel):
    """How quiet the machine was through the run's rounds (analysis.host judges each)."""

    rounds: int = Field(description="Rounds (point, repeat) whose host was read.")
    disturbed_share: float = Field(description="The share of the machine's CPU that foreign work must take for a "
                                   "round to be disturbed.")
    median_foreign_share: float = Field(description="Median over the rounds of the share foreign work took.")
    max_foreign_share: float
    niced_share: float = Field(default=0.0, description="The most lowered-priority foreign work took in a round "
                               "(shown, not judged: it runs on what the run leaves idle).")
    disturbed: list[str] = Field(default_factory=list, description="Each disturbed round and what disturbed it.")
    disturbed_points: list[str] = Field(default_factory=list)

    @property
    def quiet(self) -> bool:
        return not self.disturbed


class Analysis(BaseModel):
    """Every decision analysis made from the measurements; reports show these and recompute nothing."""

    speedups: list[Speedup] = Field(default_factory=list)
    crossovers: list[Crossover] = Field(default_factory=list)
    choices: list[PointChoice] = Field(default_factory=list)
    lossless: list[LosslessCheck] = Field(default_factory=list)
    lossless_note: str | None = Field(default=None, description="Why no lossless check ran, or how forced "
                                      "output lengths were produced.")
    verification: list[VerifyPoint] = Field(default_factory=list, description="verify runs: the dynamic config "
                                            "per point against the baseline and the best static config.")
    capacity: list[CapacityGap] = Field(default_factory=list, description="Compared configurations whose servers "
                                        "held KV caches more than 1% apart.")
    offload: list[str] = Field(default_factory=list, description="Servers with a GPU that kept layers on the CPU, "
                               "and configurations whose target was placed otherwise than their baseline's.")
    host: HostConditions | None = Field(default=None, description="How busy the machine was with other work "
                                        "through the rounds (None: not read).")
    phases: list[PhaseBreakdown] = Field(default_factory=list, description="A phase-shift workload: each "
                                         "configuration's phases at each point, over its measured rounds.")


class Look(BaseModel):
    """One look at an adaptive point's data, after a round: the confidence it read and what stayed open."""

    rounds: int = Field(description="Rounds finished when it looked.")
    confidence: float
    open: list[str] = Field(default_factory=list, description="The head-to-head comparisons still straddling "
                            "their threshold.")
    rested: list[str] = Field(default_factory=list, description="Configurations the next round left out: no "
                              "comparison still open could read them (before min_rounds, where nothing stops: no "
                              "decision the run is for reads them).")
    disturbed: list[str] = Field(default_factory=list, description="The rounds it set aside because other work "
                                 "disturbed them, and by what: the point ran on in their place.")


class PointSampling(BaseModel):
    """How much one point measured, and why it stopped there."""

    point_id: str
    precision: Literal["fixed", "adaptive"]
    rounds: int = Field(description="Rounds the point ran: the most any configuration ran (one that no open "
                        "comparison could read rested from the round after: see looks).")
    requests: int = Field(description="Requests each configuration sent at the point, over all rounds.")
    confidence: float = Field(description="The confidence the point's decisions are read at.")
    stopped: Literal["settled", "futile", "budget", "fixed"] | None = Field(
        default=None, description="settled: no decision could change with more data; futile: decisions stayed "
        "open, but none was likely to end as a win by the budget (load.futility), so more rounds would keep what "
        "the point keeps; budget: a budget ran out first; fixed: the fixed design's rounds; None: still running "
        "(or the run ended before its next look).")
    why: str = ""
    looks: list[Look] = Field(default_factory=list)

    def rested_from(self) -> dict[str, int]:
        """Each configuration that sat out rounds here, and the first round (1-based) it sat out: the round after
        the look that rested it (a later look may have brought it back)."""
        out: dict[str, int] = {}
        for look in sorted(self.looks, key=lambda lk: lk.rounds):
            for cid in look.rested:
                out.setdefault(cid, look.rounds + 1)
        return out


class RunSummary(BaseModel):
    schema_version: int = SCHEMA_VERSION
    specmeter_version: str
    created_utc: str
    status: Literal["running", "complete", "incomplete"] = "running"
    incomplete_reason: str | None = None
    command: list[str] = Field(default_factory=list)
    plan: Plan
    models: dict[str, Any] = Field(default_factory=dict, description="Model paths and content hashes.")
    environment: dict[str, Any] = Field(default_factory=dict)
    configs: list[ConfigResult] = Field(default_factory=list)
    analysis: Analysis = Field(default_factory=Analysis)
    sampling: list[PointSampling] = Field(default_factory=list, description="Per point: the rounds and requests "
                                          "it took, and why it stopped (adaptive precision).")
    load_search: list[AxisSearch] = Field(default_factory=list, description="Per searched load axis (`concurrency: "
                                          "auto`): the points chosen, in order, with why, and why the search stopped.")
    ramp: list[AxisRamp] = Field(default_factory=list, description="Per load axis (load.stop_at_saturation): each "
                                 "step judged against the lower load, and where the ramp stopped at saturation.")
    jobs: list[JobAttempt] = Field(default_factory=list, description="Slurm: every attempt of every job group, "
                                   "the one merged marked used (empty: run locally).")
    wall_s: float | None = None

    def sampled(self, point_id: str) -> PointSampling | None:
        return next((s for s in self.sampling if s.point_id == point_id), None)

    def config(self, config_id: str) -> ConfigResult | None:
        return next((c for c in self.configs if c.config_id == config_id), None)

    def searched(self, axis: str) -> AxisSearch | None:
        return next((s for s in self.load_search if s.axis == axis), None)

    def ramped(self, axis: str, input_len: int | None = None) -> AxisRamp | None:
        return next((r for r in self.ramp if r.axis == axis and r.input_len == input_len), None)
