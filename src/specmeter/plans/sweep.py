"""`specmeter sweep`: every speculative configuration at every load point, from one YAML file.

A candidate entry may give lists for K, the draft model and the n-gram window; they expand to every
combination. The speculation-off baseline is always part of the plan: every speedup needs it.

    workload: {dataset: sample, num_prompts: 22}
    engine: {model: models/demo-target, dtype: float32}
    candidates:
      - {method: draft_model, model: models/demo-draft, num_speculative_tokens: [2, 4]}
      - {method: ngram, num_speculative_tokens: 4, prompt_lookup_max: [3, 5]}
      - {method: eagle3, model: models/demo-eagle3, num_speculative_tokens: 1-6}
    load: {concurrency: [1, 4, 16], request_rate: [2.0], max_tokens: 128, temperature: 0}
    repeats: 3
    interleave: true
    ceiling: true     # per drafter and K, the same at 100% acceptance (synthetic): the most that K could give

`workload: {dataset: sonnet, path: poem.txt, input_len: [1024, 2048]}` makes input length an axis: every
configuration runs every length at every load (point ids `in1024-c4`), the same requests per length for all;
analysis, the recommendation and the plots are given per length (WorkloadSpec says how a range differs).

A candidate with `synthetic_acceptance: {rates: [...]}` or `{length: L}` runs with acceptance set at random
instead of verified (benchmarking only); its id says so, and it is never recommended. `tree: {topk, depth, nodes}`
(or a list of trees) drafts a token tree on the engines that draw one; K is then the tree's depth.

`num_speculative_tokens: LO-HI` is a range of K: the sweep measures two of them (config/k_range.py: 1-6 runs 2 and
5), and `sweep --verify` lets the step-cost model calibrated on them propose the others, each measured head to head
before it may enter the table (workflows/propose.py), so the answer covers the range without a server per K.

`load: {concurrency: auto}` lets the sweep choose the concurrencies: it measures 1, 8 and 64, then each next point
inside the widest bracket where speculation stops paying or the best K changes, until every such bracket is
narrower than 1.5x or 8 points ran (`{concurrency: {auto: {min, max, start, width, max_points}}}` sets them;
config/load_search.py). A search implies interleave.

`gpus: [0, 1]` (or `--gpus 0,1`) names the GPUs the sweep may use (default: CUDA_VISIBLE_DEVICES, else every GPU
nvidia-smi lists); placement/place.py decides which server runs on which, with what memory share.
"""

from __future__ import annotations

import itertools
import operator
from functools import reduce
from pathlib import Path
from types import GenericAlias, NoneType
from typing import TYPE_CHECKING, Annotated, Any, get_args

from pydantic import (
    AfterValidator,
    AliasChoices,
    Field,
    ValidationError,
    create_model,
    field_validator,
    model_validator,
)
from pydantic.fields import FieldInfo

from specmeter.common.errors import InputError, validation_message
from specmeter.config.endpoints import BaselineServer, Endpoint, normalize_endpoint
from specmeter.config.files import build_model, load_yaml
from specmeter.config.flags import Flag
from specmeter.config.k_range import measured_spread, parse_k_range
from specmeter.config.models import EngineSpec, LoadSpec, SpecConfig, SpecMethod, StrictModel
from specmeter.config.schedule import Schedule
from specmeter.config.synthetic import SyntheticAcceptance
from specmeter.config.workload import WorkloadSpec
from specmeter.placement.inventory import parse_gpu_ids
from specmeter.placement.servers import place_configs, placed
from specmeter.plans.run import BASELINE, config_id
from specmeter.schemas.analysis import indifference_for
from specmeter.schemas.placement import Gpu, Placement
from specmeter.schemas.plan import Plan, PlannedConfig, Role, WorkloadSelection

# Keys of a candidate entry that take a list of values (expanded to every combination).
EXPANDED = ("num_speculative_tokens", "draft_model", "prompt_lookup_min", "prompt_lookup_max", "draft_p_min", "tree")


# Names a candidate entry also takes for a SpecConfig key.
_ALIASES = {"num_speculative_tokens": "k"}


