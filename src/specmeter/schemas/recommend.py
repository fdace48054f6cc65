"""What `specmeter recommend` decides from a sweep: a K per engine batch size for each drafter, the static K
for engines without dynamic SD, and the evidence behind each range, all engine-neutral; then the same
answer rendered as launch flags for the engine the sweep ran (`DeployConfig`, filled by the engine's
launcher: analysis never names an engine's flags).

Written to recommendation.json in the run directory; `specmeter verify` reads it back.
"""

from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import BaseModel, Field, model_validator

from specmeter.config.criteria import Objective as Objective  # re-exported: recommendation.json carries it
from specmeter.config.models import SpecConfig
from specmeter.config.slo import SLO as SLO  # re-exported: recommendation.json carries it
from specmeter.schemas.analysis import HeadToHead
from specmeter.schemas.proposal import ProposedK

Basis = Literal["measured", "interpolated", "below_measured", "unmeasured", "predicted"]


VerificationState = Literal["not run", "held", "disagreed", "kept", "ignored", "collapsed"]


class Score(BaseModel):
    """One contender's objective at one point: a speedup over the baseline (throughput, tpot) or goodput in
    requests/s; [low, high] is the interval the choice reads (see analysis.choice.decision_bounds)."""

    config_id: str
    k: int
    value: float | None
    low: float | None = None
    high: float | None = None


class Segment(BaseModel):
    """A stretch of batch sizes and where its K comes from: a measured point, interpolation between two,
    below the smallest measured batch, or beyond the largest (unmeasured: speculation off, nothing claimed)."""

    start: int = Field(ge=1)
    end: int = Field(ge=1)
    k: int = Field(ge=0)
    basis: Basis
    point_ids: list[str] = Field(default_factory=list, description="The measured points it rests on.")
    engine_batch: list[float] = Field(default_factory=list, description="Their measured engine batch sizes.")
    scores: list[Score] = Field(default_factory=list, description="Measured: every contender at the point.")
    chosen: str | None = Field(default=None, description="Measured: the configuration chosen at the point.")
    evidence: list[HeadToHead] = Field(default_factory=list, description="Measured: the head-to-head comparisons "
                                       "the choice read (who beat whom, by how much, with the interval).")
    instances: int = Field(default=1, description="Measured: the server instances (starts) its points' rounds ran "
                           "on (load.instances).")
    beaten_on: list[str] = Field(default_factory=list, description="Measured, from 2 instances: where, on one "
                                 "instance's rounds alone, another contender beat the chosen one (e.g. 'instance 2 "
                                 "at c4: draft_model-k4 beats draft_model-k2: 1.12x ...'); empty: the choice held on "
                                 "every instance.")
    reason: str


class KRange(BaseModel):
    """One entry of the emitted table: consecutive segments with the same K, merged."""

    start: int = Field(ge=1)
    end: int = Field(ge=1)
    k: int = Field(ge=0)
    bases: list[Basis] = Field(description="Where the K of its batch sizes comes from.")

    @property
    def entry(self) -> list[int]:
        return [self.start, self.end, self.k]


class DeployConfig(BaseModel):
    """A drafter's recommendation as one engine's launch settings: what a reader pastes."""

    engine: str = Field(description="The engine kind: vllm, llamacpp, sglang or trtllm.")
    dynamic: bool = Field(description="True: K follows the batch size (the table); False: one static K.")
    k: int = Field(ge=1, description="The static K, or the table's largest.")
    flags: list[str] = Field(description="Server command-line arguments, one argv item each.")
    config: dict[str, Any] | None = Field(default=None, description="The config object where the engine takes "
                                          "one: vLLM's --speculative-config JSON, TensorRT-LLM's "
                                          "extra_llm_api_options YAML, SGLang's adaptive tiers JSON.")
    config_file: str | None = Field(default=None, description="The file `flags` name that `config` goes into "
                                    "(None: the flags carry it).")
    notes: list[str] = Field(default_factory=list)


