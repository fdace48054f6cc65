"""What an engine provides, in two parts that never need each other.

- `EngineStats` reads a server: its SD counters, per-request SD payloads, the fields a request must add
  to get them, and whether a server it has never seen is this engine (`can_adapt`, for attach mode).
- `EngineLauncher` starts one: the command, its environment, the drafters it supports, its version; and
  renders an engine-neutral recommendation as the flags a reader launches this engine with.
- `EngineStats.iteration_feed` (optional): the accumulator of statistics a server hands out only once
  (trtllm-serve's JSON iteration stats; telemetry/feed.py reads them).

Attach mode uses only the stats half; a registry pairs both under `EngineSpec.kind`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

from specmeter.common.errors import InputError
from specmeter.config.models import EngineSpec, SpecConfig, SpecMethod
from specmeter.config.synthetic import LengthSchedule
from specmeter.schemas.offload import GpuOffload
from specmeter.schemas.recommend import DeployConfig
from specmeter.schemas.sd import SDCounts
from specmeter.telemetry.feed import IterationFeed
from specmeter.telemetry.prometheus import CounterDelta, Snapshot, position_list


@dataclass(frozen=True)
class ServerProbe:
    """What a running server showed before a run: enough to tell which engine it is."""

    url: str
    models: dict[str, Any] | None  # the /v1/models body
    metrics: Snapshot | None  # /metrics, None when the server exposes none
    server_header: str | None  # the HTTP `Server` header of /v1/models


def served_models(probe: ServerProbe) -> list[str]:
    """The model ids /v1/models lists."""
    data = (probe.models or {}).get("data")
    return [m["id"] for m in data if isinstance(m, dict) and isinstance(m.get("id"), str)] if isinstance(data, list) \
        else []


def owned_by(probe: ServerProbe) -> str | None:
    """The `owned_by` of the first model /v1/models lists (engines put their own name there)."""
    data = (probe.models or {}).get("data")
    if isinstance(data, list) and data and isinstance(data[0], dict):
        value = data[0].get("owned_by")
        return value if isinstance(value, str) else None
    return None


def step_counter_counts(delta: CounterDelta, *, steps: str, drafted: str, accepted: str, accepted_per_pos: str,
                        drafted_per_pos: str | None = None) -> SDCounts | None:
    """SD counts from the counter delta of an engine that counts steps, drafted and accepted tokens, and
    accepted tokens per position (vLLM, llama.cpp); None when a required counter is missing or the counters
    went down (a restart: the delta means nothing, and counts are never negative)."""
    if not delta.valid or any(name in delta.missing for name in (steps, drafted, accepted)):
        return None
    drafted_pos = ([] if drafted_per_pos is None or drafted_per_pos in delta.missing
                   else position_list(delta.series(drafted_per_pos)))
    return SDCounts(
        source="counters",
        num_steps=round(delta.value(steps)),
        num_draft_tokens=round(delta.value(drafted)),
        num_accepted_tokens=round(delta.value(accepted)),
        accepted_per_pos=position_list(delta.series(accepted_per_pos)),
        drafted_per_pos=drafted_pos or None,
    )


def counts_from_steps(per_step_accepted: Sequence[int], per_step_drafted: Sequence[int]) -> SDCounts:
    """Exact counts from one request's per-step lists (vLLM `detailed` per-request stats).

    Steps that drafted nothing are skipped: they are not speculative steps.
    """
    if len(per_step_accepted) != len(per_step_drafted):
        raise ValueError(
            f"per_step_accepted has {len(per_step_accepted)} entries but per_step_drafted has "
            f"{len(per_step_drafted)}"
        )
    width = max((k for k in per_step_drafted), default=0)
    acc_pos = [0] * width
    dr_pos = [0] * width
    hist = [0] * (width + 1)
    steps = drafted = accepted = 0
    for a, k in zip(per_step_accepted, per_step_drafted):
        if k <= 0:
            continue
        if not 0 <= a <= k:
            raise ValueError(f"a step accepted {a} of {k} drafted tokens")
        steps += 1
        drafted += k
        accepted += a
        hist[a] += 1
        for i in range(k):
            dr_pos[i] += 1
        for i in range(a):
            acc_pos[i] += 1
    return SDCounts(
        source="per_request",
        num_steps=steps,
        num_draft_tokens=drafted,
        num_accepted_tokens=accepted,
        accepted_per_pos=acc_pos,
        drafted_per_pos=dr_pos,
        histogram=hist,
    )


class EngineStats(ABC):
    """Reading SD statistics from one engine's server. Stateless."""

    name: str
    # Whether a connection stays usable after a streamed response (False: one connection per request).
    keeps_connections: bool = True
    # Where the Prometheus text is (trtllm-serve's /metrics is JSON that each read clears).
    metrics_path: str = "/metrics"
    # How the engine turns a synthetic mean acceptance length into per-position rates.
    synthetic_length_schedule: LengthSchedule = "geometric"
    # Whether the engine shortens a draft to fit the request's remaining output (llama.cpp drafts at most
    # max_tokens - generated - 1), so the last steps of a request that reaches max_tokens draft fewer than K.
    drafts_fit_output_cap: bool = False
    # Whether /metrics shows a speculative config before any traffic (vLLM registers its SD counters only with
    # one), so an attached server without one is told before anything is measured.
    speculation_shown_at_start: bool = False

    def can_adapt(self, probe: ServerProbe) -> bool:
        """Whether `probe` came from this engine (default: its SD or traffic counters are exposed)."""
        if probe.metrics is None:
            return False
        names = [*self.sd_counter_names, *self.traffic_counter_names.values()]
        return any(probe.metrics.has(n) for n in names)

    def request_extensions(self, temperature: float) -> dict[str, Any]:
        """Engine-specific fields added to every request body (e.g. ask for the generated token ids)."""
        return {}

    @property
    def running_gauge(self) -> str | None:
        """Exact name of the gauge holding the engine's running-batch size (None: not exposed)."""
        return None

    @property
    def unavailable(self) -> dict[str, str]:
        """Numbers this engine cannot give exactly, with why: the report says so instead of guessing."""
        return {}

    @property
    @abstractmethod
    def sd_counter_names(self) -> list[str]:
        """Exact Prometheus sample names whose deltas give run-level SD counts."""

    @property
    @abstractmethod
    def traffic_counter_names(self) -> dict[str, str]:
        """Exact sample names for 'requests finished' and 'generated tokens' (foreign-traffic check)."""

    @abstractmethod
    def sd_from_counters(self, delta: CounterDelta) -> SDCounts | None:
        """Run-level SDCounts from counter deltas; None when the engine exposes no SD counters."""

    @abstractmethod
    def sd_from_response(self, payload: dict[str, Any]) -> tuple[SDCounts | None, dict[str, Any] | None]:
        """Per-request SDCounts (and the raw engine fields) from a final response/usage chunk."""

    def iteration_feed(self) -> IterationFeed | None:
        """A new accumulator for statistics the server clears on every read (None: the engine has none)."""
        return None

    def sd_enabled_in(self, snapshot: Snapshot) -> bool:
        """Whether the server's /metrics shows speculation is configured at all."""
        return any(snapshot.has(n) for n in self.sd_counter_names)

    def speculates(self, snapshot: Snapshot) -> bool:
        """Whether the server has drafted at all by this snapshot (any SD counter above zero). Engines that register
        SD counters only with speculation configured (vLLM) say so from their presence alone."""
        return any(v > 0 for n in self.sd_counter_names for v in snapshot.series(n).values())


