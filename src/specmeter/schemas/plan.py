"""The plan: every engine configuration a command measures and the load points it runs them at.

`run`, `sweep`, `compare-workloads` and `demo` all build one Plan; the runner executes any Plan the
same way; summary.json stores it whole, so `--resume` reloads it instead of rebuilding it.
"""

from __future__ import annotations

from enum import Enum
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from specmeter.config.models import EngineSpec, LoadPoint, LoadSpec, SpecConfig
from specmeter.config.trace import TraceSpec
from specmeter.config.workload import PhaseSpec
from specmeter.schemas.analysis import DEFAULT_INDIFFERENCE, indifference_for
from specmeter.schemas.placement import Placement
from specmeter.schemas.proposal import ProposedK


class Role(str, Enum):
    """What a configuration is in the plan: the reference, a contender, or a recommendation under test."""

    baseline = "baseline"  # the same engine and target with speculation off
    candidate = "candidate"
    verification = "verification"


class WorkloadSelection(BaseModel):
    """Which conversations a plan sends: enough to rebuild exactly the same list on resume."""

    model_config = ConfigDict(extra="forbid")

    dataset: str
    path: str | None = None
    categories: list[str] | None = Field(default=None, description="Category filter (None: all).")
    options: dict[str, Any] = Field(default_factory=dict, description="Loader options.")
    input_len: tuple[int, int] | None = Field(default=None, description="Range filter: LO <= input tokens < HI.")
    tokenizer: str | None = None
    shaped_len: int | None = Field(default=None, description="Prompts built to exactly this many tokens (one length "
                                   "of an input-length axis).")
    lengths: list[WorkloadSelection] = Field(default_factory=list, description="An input-length axis: each "
                                             "length's selection (shaped_len set); the fields above describe the "
                                             "first. Empty: no axis.")
    trace: TraceSpec | None = Field(default=None, description="The trace replayed, one conversation a row of its "
                                    "window (the dataset fills the rows without text).")
    phases: list[PhaseSpec] | None = Field(default=None, description="A phase-shift workload's phases, in the "
                                           "order sent.")
    notes: list[str] = Field(default_factory=list, description="What to know about the content before it is sent "
                             "(a trace's: random tokens, a dataset too small for it).")
    num_prompts: int | None = None
    seed: int = 0
    conversation_ids: list[str] = Field(default_factory=list)
    requests: int = Field(default=0, description="Requests in one pass over the conversations.")
    multi_turn: int = Field(default=0, description="Conversations with more than one turn.")
    category_counts: dict[str, int] = Field(default_factory=dict)


class MatchedRandom(BaseModel):
    """Random-token prompts matched to what one configuration completed at one point (same prompt
    lengths, forced output lengths): the synthetic contrast of compare-workloads."""

    model_config = ConfigDict(extra="forbid")

    source_config: str
    source_point: str
    vocab_size: int = Field(gt=0)
    excluded_token_ids: list[int] = Field(default_factory=list)
    seed: int = 0


class PlannedConfig(BaseModel):
    """One engine configuration. Configurations with the same `server` run on one server process."""

    model_config = ConfigDict(extra="forbid")

    id: str = Field(description="Unique within the plan; records and results key on it.")
    role: Role
    spec: SpecConfig
    engine: EngineSpec
    server: str = Field(description="Server id: names the server log; shared by configs on one server.")
    workload: Literal["main", "random"] = "main"
    matched_random: MatchedRandom | None = None
    load: LoadSpec | None = Field(default=None, description="Overrides the plan's request settings (same points).")
    node_group: str | None = Field(default=None, description="Slurm: the job group it ran in, on one node with its "
                                   "own baseline; compared only within it (None: one node ran the whole plan).")
    k_range: tuple[int, int] | None = Field(default=None, description="The Ks its drafter may take (a sweep file's "
                                            "num_speculative_tokens LO-HI): the sweep ran a spread of them, and "
                                            "proposals take the rest.")

    @property
    def label(self) -> str:
        """Human label of the speculation this config runs."""
        if self.engine.launch or self.spec.enabled:
            return self.spec.label()
        return "off" if self.role is Role.baseline else "as the server runs"

    @property
    def k(self) -> int:
        return self.spec.k