class _Candidate(StrictModel):
    """One entry of `candidates`: the sweep's own keys; SpecConfig's keys are added to it as CandidateSpec."""

    id: str | None = Field(default=None, description="Name the configuration (only without lists).")
    method: SpecMethod  # required here: the baseline (none) is in every sweep already
    if TYPE_CHECKING:  # the field comes after SpecConfig's (_ENDPOINT), so an entry's errors come in its key order
        endpoint: Endpoint | None

    @model_validator(mode="after")
    def _expandable(self) -> _Candidate:
        if self.method is SpecMethod.none:
            raise ValueError("method none is the baseline, which every sweep includes; list only speculative "
                             "configurations")
        specs = self.expand()
        if self.id is not None and len(specs) > 1:
            raise ValueError(f"id {self.id!r} names one configuration, but this entry expands to {len(specs)}")
        if self.endpoint is not None and len(specs) > 1:
            raise ValueError("endpoint attaches to one running server (or its replicas), but this entry expands to "
                             f"{len(specs)} configurations")
        if self.id is not None and specs[0].synthetic and not _says_synthetic(self.id):
            raise ValueError(f"id {self.id!r} names a synthetic-acceptance configuration: put 'synth' in it, so every "
                             "table and plot that shows the id shows it is synthetic (or leave id out)")
        return self

    @property
    def k_range(self) -> tuple[int, int] | None:
        """The range `num_speculative_tokens: LO-HI` gives (None: Ks listed)."""
        k: object = getattr(self, "num_speculative_tokens", None)
        if not isinstance(k, str):
            return None
        try:
            return parse_k_range(k)
        except ValueError as exc:
            raise ValueError(f"num_speculative_tokens {exc}, or list the Ks like [2, 4]") from None

    def expand(self) -> list[SpecConfig]:
        """Every combination of the listed values, validated as a SpecConfig each; a K range runs its spread."""
        fixed = self.model_dump(exclude={"id", "endpoint", *EXPANDED}, exclude_none=True)
        k_range = self.k_range
        axes = [[(key, v) for v in (measured_spread(k_range) if key == "num_speculative_tokens" and k_range
                                    else _values(getattr(self, key)))] for key in EXPANDED]
        out: list[SpecConfig] = []
        for combo in itertools.product(*axes):
            raw = {**fixed, **{k: v for k, v in combo if v is not None}}
            try:
                out.append(SpecConfig.model_validate(raw))
            except ValidationError as exc:
                raise ValueError(validation_message(exc, "", SpecConfig)) from exc
        return out


def _spec_field(name: str, info: FieldInfo) -> tuple[Any, FieldInfo]:
    """A SpecConfig field as a candidate entry takes it: a key in EXPANDED also as a list of values, and no bounds
    or validators, since SpecConfig checks each combination the lists expand to (its message names the value)."""
    annotation: Any = info.annotation
    if name in EXPANDED:  # `T | None` becomes `T | list[T] | None`
        one = reduce(operator.or_, [a for a in get_args(annotation) if a is not NoneType])
        annotation = one | GenericAlias(list, (one,)) | None
    if name == "num_speculative_tokens":  # and K also as a range, "LO-HI"
        annotation = annotation | str
    aliases = info.validation_alias.choices if isinstance(info.validation_alias, AliasChoices) else [name]
    if name in _ALIASES:
        aliases = [*aliases, _ALIASES[name]]
    alias = AliasChoices(*aliases) if len(aliases) > 1 else None
    if info.default_factory is not None:
        return annotation, Field(default_factory=info.default_factory, validation_alias=alias,
                                 description=info.description)
    return annotation, Field(default=info.default, validation_alias=alias, description=info.description)


_ENDPOINT = (Annotated[Endpoint | None, AfterValidator(normalize_endpoint)],
             Field(default=None, description="Attach to a server already running this config (a list: its "
                   "data-parallel replicas)."))

# SpecConfig's keys reach sweep files from its one declaration: a field added there is a candidate key too.
if TYPE_CHECKING:
    CandidateSpec = _Candidate
else:
    CandidateSpec = create_model(
        "CandidateSpec", __base__=_Candidate, __module__=__name__,
        __doc__="One entry of `candidates`. Lists expand: K [2, 4] x draft models [a, b] gives four configurations.",
        **{name: _spec_field(name, info) for name, info in SpecConfig.model_fields.items() if name != "method"},
        endpoint=_ENDPOINT)


def _says_synthetic(config_id: str) -> bool:
    return "synth" in config_id.lower() or "ceiling" in config_id.lower()


def _values(value: Any) -> list[Any]:
    if isinstance(value, list):
        if not value:
            raise ValueError("an empty list expands to no configuration; give at least one value")
        return value
    return [value]