class PlacementNote(NamedTuple):
    """A line the placement report prints for an engine; `warn`: a caution, not a remark."""

    text: str
    warn: bool = False


class EngineLauncher(ABC):
    """Starting one engine's OpenAI-compatible server from an engine-neutral SpecConfig. Stateless."""

    name: str
    # Drafters this engine can run; anything else is refused with this list before a server starts.
    methods: tuple[SpecMethod, ...]
    # Paths that answer 2xx once the server serves (checked in order, each must pass).
    ready_paths: tuple[str, ...] = ("/health", "/v1/models")
    # Whether the engine takes a K per batch size (vLLM's num_speculative_tokens_per_batch_size); one that
    # does not deploys a recommendation's static K.
    per_batch_k: bool = False
    # Whether the engine can accept drafts at random with set rates instead of verifying them.
    synthetic: bool = False
    # Whether the engine stops a step's draft below a confidence floor (SpecConfig.draft_p_min).
    draft_floor: bool = False
    # Why the engine runs no `adaptive` speculation of its own, and what to give instead (None: it does).
    no_adaptive: str | None = "this engine has no adaptive speculation of its own; drop adaptive"
    # Why the engine drafts no token trees (an engine that draws them overrides `check_tree`).
    no_tree: str = "it drafts one chain of K tokens per step"
    # The engine's own flags for what EngineSpec.tensor_parallel_size and memory_fraction set: placement refuses
    # them in extra_args, where it could not see them (a share it did not give breaks equal KV capacity).
    placement_flags: tuple[str, ...] = ()
    # Whether the server takes EngineSpec.memory_fraction (llama.cpp's KV cache is its context instead): placement
    # writes its share only into engines that take one, so a placed plan validates when it is read back.
    memory_fraction: bool = True
    # The flags that cap the engine's running batch (the first is the one it is launched with); the last one a
    # command gives wins, as the engine reads it (extra arguments come after specmeter's own).
    batch_limit_flags: tuple[str, ...]
    # What a placement that shares GPUs between servers leaves to this engine, said beside it (None: nothing).
    shared_gpu_note: PlacementNote | None = None

    def batch_limit(self, command: Sequence[str]) -> int | None:
        """The running-batch cap a launched server's command set (None: the engine's default)."""
        found = [i for i, arg in enumerate(command[:-1]) if arg in self.batch_limit_flags]
        return int(command[found[-1] + 1]) if found else None

    @abstractmethod
    def server_command(self, engine: EngineSpec, spec: SpecConfig, port: int) -> list[str]:
        """The argv that launches the engine's OpenAI-compatible server."""

    @abstractmethod
    def deploy_spec(self, spec: SpecConfig, slots: int | None) -> DeployConfig:
        """One engine-neutral config (a static K, or a table where the engine takes one) as this engine's
        launch flags; `slots`: the largest batch the recommendation's ranges reach (None: unknown)."""

    def deploy_config(self, dynamic: SpecConfig | None, static: SpecConfig | None,
                      slots: int | None) -> DeployConfig | None:
        """What to launch for a drafter's recommendation: its table where the engine runs it, else its static K;
        None: speculation off (a table that drafts nowhere, or static K = 0)."""
        if self.per_batch_k and dynamic is None:
            return None
        why = None if dynamic is None else self.schedule_refusal(dynamic)
        if dynamic is not None and why is None:
            return self.deploy_spec(dynamic, slots)
        if static is None:
            return None
        out = self.deploy_spec(static, slots)
        if why is not None:
            out.notes.insert(0, f"{why}: static K={static.k} at every batch size; the table's ranges are the "
                                "evidence, not a setting")
        return out

    def schedule_refusal(self, table: SpecConfig) -> str | None:
        """Why the engine cannot run this K table (None: it can)."""
        return None if self.per_batch_k else f"{self.name} has no per-batch K"

    def server_env(self, engine: EngineSpec) -> dict[str, str]:
        """Extra environment for a launched server (on top of the caller's)."""
        return dict(engine.env)

    def api_key_env(self, api_key: str) -> dict[str, str]:
        """Environment that makes a launched server require `api_key` (empty: engine cannot)."""
        return {}

    def starts_together(self, engine: EngineSpec) -> bool:
        """Whether servers of this engine that share the machine's devices may start at once (False: each waits
        until the one before serves, as a GPU server must: its memory is sized from what is free when it starts)."""
        return False

    def compile_cache(self, engine: EngineSpec) -> Path | None:
        """Where a server keeps the kernels it compiles on its first start on a machine, which later starts reuse
        (engines.start_notes says so while a start is long; None: an engine that compiles none worth telling)."""
        return None

    def gpu_offload(self, engine: EngineSpec, command: Sequence[str], log_path: Path) -> GpuOffload | None:
        """How much of each model the server started with `command` placed on GPUs, read once it serves from
        its log at `log_path` (None: an engine that places whole models and logs no partial offload)."""
        return None

    @abstractmethod
    def version(self) -> str | None:
        """Installed engine version, or None when the engine is not installed here."""

    def preflight(self, engine: EngineSpec, spec: SpecConfig) -> None:
        """What can be checked before anything is written or started (default: the drafter is supported)."""
        self.check_method(spec)

    def notes(self, spec: SpecConfig) -> list[str]:
        """What to say before launching `spec`, where the engine's setting bears on what is measured."""
        return []

    def check_method(self, spec: SpecConfig) -> None:
        """Refuse a drafter this engine lacks, naming the ones it has, and synthetic acceptance where it has none."""
        if spec.enabled and spec.method not in self.methods:
            have = ", ".join(m.value for m in self.methods)
            raise InputError(f"{self.name} cannot run speculation method {spec.method.value!r}; "
                             f"it supports: {have}")
        if spec.synthetic and not self.synthetic:
            raise InputError(f"{self.name} has no synthetic acceptance (no option accepts drafts at set rates); "
                             "synthetic_acceptance runs on llamacpp (llama-server) and on GPU builds of vllm")
        if spec.drafts_tree:
            self.check_tree(spec)
        if spec.draft_p_min is not None and not self.draft_floor:
            raise InputError(f"{self.name} has no draft confidence floor (draft_p_min, llama.cpp's "
                             "--spec-draft-p-min); drop it, or run it on llamacpp")
        if spec.adaptive and self.no_adaptive is not None:
            raise InputError(f"{self.name}: adaptive: {self.no_adaptive}")

    def check_tree(self, spec: SpecConfig) -> None:
        """Refuse a tree this engine cannot draw, naming what it takes; an engine that draws trees overrides this
        with its own limits (its methods, its shapes, its sizes)."""
        raise InputError(f"{self.name} drafts no token trees: {self.no_tree}; run the tree on sglang or trtllm, or "
                         f"drop tree for a chain of num_speculative_tokens: {spec.k}")

    @staticmethod
    def check_deployable(spec: SpecConfig) -> None:
        """Refuse to render synthetic acceptance as a config to deploy: it sets acceptance instead of verifying,
        so its outputs are not the target's."""
        if spec.synthetic:
            raise InputError("synthetic acceptance is a measurement device (outputs are not valid text), not a "
                             "configuration to deploy; recommend from the verified configurations")


@dataclass(frozen=True)
class Engine:
    """One registered engine: how to read it, and (when it can be launched here) how to start it."""

    kind: str
    stats: EngineStats
    launcher: EngineLauncher