class Plan(BaseModel):
    """Configurations x load points x repeats, and how to order them."""

    model_config = ConfigDict(extra="forbid")

    kind: Literal["run", "sweep", "compare-workloads", "demo", "verify", "propose"]
    configs: list[PlannedConfig]
    load: LoadSpec
    repeats: int = Field(default=1, ge=1, description="Each point runs this many times per configuration.")
    interleave: bool = Field(default=False, description="Keep every server up together and alternate "
                             "configurations at each point, so drift hits all alike.")
    workload: WorkloadSelection
    min_gain: float = Field(default=0.01, ge=0.0, description="A costlier configuration replaces a cheaper one only "
                            "when it beats it head to head by more than this fraction (the whole interval above "
                            "1 + min_gain).")
    indifference: float = Field(default=DEFAULT_INDIFFERENCE, ge=0.0, lt=1.0, description="A costlier "
                                "configuration settled at most this fraction better than a cheaper one (the "
                                "head-to-head interval straddles 1 + min_gain but ends below 1 + indifference) is a "
                                "tie: the cheaper is kept, and the decision counts as settled. At "
                                "least min_gain; equal to it, there are no ties. Absent (plans before ties): 3%, "
                                "or min_gain where that is larger.")
    best_static: dict[str, str] = Field(default_factory=dict, description="verify: per point id, the static "
                                        "configuration the sweep found best there, which the dynamic one is judged "
                                        "against.")
    adaptive: dict[str, str] = Field(default_factory=dict, description="verify: per point id, the engine's own "
                                     "adaptive mode (or confidence floor) the sweep measured best there, which the "
                                     "dynamic table is judged against too (empty: the sweep measured none).")
    carried: dict[str, str] = Field(default_factory=dict, description="verify: the sweep's points not run again, "
                                    "each with why: every decision behind the table's K there was settled (or its "
                                    "open ones stopped for futility), so the sweep's paired evidence stands for it.")
    proof: bool = Field(default=False, description="verify: every point was carried, so the one point run only "
                        "proves that the config starts and drafts the K it names: one round (fixed), not the "
                        "adaptive rounds that settle a judgement.")
    runs_at: dict[str, list[str]] = Field(default_factory=dict, description="propose: per configuration id, the "
                                          "points it runs at (a configuration not named runs at every point).")
    proposed: list[ProposedK] = Field(default_factory=list, description="propose: the Ks the step-cost model "
                                      "proposed, each with the stretches it could win and what the model predicted "
                                      "there.")
    placement: Placement | None = Field(default=None, description="Where the launched servers run on this node: "
                                        "GPUs and memory share per server (None: not placed; plans other than a "
                                        "sweep's, and runs before placement existed).")

    @model_validator(mode="before")
    @classmethod
    def _default_zone(cls, data: Any) -> Any:
        """Absent (plans before ties): the default zone for the plan's min_gain."""
        if isinstance(data, dict) and data.get("indifference") is None:
            gain = data.get("min_gain", cls.model_fields["min_gain"].default)
            data = {**data, "indifference": indifference_for(gain, None)}
        return data

    @model_validator(mode="after")
    def _consistent(self) -> Plan:
        if self.indifference < self.min_gain:
            raise ValueError(f"indifference {self.indifference:g} is below min_gain {self.min_gain:g}: a tie "
                             "straddles 1 + min_gain, so a narrower zone never holds one; set indifference to "
                             f"{self.min_gain:g} or more (equal: no ties)")
        ids = [c.id for c in self.configs]
        if len(set(ids)) != len(ids):
            raise ValueError(f"configuration ids must be unique: {ids}")
        servers: dict[str, PlannedConfig] = {}
        for c in self.configs:
            first = servers.setdefault(c.server, c)
            if (first.engine, first.spec) != (c.engine, c.spec):
                raise ValueError(f"configurations {first.id} and {c.id} share server {c.server} but differ in "
                                 "engine or speculative config")
            if c.matched_random is not None and c.matched_random.source_config not in ids:
                raise ValueError(f"{c.id}: matched_random source {c.matched_random.source_config} is not in the plan")
        for name, judged in (("best_static", self.best_static), ("adaptive", self.adaptive)):
            for point_id, config_id in judged.items():
                if config_id not in ids:
                    raise ValueError(f"{name} names {config_id} at {point_id}, which is not in the plan")
        for config_id in self.runs_at:
            if config_id not in ids:
                raise ValueError(f"runs_at names {config_id}, which is not in the plan")
        return self

    @property
    def points(self) -> list[LoadPoint]:
        return self.load.points

    @property
    def input_lens(self) -> list[int | None]:
        """The input lengths the points run at, in plan order ([None]: no input-length axis)."""
        return list(dict.fromkeys(p.input_len for p in self.points)) or [None]

    def runs(self, config: PlannedConfig, point_id: str) -> bool:
        """Whether the configuration runs at the point. A verify plan runs a static configuration (or an adaptive
        one) only where the table is judged against it; a proposal plan runs each configuration where its runs_at
        says; everything else runs everywhere."""
        if config.id in self.runs_at:
            return point_id in self.runs_at[config.id]
        judged = {*self.best_static.values(), *self.adaptive.values()}
        return config.id not in judged or config.id in (self.best_static.get(point_id), self.adaptive.get(point_id))

    def config(self, config_id: str) -> PlannedConfig:
        return next(c for c in self.configs if c.id == config_id)

    def point(self, point_id: str) -> LoadPoint:
        found = self.load.point(point_id)
        if found is None:
            raise KeyError(point_id)
        return found

    def load_for(self, config: PlannedConfig) -> LoadSpec:
        return config.load or self.load

    @property
    def main_baseline(self) -> PlannedConfig | None:
        """The speculation-off configuration on the main workload: what every decision compares against."""
        return next((c for c in self.configs if c.role is Role.baseline and c.workload == "main"), None)

    def baseline_for(self, config: PlannedConfig) -> PlannedConfig | None:
        """The speculation-off configuration on the same workload and node (None: no speedup for this one):
        a speedup is never computed across two nodes' hardware."""
        return next((c for c in self.configs if c.role is Role.baseline and c.workload == config.workload
                     and c.node_group == config.node_group and c.id != config.id), None)

    def servers(self) -> list[list[PlannedConfig]]:
        """Configurations grouped by server, in plan order."""
        groups: dict[str, list[PlannedConfig]] = {}
        for c in self.configs:
            groups.setdefault(c.server, []).append(c)
        return list(groups.values())