def _vllm_json(cfg: dict[str, Any]) -> DeployConfig:
    """A recommendation.json written before per-engine rendering held vLLM's --speculative-config only."""
    k = cfg.get("num_speculative_tokens")
    if not isinstance(k, int):
        raise ValueError("speculative_config needs num_speculative_tokens (K)")
    return DeployConfig(engine="vllm", dynamic="num_speculative_tokens_per_batch_size" in cfg, k=k,
                        flags=["--speculative-config", json.dumps(cfg)], config=cfg)


class DrafterRecommendation(BaseModel):
    """The recommendation for one drafter (method + draft model + its options) of the sweep."""

    drafter: str = Field(description="Human label, e.g. 'draft_model demo-draft'.")
    candidates: list[str] = Field(description="The sweep's static configurations of this drafter.")
    ranges: list[KRange]
    segments: list[Segment]
    spec: SpecConfig | None = Field(description="The dynamic config (engine-neutral, with the table) as "
                                    "specmeter runs it; None when speculation pays nowhere.")
    static_k: int = Field(ge=0, description="K to use where dynamic SD is unavailable (0: leave speculation off).")
    static_config_id: str | None
    static_spec: SpecConfig | None = Field(default=None, description="The static K's config (engine-neutral); "
                                           "None when static K is 0.")
    static_reason: str
    score: float | None = Field(description="Geometric mean over measured points of the objective the table "
                                "gets (ranks drafters).")
    deploy: DeployConfig | None = Field(default=None, description="What to launch on the engine the sweep ran: "
                                        "the table where the engine takes a K per batch size, else the static "
                                        "K; None: speculation off, or not rendered.")
    static_deploy: DeployConfig | None = Field(default=None, description="Engines with a per-batch K: the static "
                                               "K's config, for where the table does not apply.")
    # vLLM's JSON of `deploy` and `static_deploy`, kept for readers of earlier recommendation.json files.
    speculative_config: dict[str, Any] | None = None
    static_speculative_config: dict[str, Any] | None = None

    @model_validator(mode="after")
    def _earlier_file(self) -> DrafterRecommendation:
        if self.deploy is None and self.speculative_config is not None:
            self.deploy = _vllm_json(self.speculative_config)
        if self.static_deploy is None and self.static_speculative_config is not None:
            self.static_deploy = _vllm_json(self.static_speculative_config)
        return self


class BatchShare(BaseModel):
    """One range of the table, and the share of a trace point's serving time the engine spent in it."""

    start: int = Field(ge=1)
    end: int = Field(ge=1)
    k: int = Field(ge=0)
    share: float = Field(ge=0, le=1, description="Of the time the engine ran a batch (idle time left out).")


class TraceGain(BaseModel):
    """What the best drafter's table buys on one trace point's traffic (analysis.trace_answer): each batch
    size's speedup weighted by the time the baseline engine spent at that batch size replaying the trace."""

    point_id: str
    weighed_by: str = Field(description="The configuration whose running batch gives the weights (the baseline).")
    samples: int = Field(default=0, description="Running-batch samples the weights rest on (0: none).")
    idle_share: float | None = Field(default=None, description="Share of the sampled time the engine ran no "
                                     "request: no step, so no weight.")
    time: list[BatchShare] = Field(default_factory=list, description="The table's ranges the engine ran in, with "
                                   "their share of its serving time.")
    gain: float | None = Field(default=None, description="The table's speedup over no speculation on this traffic: "
                               "the baseline's serving time over the time at each batch size divided by its "
                               "speedup (None: not known, `reason` says why).")
    low: float | None = Field(default=None, description="The same mean of each batch size's lower bound: every "
                              "range at its bound at once, so wider than an interval of independent ranges.")
    high: float | None = None
    measured_share: float | None = Field(default=None, description="Of the serving time, the share at batch sizes "
                                         "whose speedup was measured there (the rest takes the speedup of the "
                                         "point whose K it runs; K = 0 counts as 1x).")
    reason: str | None = None


class DrafterChoice(BaseModel):
    """Which drafter the answer names, decided head to head (analysis.drafter_choice): each duel pools, over the
    measured points where two drafters' tables run different configurations, the paired comparison of those."""

    chosen: str = Field(description="The drafter deployed (its table first in `drafters`).")
    runner_up: str | None = Field(description="The best of the others.")
    margin: HeadToHead | None = Field(description="The chosen drafter's table against the runner-up's, head to head.")
    evidence: list[HeadToHead] = Field(default_factory=list, description="The duels the walk from the cheapest "
                                       "drafter read.")
    reason: str