class SweepSpec(Schedule, BaselineServer):
    """A sweep file: a workload, an engine and target, candidates, load points, and how they run (repeats,
    interleave)."""

    workload: WorkloadSpec = Field(default_factory=WorkloadSpec)
    engine: EngineSpec
    candidates: list[CandidateSpec] = Field(min_length=1)
    load: LoadSpec = Field(default_factory=LoadSpec)
    seed: int | None = Field(default=None, description="Sets load.seed: sampling, selection and arrivals.")
    min_gain: float = Field(default=0.01, ge=0.0, lt=1.0, description="A costlier configuration must beat a "
                            "cheaper one head to head by more than this fraction to be chosen.")
    indifference: float | None = Field(default=None, ge=0.0, lt=1.0, description="A costlier configuration "
                                       "settled at most this fraction better than a cheaper one is a tie: the cheaper "
                                       "is kept, and a point whose decisions are settled or tied stops sampling. At "
                                       "least min_gain (equal: no ties). Default: 0.03, or min_gain where larger.")
    ceiling: Annotated[bool, Flag("--ceiling")] = Field(
        default=False, description="Add, per drafter and K of the launched candidates, the same configuration at 100% "
        "synthetic acceptance (AL = K + 1; llama.cpp, or vLLM on a GPU build): the most any drafter of that cost could "
        "give at that K on this engine and hardware. Never recommended.")
    gpus: Annotated[list[str] | None, Flag("--gpus", text=parse_gpu_ids)] = Field(
        default=None, description="GPU ids the sweep may use, e.g. 0,1 (nvidia-smi's indices; default: "
        "CUDA_VISIBLE_DEVICES, else every GPU nvidia-smi lists). Interleaved servers get GPUs of their own, or share "
        "them with equal memory fractions.")

    @field_validator("gpus", mode="before")
    @classmethod
    def _gpu_ids(cls, value: Any) -> Any:
        if isinstance(value, list) and not any(isinstance(v, bool) for v in value):
            value = ",".join(str(v) for v in value)
        return parse_gpu_ids(value, "gpus") if isinstance(value, str) else value

    @model_validator(mode="after")
    def _servable(self) -> SweepSpec:
        if self.load.search and "interleave" not in self.model_fields_set:
            self.interleave = True  # a search compares every configuration at each point it chose
        elif self.load.search and not self.interleave:
            raise ValueError(f"load.{self.load.search[0].key} auto places each next point from head-to-head "
                             "comparisons at the points before it, which needs every server up together; drop "
                             "interleave: false or list the points")
        if self.workload.lengths and self.load.search:
            raise ValueError(f"load.{self.load.search[0].key} auto with a workload.input_len axis is not supported; "
                             "list the loads")
        if self.workload.lengths and any(p.input_len is not None for p in self.load.points):
            raise ValueError("load.points: input_len comes from workload.input_len; drop it from the points")
        if not self.engine.launch and self.baseline_endpoint is None:
            raise ValueError("the baseline needs a server: give engine.model (launch) or baseline_endpoint (attach)")
        for i, cand in enumerate(self.candidates):
            if cand.endpoint is None and not self.engine.launch:
                raise ValueError(f"candidates.{i}: give it an endpoint, or engine.model so specmeter launches it")
        if self.indifference is not None and self.indifference < self.min_gain:
            raise ValueError(f"indifference {self.indifference:g} is below min_gain {self.min_gain:g}: a tie straddles "
                             "1 + min_gain, so a narrower zone never holds one; set indifference to "
                             f"{self.min_gain:g} or more (equal: no ties), or leave it out")
        if self.ceiling and not any(c.endpoint is None for c in self.candidates):
            raise ValueError("ceiling launches each drafter at 100% synthetic acceptance, but every candidate attaches "
                             "to a running server; give a candidate without endpoint (and engine.model), or drop "
                             "ceiling")
        try:
            self.configs()  # configuration ids must be unique: say so while the file is validated
        except InputError as exc:
            raise ValueError(str(exc)) from None
        return self

    def configs(self) -> list[PlannedConfig]:
        """The baseline first, then every expanded candidate, with unique ids."""
        base_engine = (self.engine if self.baseline_endpoint is None
                       else self.engine.model_copy(update={"endpoint": normalize_endpoint(self.baseline_endpoint)}))
        out = [PlannedConfig(id=BASELINE, role=Role.baseline, spec=SpecConfig(), engine=base_engine, server=BASELINE)]
        drafts = {s.draft_model for c in self.candidates for s in c.expand() if s.draft_model}
        for i, cand in enumerate(self.candidates):
            engine = (self.engine if cand.endpoint is None
                      else self.engine.model_copy(update={"endpoint": normalize_endpoint(cand.endpoint)}))
            for spec in cand.expand():
                cid = cand.id or config_id(spec)
                if len(drafts) > 1 and spec.draft_model and cand.id is None:
                    cid += f"-{Path(spec.draft_model).name}"  # tell draft models apart
                if any(c.id == cid for c in out):
                    raise InputError(f"candidates.{i}: gives configuration {cid} a second time; remove the "
                                     "duplicate or give ids")
                out.append(PlannedConfig(id=cid, role=Role.candidate, spec=spec, engine=engine, server=cid,
                                         k_range=cand.k_range))
        return out + (self._ceilings(out) if self.ceiling else [])

    def _ceilings(self, configs: list[PlannedConfig]) -> list[PlannedConfig]:
        """Per drafter and K of the launched, verified (not synthetic), static candidates: the same configuration
        with every draft accepted (synthetic length K + 1), under the candidate's id with '-ceiling'."""
        out: list[PlannedConfig] = []
        seen = {c.spec.model_dump_json() for c in configs}
        for c in configs:
            if (c.role is not Role.candidate or not c.engine.launch or c.spec.synthetic
                    or c.spec.num_speculative_tokens_per_batch_size or c.spec.drafts_tree):
                continue  # (a tree has no chain positions to set: no engine that draws trees has synthetic acceptance)
            spec = c.spec.model_copy(update={"synthetic_acceptance": SyntheticAcceptance(length=c.k + 1)})
            key = spec.model_dump_json()
            if key in seen:
                continue
            seen.add(key)
            cid = f"{c.id}-ceiling"
            if any(o.id == cid for o in [*configs, *out]):
                raise InputError(f"ceiling: configuration {cid} is already in the sweep; rename that candidate")
            out.append(PlannedConfig(id=cid, role=Role.candidate, spec=spec, engine=c.engine, server=cid))
        return out

    def effective_load(self) -> LoadSpec:
        """The load as the plan runs it: with an input-length axis, every load point at every length."""
        load = self.load if self.seed is None else self.load.model_copy(update={"seed": self.seed})
        if self.workload.num_prompts is not None:
            load = load.model_copy(update={"num_prompts": self.workload.num_prompts})
        if self.workload.lengths:
            points = [p.model_copy(update={"input_len": n}) for n in self.workload.lengths for p in load.points]
            load = load.model_copy(update={"points": points})
        return load

    def place(self, gpus: list[Gpu], source: str) -> Placement:
        """Which launched server runs on which of `gpus`, with what memory share (none: a CPU run)."""
        return place_configs(self.configs(), gpus, source, interleave=self.interleave)

    def interleaved(self, placement: Placement | None) -> bool:
        """Whether the servers run up together: as asked, unless the placement had to run one at a time, which what
        needs them together (adaptive precision, a load search) refuses."""
        return interleaved(self.interleave, self.load, placement)

    def plan(self, workload: WorkloadSelection, placement: Placement | None = None) -> Plan:
        """The plan; with a placement, each server's GPUs and memory share in its engine, and interleave off where
        the placement had to run one server at a time."""
        interleave = self.interleaved(placement)
        configs = self.configs() if placement is None else placed(self.configs(), placement)
        load = self.effective_load().with_precision(interleave=interleave, repeats=self.repeats, default="adaptive")
        return Plan(kind="sweep", configs=configs, load=load, repeats=self.repeats, min_gain=self.min_gain,
                    indifference=indifference_for(self.min_gain, self.indifference), interleave=interleave,
                    workload=workload, placement=placement)


