"""Validated configuration models: what to speculate with, which engine, what load.

Everything a run does is decided here, before any server starts, so that a wrong key, type or
impossible value fails in one line that names the key and the fix.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Annotated, Any, ClassVar, Literal

from pydantic import (
    AliasChoices,
    Field,
    field_serializer,
    field_validator,
    model_validator,
)

from specmeter.common.errors import InputError
from specmeter.common.installed import module_available
from specmeter.common.redact import redact_argv, redact_env
from specmeter.config import flag_text
from specmeter.config.dynamic_k import dynamic_k_at as dynamic_k_at  # re-exported: its users import it from here
from specmeter.config.dynamic_k import validate_dynamic_k
from specmeter.config.endpoints import Endpoint, endpoint_list, normalize_endpoint
from specmeter.config.flags import Flag
from specmeter.config.load_search import LoadSearch
from specmeter.config.points import POINT_KINDS as POINT_KINDS  # re-exported, as the other point names below
from specmeter.config.points import REQUESTS_PER_SLOT_FLOOR as REQUESTS_PER_SLOT_FLOOR
from specmeter.config.points import ArrivalKind as ArrivalKind
from specmeter.config.points import ConcurrencyPoint as ConcurrencyPoint
from specmeter.config.points import LoadPoint as LoadPoint
from specmeter.config.points import PointsShorthand, one_user, point_shorthand
from specmeter.config.points import RatePoint as RatePoint
from specmeter.config.points import SaturationRule as SaturationRule
from specmeter.config.points import StrictModel as StrictModel
from specmeter.config.points import TracePoint as TracePoint
from specmeter.config.slo import SLO
from specmeter.config.synthetic import SyntheticAcceptance, synthetic_extra
from specmeter.config.tree import TreeDraft, tree_extra

# The names a config may use, owned here; the modules that act on them take them from here.
ENGINE_KINDS = ("vllm", "llamacpp", "sglang", "trtllm")  # each is specmeter.engines.<kind> (engines/registry.py)
EventLoop = Literal["auto", "uvloop", "asyncio"]  # load/eventloop.py makes the loop


class SpecMethod(str, Enum):
    """Drafters specmeter knows how to configure on every engine that supports them."""

    none = "none"
    ngram = "ngram"
    suffix = "suffix"
    draft_model = "draft_model"
    eagle = "eagle"
    eagle3 = "eagle3"
    mtp = "mtp"


NEEDS_DRAFT_MODEL = {SpecMethod.draft_model, SpecMethod.eagle, SpecMethod.eagle3}
# Drafters that grow a token tree on the engines that draw one (an EAGLE-style head, or MTP run through it).
TREE_METHODS = (SpecMethod.eagle, SpecMethod.eagle3, SpecMethod.mtp)


Precision = Literal["fixed", "adaptive"]


class SpecConfig(StrictModel):
    """Engine-neutral speculative decoding configuration."""

    method: SpecMethod = SpecMethod.none
    num_speculative_tokens: int | None = Field(
        default=None, ge=1, le=64, description="K: tokens drafted per step (the maximum under dynamic K)."
    )
    # `model` is vLLM's own key for it: accept both so a vLLM speculative config pastes in unchanged.
    draft_model: str | None = Field(
        default=None,
        validation_alias=AliasChoices("draft_model", "model"),
        description="Path or hub id of the draft/EAGLE/MTP head (alias: model).",
    )
    prompt_lookup_min: int | None = Field(default=None, ge=1, description="n-gram: shortest match.")
    prompt_lookup_max: int | None = Field(default=None, ge=1, description="n-gram: longest match.")
    num_speculative_tokens_per_batch_size: list[tuple[int, int, int]] | None = Field(
        default=None, description="Dynamic K: [[start_bs, end_bs, K], ...], inclusive ranges from 1."
    )
    draft_tensor_parallel_size: int | None = Field(default=None, ge=1)
    synthetic_acceptance: SyntheticAcceptance | None = Field(
        default=None, description="Benchmarking only: accept drafts at random with set rates instead of verifying "
        "them (outputs are not valid text; costs are real). Never recommended, never checked for losslessness.")
    tree: TreeDraft | None = Field(
        default=None, description="Draft a token tree each step instead of one chain: {topk, depth, nodes} or "
        "{choices: [...]}; K (num_speculative_tokens) is then the tree's depth (EAGLE-style methods only).")
    draft_p_min: float | None = Field(
        default=None, ge=0.0, le=1.0, description="Draft model: stop a step's draft where the draft's probability "
        "of its next token falls below this floor (llama.cpp --spec-draft-p-min; a list in a sweep file: one "
        "candidate per floor). None: the engine's default (llama.cpp's is 0: no floor).")
    adaptive: bool = Field(
        default=False, description="The engine's own adaptive speculation, K the most it drafts: vLLM's "
        "enable_adaptive_verification (GPU builds), SGLang's --speculative-adaptive, TensorRT-LLM's acceptance "
        "threshold (with extra acceptance_window and acceptance_length_threshold); llama.cpp's confidence floor is "
        "draft_p_min at any K instead.")
    target_model: str | None = Field(
        default=None, description="MTP: serve this configuration's target from this checkpoint of the same model, "
        "one that keeps its MTP layers, where engine.model has none (a checkpoint converted or quantized without "
        "them); the baseline and the other configurations serve engine.model, and the outputs are checked against "
        "the baseline's as always. Launch mode only.")
    extra: dict[str, Any] = Field(default_factory=dict, description="Passed through to the engine as is.")

    @property
    def enabled(self) -> bool:
        return self.method is not SpecMethod.none

    @property
    def k(self) -> int:
        return self.num_speculative_tokens or 0

    @model_validator(mode="after")
    def _check(self) -> SpecConfig:
        if not self.enabled:
            if self.synthetic_acceptance is not None:
                raise ValueError("synthetic_acceptance needs a drafter: give method and num_speculative_tokens")
            if self.tree is not None:
                raise ValueError("tree needs a drafter: give method (eagle, eagle3 or mtp)")
            return self
        if self.tree is not None:
            self._check_tree(self.tree)
        if self.num_speculative_tokens is None:
            raise ValueError(f"method {self.method.value} needs num_speculative_tokens (K >= 1)")
        if self.method in NEEDS_DRAFT_MODEL and not self.draft_model:
            raise ValueError(f"method {self.method.value} needs draft_model (a path or hub id)")
        if self.target_model is not None and self.method is not SpecMethod.mtp:
            raise ValueError(f"target_model serves an MTP drafter's own target checkpoint; {self.method.value} drafts "
                             "with a model of its own (draft_model): drop target_model")
        if self.draft_p_min is not None and self.method in (SpecMethod.ngram, SpecMethod.suffix):
            raise ValueError(f"draft_p_min is a floor on a draft model's probabilities, which {self.method.value} "
                             "lookup has none of; drop it")
        lo, hi = self.prompt_lookup_min, self.prompt_lookup_max
        if lo is not None and hi is not None and lo > hi:
            raise ValueError(f"prompt_lookup_min ({lo}) must not exceed prompt_lookup_max ({hi})")
        if self.num_speculative_tokens_per_batch_size is not None:
            validate_dynamic_k(self.num_speculative_tokens_per_batch_size, self.num_speculative_tokens)
        if (key := synthetic_extra(self.extra)) is not None:
            raise ValueError(f"extra.{key} switches synthetic acceptance on where results cannot see it; give "
                             "synthetic_acceptance: {rates: [...]} or {length: L} instead")
        if (key := tree_extra(self.extra)) is not None:
            raise ValueError(f"extra.{key} shapes a draft tree where results cannot see it (they would read it as a "
                             "chain); give tree: {topk, depth, nodes} or {choices: [...]} instead, or leave it out "
                             "for a chain")
        if self.synthetic_acceptance is not None:
            self.synthetic_acceptance.check_k(self.num_speculative_tokens)
        return self

    def _check_tree(self, tree: TreeDraft) -> None:
        """A tree needs an EAGLE-style drafter, and its depth is K: fill K in, or check the K given."""
        if self.method not in TREE_METHODS:
            raise ValueError(f"tree needs an EAGLE-style drafter (method {', '.join(m.value for m in TREE_METHODS)}); "
                             f"{self.method.value} drafts one chain: drop tree")
        depth = tree.max_depth
        if self.num_speculative_tokens is None:
            self.num_speculative_tokens = depth
        elif self.num_speculative_tokens != depth:
            raise ValueError(f"num_speculative_tokens {self.num_speculative_tokens} differs from the tree's depth "
                             f"{depth}: for a tree K is its depth (the most drafts a step accepts); drop "
                             f"num_speculative_tokens or set it to {depth}")
        if self.synthetic_acceptance is not None:
            raise ValueError("synthetic_acceptance sets one rate per chain position; a tree has no chain positions "
                             "(no engine that draws trees has synthetic acceptance): drop one of the two")
        table = self.num_speculative_tokens_per_batch_size or []
        if any(k not in (0, depth) for _, _, k in table):
            raise ValueError(f"num_speculative_tokens_per_batch_size: a tree drafts its whole depth ({depth}) or "
                             "nothing: give K 0 or the depth in every range")

    @property
    def synthetic(self) -> bool:
        """Acceptance set at random, not verified: a measurement device, never a deployable configuration."""
        return self.enabled and self.synthetic_acceptance is not None

    @property
    def drafts_tree(self) -> bool:
        """Each step drafts a token tree (K is its depth), not one chain of K."""
        return self.enabled and self.tree is not None

    def label(self) -> str:
        """Short human label, e.g. 'draft_model K=4', 'draft_model K=4 synthetic AL=3.4', 'eagle3 tree depth 5,
        63 nodes, top-8' or 'off'."""
        if not self.enabled:
            return "off"
        if self.tree is not None:
            dyn = " dynamic" if self.num_speculative_tokens_per_batch_size else ""
            return f"{self.method.value} {self.tree.label()}{dyn}"
        dyn = " dynamic" if self.num_speculative_tokens_per_batch_size else ""
        synth = f" {self.synthetic_acceptance.label(self.k)}" if self.synthetic_acceptance else ""
        floor = f" p-min {self.draft_p_min:g}" if self.draft_p_min is not None else ""
        adaptive = " adaptive" if self.adaptive else ""
        return f"{self.method.value} K={self.k}{dyn}{floor}{adaptive}{synth}"