class Recommendation(BaseModel):
    """Every drafter's table, the best first."""

    source_run: str
    runs: int = Field(default=1, ge=1, description="How many runs of the plan it rests on (`compare --pool` pools "
                      "several; one run's intervals hold no rerun's server starts or machine state).")
    instances: int = Field(default=1, ge=1, description="Server instances per configuration its rounds ran on "
                           "(load.instances): from 2, one run's intervals hold what a restart changes.")
    objective: Objective
    slo: SLO | None = None
    min_gain: float = Field(default=0.01, description="What a costlier configuration had to win by, head to head.")
    indifference: float | None = Field(default=None, description="Within how much two configurations were a tie "
                                       "(the cheaper kept); None: decided before ties existed.")
    max_num_seqs: int = Field(ge=1)
    max_num_seqs_source: str
    drafters: list[DrafterRecommendation]
    drafter_choice: DrafterChoice | None = Field(default=None, description="Two or more drafters on one node: "
                                                 "which one the answer names, head to head, and by how much it won.")
    notes: list[str] = Field(default_factory=list)
    round: int = Field(default=1, ge=1, description="1: from the sweep; n > 1: corrected after n - 1 verifications.")
    verification: VerificationState = Field(
        default="not run", description="held: no static K (nor the engine's adaptive mode, where the sweep "
        "measured it) beat the table at any verified point; disagreed: one did, and a corrected table follows; kept: "
        "one did, but decided again on the pooled evidence of sweep and "
        "verification the table stands; ignored: the engine drafted the table's largest K everywhere, as a static "
        "K, so nothing verified the table (a failed verification); collapsed: acceptance did not come back after the "
        "table's K = 0 steps (a failed verification).")
    verified_in: str | None = Field(default=None, description="The verification run directory, relative to the "
                                    "sweep's.")
    corrects: str | None = Field(default=None, description="The file of the table this one corrects.")
    changes: list[str] = Field(default_factory=list, description="What the correction changed, and why.")
    input_len: int | None = Field(default=None, description="An input-length axis: the length whose points this "
                                  "table was decided over (None: no such axis).")
    per_input_len: list[Recommendation] = Field(default_factory=list, description="An input-length axis: the table "
                                                "of each length, decided over its points alone (the first is this).")
    proposed: list[ProposedK] = Field(default_factory=list, description="The Ks the sweep did not run that the "
                                      "step-cost model proposed and the tune loop measured head to head, each with "
                                      "what its measurement said where it could win.")
    on_trace: list[TraceGain] = Field(default_factory=list, description="A trace replay: per trace point, what "
                                      "the best drafter's table buys on that traffic (empty: no trace points).")

    @model_validator(mode="after")
    def _tables_hold(self) -> Recommendation:
        """Each drafter's ranges as the engine reads them (ordered, disjoint, covering 1..max_num_seqs) and the same
        table as the spec that launches them, so an edited file cannot verify one table and launch another."""
        for i, d in enumerate(self.drafters):
            where = f"drafters.{i}.ranges"
            expected = 1
            for r in d.ranges:
                if r.start != expected or r.end < r.start:
                    raise ValueError(f"{where}: [{r.start}, {r.end}] should start at batch {expected} and not end "
                                     "before it starts (ranges run in order, without gaps or overlaps, from 1); "
                                     "fix the ranges or run `specmeter recommend` again")
                expected = r.end + 1
            if d.ranges and expected - 1 != self.max_num_seqs:
                raise ValueError(f"{where}: the last range ends at {expected - 1}, not at max_num_seqs "
                                 f"{self.max_num_seqs}; end it there")
            table = d.spec.num_speculative_tokens_per_batch_size if d.spec is not None else None
            if table is not None and [list(t) for t in table] != [r.entry for r in d.ranges]:
                raise ValueError(f"drafters.{i}.spec: its num_speculative_tokens_per_batch_size {table} is not the "
                                 f"table of its ranges {[r.entry for r in d.ranges]}; edit both alike")
        return self

    @property
    def best(self) -> DrafterRecommendation | None:
        return self.drafters[0] if self.drafters else None