def interleaved(interleave: bool, load: LoadSpec, placement: Placement | None) -> bool:
    """See SweepSpec.interleaved (a plan's load has its precision decided; a sweep file's None becomes fixed when
    the servers run one at a time)."""
    if not interleave or placement is None or placement.mode != "sequential":
        return interleave
    needs = ("load.precision adaptive" if load.precision == "adaptive"
             else f"load.{load.search[0].key} auto" if load.search else None)
    if needs is not None:
        raise InputError(f"{placement.warning}; but {needs} needs every server up together: give more GPUs "
                         "(--gpus), or list the points with precision: fixed")
    return False


def placed_on_node(plan: Plan, gpus: list[Gpu], source: str) -> Plan:
    """A plan placed where it runs, when that is decided there (a Slurm job, on the GPUs of its allocation): each
    launched server's GPUs and memory share in its engine, and interleave off where they must run one at a time."""
    placement = place_configs(plan.configs, gpus, source, interleave=plan.interleave)
    together = interleaved(plan.interleave, plan.load, placement)
    return plan.model_copy(update={"configs": placed(plan.configs, placement), "placement": placement,
                                   "interleave": together})


def read_sweep_file(path: Path) -> SweepSpec:
    """Validate a sweep file; an error names the file, the key path and the fix."""
    spec: SweepSpec = build_model(SweepSpec, load_yaml(path), str(path))
    return spec