class EngineSpec(StrictModel):
    """How to reach the engine: attach to `endpoint` (one server, or a list of its data-parallel replicas), or
    launch `kind` serving `model`."""

    kind: Annotated[str | None, Flag("--engine")] = Field(
        default=None, description="vllm, llamacpp, sglang or trtllm (default: vllm when launching; detected from "
        "the server when attaching).")
    model: Annotated[str | None, Flag("--model")] = Field(
        default=None, description="Target model to launch: a model directory or hub id (llamacpp: or a .gguf file).")
    endpoint: Annotated[Endpoint | None, Flag("--endpoint")] = Field(
        default=None, description="Attach to a running OpenAI-compatible server at this base URL; repeat it for "
        "data-parallel replicas (requests spread, counters summed; no load balancer in front).")
    served_model_name: Annotated[str | None, Flag("--served-model-name")] = Field(
        default=None, description="Model name to request (default: from /v1/models).")
    host: str = Field(default="127.0.0.1", description="Bind address of a launched server (loopback).")
    port: int | None = Field(default=None, ge=1, le=65535, description="None: pick a free port.")
    dtype: Annotated[str | None, Flag("--dtype")] = Field(
        default=None, description="Model dtype: float32, bfloat16 (bf16), float16 (fp16) or fp8 (default: the "
        "engine's).")
    max_model_len: Annotated[int | None, Flag("--max-model-len")] = Field(
        default=None, ge=16, description="Launch mode: context length.")
    max_num_seqs: int | None = Field(default=None, ge=1)
    tensor_parallel_size: int | None = Field(default=None, ge=1, description="GPUs the target is split over (vLLM "
                                             "--tensor-parallel-size, SGLang --tp-size, TensorRT-LLM "
                                             "tensor_parallel_size; llama.cpp splits over the GPUs it sees).")
    memory_fraction: float | None = Field(default=None, gt=0.0, le=1.0, description="Share of each GPU's memory the "
                                          "server may take (vLLM gpu_memory_utilization, SGLang mem_fraction_static, "
                                          "TensorRT-LLM free_gpu_memory_fraction); None: the engine's default, or "
                                          "the equal share placement gives servers that share a GPU.")
    trust_remote_code: bool = False
    extra_args: Annotated[list[str], Flag("--engine-arg")] = Field(
        default_factory=list, description="Extra server argument (repeatable), e.g. --engine-arg=--enforce-eager.")
    env: Annotated[dict[str, str], Flag("--engine-env")] = Field(
        default_factory=dict, description="Launch mode: server environment KEY=VALUE (repeatable).")
    startup_timeout_s: Annotated[float, Flag("--startup-timeout")] = Field(
        default=600.0, gt=0, description="Seconds to wait for a launched server.")

    def serving(self, spec: SpecConfig) -> EngineSpec:
        """The engine as it launches `spec`: from the spec's own target checkpoint where it names one (an MTP
        target that keeps its MTP layers), still requested under this engine's model name."""
        if spec.target_model is None:
            return self
        return self.model_copy(update={"model": spec.target_model,
                                       "served_model_name": self.served_model_name or self.model})

    @model_validator(mode="after")
    def _mode(self) -> EngineSpec:
        if self.endpoint is None and self.model is None:
            raise ValueError("give either endpoint (attach to a running server) or model (launch one)")
        self.endpoint = normalize_endpoint(self.endpoint)
        if self.kind is not None and self.kind not in ENGINE_KINDS:
            raise ValueError(f"unknown engine {self.kind!r}; choose one of: {', '.join(ENGINE_KINDS)}")
        if self.kind is None and self.endpoint is None:
            self.kind = "vllm"
        if self.memory_fraction is not None and self.kind == "llamacpp":
            raise ValueError("llamacpp has no memory fraction (its KV cache is its context, -c): drop memory_fraction")
        return self

    @property
    def launch(self) -> bool:
        return self.endpoint is None

    @property
    def endpoints(self) -> list[str]:
        """The attached replicas' base URLs, in the order given ([] in launch mode)."""
        return endpoint_list(self.endpoint)

    # Whatever writes an EngineSpec down (summary.json, the stored plan) gets no secrets.
    @field_serializer("extra_args")
    def _redact_args(self, args: list[str]) -> list[str]:
        return redact_argv(args)

    @field_serializer("env")
    def _redact_env(self, env: dict[str, str]) -> dict[str, str]:
        return redact_env(env)

    @property
    def has_redacted_secret(self) -> bool:
        """True for a spec read back from disk whose secrets were redacted: it cannot be relaunched."""
        return any("***" in a for a in self.extra_args) or "***" in self.env.values()


@dataclass(frozen=True)
class InRequest:
    """Marks a load field every request carries in its body under the field's name, where set (None: the server's
    own default): a sampling parameter. load/requests.py sends them and analysis/compare.py compares them, so a new
    one is its field alone."""


class LoadSpec(StrictModel):
    """The load points and how every request is made: identical for every configuration of a plan.

    `concurrency: [1, 4]` and `request_rate: [2.0]` are shorthands for `points` (config/points.py's
    PointsShorthand); `concurrency: auto` searches that axis (config/load_search.py): its start loads become the
    first points, and the sweep adds the ones it chooses.
    """

    SHORTHAND: ClassVar[type[PointsShorthand]] = PointsShorthand
    # Given over a section (a flag over a file), any of these replaces all of them: the points given are the points.
    REPLACES: ClassVar[tuple[str, ...]] = ("points", "search", "concurrency", "request_rate", "trace_scale")

    api: Annotated[Literal["chat", "completions"], Flag("--api")] = Field(
        default="chat", description="The API requests use: chat (/v1/chat/completions) or completions.")
    points: list[LoadPoint] = Field(default_factory=lambda: one_user(), description="Load points, run in this order.")
    num_prompts: Annotated[int | None, Flag("--num-prompts")] = Field(
        default=None, ge=1, description="Conversations to send per point, stratified by category (None: all).")
    duration_s: Annotated[float | None, Flag("--duration")] = Field(
        default=None, gt=0, description="Seconds per point: instead of one pass over the conversations, keep "
        "starting them (cycling) for this long.")
    warmup: Annotated[int, Flag("--warmup")] = Field(
        default=2, ge=0, description="Requests sent first at each point and excluded from results.")
    warmup_max_tokens: int = Field(
        default=16, ge=1, description="The most output tokens of a warmup request: enough to run the server's paths "
        "(prefill, drafting, verification) before the point is measured, not a whole answer, since a warmup runs "
        "before every round of every configuration.")
    max_tokens: Annotated[int, Flag("--max-tokens")] = Field(default=128, ge=1, description="Output cap per request.")
    ignore_eos: Annotated[bool, Flag("--ignore-eos")] = Field(
        default=False, description="Force max-tokens outputs (biases acceptance).")
    temperature: Annotated[float, Flag("--temperature"), InRequest()] = Field(
        default=0.0, ge=0.0, description="Sampling temperature (0: greedy).")
    top_p: Annotated[float | None, Flag("--top-p"), InRequest()] = Field(
        default=None, gt=0.0, le=1.0, description="Nucleus sampling: the probability mass sampled from (None: the "
        "server's default).")
    top_k: Annotated[int | None, Flag("--top-k"), InRequest()] = Field(
        default=None, ge=1, description="Top-k sampling: only the k likeliest tokens are sampled from (None: the "
        "server's default).")
    seed: int = 0
    request_timeout_s: Annotated[float, Flag("--request-timeout")] = Field(
        default=300.0, gt=0, description="Seconds before one request counts as timed out.")
    max_error_rate: Annotated[float, Flag("--max-error-rate")] = Field(
        default=0.5, ge=0.0, le=1.0, description="Stop when more than this fraction of requests fail.")
    client_processes: int | None = Field(
        default=None, ge=1, description="Processes the client sends a point's requests from, all timing on one "
        "monotonic clock (None: automatic: 1 below 512 requests in flight, else one per 256 up to the usable "
        "cores). Never more than the point's slots.")
    event_loop: EventLoop = Field(
        default="auto", description="The client's event loop: uvloop (cheaper per streamed chunk, timestamps "
        "closer to the socket), asyncio, or auto: uvloop when installed.")
    precision: Precision | None = Field(
        default=None, description="fixed: every point runs `repeats` rounds. adaptive: a point runs rounds (the "
        "same requests for every configuration, interleaved) until every head-to-head decision there is settled, "
        "between min_rounds and max_rounds. None: the command's default (adaptive for sweep, demo and verify when "
        "interleaved with one repeat, else fixed).")
    min_rounds: int = Field(default=2, ge=1, description="adaptive: rounds a point always runs (in alternating "
                            "order, so no decision rests on one lucky round or on who ran first).")
    max_rounds: Annotated[int, Flag("--max-rounds")] = Field(
        default=4, ge=1, description="Adaptive: the most rounds a point runs; the confidence is spent over the "
        "looks this allows.")
    instances: Annotated[int, Flag("--instances")] = Field(
        default=1, ge=1, le=4, description="Servers started per launched configuration, its rounds alternating "
        "between them (round r on instance r mod instances), so what a restart changes (where memory lands, which "
        "cores a server gets) is measured and in the intervals (1: one server each, restarts unmeasured; "
        "attached servers are one instance).")
    futility: float = Field(default=0.05, ge=0.0, lt=1.0, description="adaptive: a point also stops once no "
                            "open comparison has more than this chance (predictive probability) of ending as a "
                            "win by max_rounds, or of ending as one with the challenger truly more than the "
                            "indifference zone better: an open comparison keeps the cheaper, as a loss or a tie "
                            "would, so the rounds left could only relabel the answer, or change it by less than the "
                            "zone. 0: every open point runs to its budget.")
    max_requests: int | None = Field(default=None, ge=1, description="adaptive: the most requests one "
                                     "configuration sends at a point over all its rounds.")
    max_seconds: float | None = Field(default=None, gt=0, description="adaptive: no new round starts at a point "
                                      "once it has run this long (all configurations together).")
    search: list[LoadSearch] = Field(default_factory=list, description="Axes whose points a search chooses "
                                     "(`concurrency: auto`): `points` holds the start points and the ones chosen.")
    stop_at_saturation: Annotated[bool, Flag("--stop-at-saturation")] = Field(
        default=True, description="Stop going up the loads once every server saturated (load.saturation): "
        "throughput no longer rising while latency grows; the higher loads of that axis are skipped, with the "
        "load, the numbers and why in summary.json.")
    saturation: SaturationRule = Field(default_factory=SaturationRule)
    slo: Annotated[SLO | None, Flag("--slo", text=flag_text.slo)] = Field(
        default=None, description="Per-request bounds, e.g. ttft_ms=500,tpot_ms=50 (also e2e_ms): each point's "
        "goodput, requests/s meeting them, beside its throughput; what --objective goodput maximises.")

    def request_fields(self) -> dict[str, Any]:
        """What every request's body carries of the fields marked InRequest: those set, by name."""
        return {name: getattr(self, name) for name in IN_REQUEST if getattr(self, name) is not None}

    def point(self, point_id: str) -> LoadPoint | None:
        return next((p for p in self.points if p.id == point_id), None)

    @model_validator(mode="before")
    @classmethod
    def _shorthands(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        short = {k: data[k] for k in PointsShorthand.model_fields if k in data}
        data = {k: v for k, v in data.items() if k not in short}
        if short:
            data = PointsShorthand.model_validate(short).folded(data)
        if "points" in data and isinstance(data["points"], list):
            data["points"] = [point_shorthand(p) for p in data["points"]]
        return data

    @model_validator(mode="after")
    def _rounds(self) -> LoadSpec:
        if self.min_rounds > self.max_rounds:
            raise ValueError(f"min_rounds {self.min_rounds} is above max_rounds {self.max_rounds}; raise max_rounds")
        axes = [s.axis for s in self.search]
        if len(set(axes)) != len(axes):
            raise ValueError("one search per load axis: give concurrency auto (or request_rate auto) once")
        return self

    def measuring_again(self, points: list[LoadPoint]) -> LoadSpec:
        """This load for a plan that measures a sweep's points again beside it (propose, verify): those points as
        the sweep measured them (a load search chose them there), no search or ramp of its own, its precision for
        the plan to decide, and one server instance each: the sweep measured what a restart changes, and a second
        instance of every server beside the new configurations' would double the memory the check needs."""
        return self.model_copy(update={"precision": None, "search": [], "stop_at_saturation": False,
                                       "points": points, "instances": 1})

    def with_precision(self, *, interleave: bool, repeats: int, default: Precision) -> LoadSpec:
        """This load with its precision decided: adaptive compares configurations round by round at each point,
        so it needs them interleaved, and it decides the rounds itself, so repeats do not apply."""
        precision = self.precision
        if precision is None:
            precision = default if interleave and repeats == 1 else "fixed"
        elif precision == "adaptive" and not interleave:
            raise InputError("load.precision adaptive runs every configuration round by round at each point, which "
                             "needs interleave: true (all servers up together); set interleave or precision: fixed")
        elif precision == "adaptive" and repeats > 1:
            raise InputError(f"repeats {repeats} fixes the rounds of every point, but load.precision adaptive decides "
                             "them (min_rounds..max_rounds); drop repeats or set precision: fixed")
        if self.search and not interleave:
            raise InputError(f"load.{self.search[0].key} auto places each next point from head-to-head comparisons "
                             "at the points before it, which needs interleave: true (all servers up together); set "
                             "interleave or list the points")
        return self.model_copy(update={"precision": precision})

    @field_validator("event_loop")
    @classmethod
    def _event_loop_installed(cls, v: EventLoop) -> EventLoop:
        if v == "uvloop" and not module_available("uvloop"):  # say so now, not when the first point starts
            raise ValueError("uvloop is not installed: pip install uvloop, or use auto")
        return v

    @field_validator("points")
    @classmethod
    def _distinct(cls, points: list[LoadPoint]) -> list[LoadPoint]:
        if not points:
            raise ValueError("give at least one load point (e.g. concurrency: [1, 4, 16])")
        ids = [p.id for p in points]
        dupes = sorted({i for i in ids if ids.count(i) > 1})
        if dupes:
            raise ValueError(f"load point {dupes[0]} is listed twice; each point runs once (use repeats)")
        return points


IN_REQUEST = tuple(name for name, info in LoadSpec.model_fields.items()
                   if any(isinstance(m, InRequest) for m in info.metadata))
