"""SGLang (`python -m sglang.launch_server`): launch command and SD stats.

Facts (shared/REFERENCE.md §3; SGLang's docs/advanced_features/speculative_decoding.md, its OpenAI
serving code and its metrics collector, read in the public source):
- speculation: `--speculative-algorithm EAGLE|EAGLE3|STANDALONE|NGRAM` (`NEXTN` is an alias of EAGLE;
  MTP-enabled models run as EAGLE, their draft path filled in by SGLang when omitted), the draft with
  `--speculative-draft-model-path`, and `--speculative-num-steps` / `--speculative-eagle-topk` /
  `--speculative-num-draft-tokens`: all three set, or none (auto-tuned). The verify width
  (num-draft-tokens) counts the root, the token already verified: a single chain (topk 1) of K drafts
  needs K + 1, which SGLang itself forces when topk is 1.
- trees (topk > 1 and num-draft-tokens > steps + 1, EAGLE worker: EAGLE, EAGLE3, MTP): each of the `steps`
  drafting steps keeps the topk best continuations of the topk best branches, so SGLang scores topk +
  (steps - 1) x topk² candidates and verifies the num-draft-tokens - 1 best (eagle_utils.organize_draft_results);
  the tree is grown each step, there is no fixed tree of choices. A step accepts at most `steps` drafts, and the
  per-request histogram counts steps by drafts accepted (0..steps): accepted per depth, over every step.
- /metrics (with `--enable-metrics`): the only cumulative SD counter is `sglang:spec_verify_calls_total`
  (verification steps). `sglang:spec_accept_length` / `sglang:spec_accept_rate` are gauges over the last
  logging window: never differenced. There is no cumulative drafted- or accepted-token counter.
- per request: the native /generate `meta_info`, and on the OpenAI endpoints `sglext.spec_tokens_details`
  when the request sets `return_spec_tokens_details` (streaming: a chunk of its own with `choices: []`,
  before the usage chunk). Three generations of names: `spec_num_correct_drafts` /
  `spec_num_proposed_drafts` / `spec_correct_drafts_histogram` (current), `spec_accepted_drafts` /
  `spec_proposed_drafts` / `spec_accept_histogram` (aliases kept for one release), and
  `spec_accept_token_num` / `spec_draft_token_num` (oldest). `spec_verify_ct` is the step count in all.
  `histogram[j]` counts steps that accepted exactly j drafts (no bonus token). Proposed drafts are
  SGLang's own `steps × (num_draft_tokens − 1)`. `spec_accept_length` is completion_tokens / steps (it
  counts the prefill token): never used here, AL is recomputed as 1 + accepted / steps.
- a K table (num_speculative_tokens_per_batch_size) runs as adaptive speculation's per-batch-size tiers:
  `--speculative-adaptive --speculative-adaptive-config FILE`, FILE a JSON object keyed by a batch size (a
  string) with `candidate_steps` (non-negative ints, 0 drafting nothing) per tier; a batch is routed (after
  padding up to its CUDA-graph batch size) to the tier with the largest key at or below it
  (python/sglang/srt/speculative/adaptive_spec_params.py: _load_adaptive_config, AdaptiveSpeculativeParams
  ._find_closest_bs). One candidate per tier holds the table's K there. Only the EAGLE worker adapts (EAGLE,
  EAGLE3, NEXTN, topk 1: adaptive_unsupported_reason).
- the counts can include tokens past a stop or past max_tokens (a step's accepted drafts are counted
  before the output is cut; REFERENCE §3 names reasoning tokens past EOS), so they need not match the
  emitted length.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from specmeter.common.errors import InputError
from specmeter.common.installed import installed_version
from specmeter.config.models import EngineSpec, SpecConfig, SpecMethod
from specmeter.engines.base import Engine, EngineLauncher, EngineStats, ServerProbe, owned_by
from specmeter.engines.config_files import config_dir, content_file
from specmeter.engines.flags import Each, Flag, Row, Unsupported, argv, dashed, fixed, overridden, settings
from specmeter.schemas.recommend import DeployConfig
from specmeter.schemas.sd import SDCounts
from specmeter.telemetry.prometheus import CounterDelta, Snapshot

VERIFY_CALLS = "sglang:spec_verify_calls_total"
REQUESTS_DONE = "sglang:num_requests_total"
GENERATION_TOKENS = "sglang:generation_tokens_total"
PROMPT_TOKENS = "sglang:prompt_tokens_total"
RUNNING = "sglang:num_running_reqs"
RUNNING_OLD = "sglang:num_requests_running"  # the first metrics generation's name for the same gauge
ACCEPT_LENGTH_GAUGE = "sglang:spec_accept_length"  # windowed: for recognising SGLang only

# Every name only SGLang exposes (either generation): any one of them on /metrics says "this is SGLang".
_OWN_NAMES = (VERIFY_CALLS, REQUESTS_DONE, GENERATION_TOKENS, PROMPT_TOKENS, RUNNING, RUNNING_OLD,
              ACCEPT_LENGTH_GAUGE, "sglang:num_queue_reqs", "sglang:num_requests_waiting", "sglang:token_usage")

REQUEST_FLAG = "return_spec_tokens_details"

_ALGORITHMS = {
    SpecMethod.eagle: "EAGLE",
    SpecMethod.eagle3: "EAGLE3",
    SpecMethod.draft_model: "STANDALONE",
    SpecMethod.ngram: "NGRAM",
    SpecMethod.mtp: "EAGLE",  # SGLang runs MTP heads through its EAGLE worker (NEXTN is the same algorithm)
}

_TREE_ALGORITHMS = (SpecMethod.eagle, SpecMethod.eagle3, SpecMethod.mtp)  # its EAGLE worker
_TIERED = _TREE_ALGORITHMS  # the EAGLE worker is also the one that adapts K per batch-size tier
CONFIG_DIR_ENV = "SPECMETER_SGLANG_CONFIG_DIR"  # where a launch writes its tiers' JSON (engines/config_files.py)
DEPLOY_JSON = "speculative_adaptive_config.json"  # the file a recommendation's tiers go into

# Per-request field names, newest first: the first present wins.
_ACCEPTED = ("spec_num_correct_drafts", "spec_accepted_drafts", "spec_accept_token_num")
_PROPOSED = ("spec_num_proposed_drafts", "spec_proposed_drafts", "spec_draft_token_num")
_HISTOGRAM = ("spec_correct_drafts_histogram", "spec_accept_histogram")
_STEPS = "spec_verify_ct"


def _ngram(spec: SpecConfig) -> bool:
    return spec.tree is None and spec.method is SpecMethod.ngram


def _chain(spec: SpecConfig) -> bool:
    return spec.tree is None and spec.method is not SpecMethod.ngram


def _tree_depth(spec: SpecConfig) -> int | None:
    return None if spec.tree is None else spec.tree.max_depth


def _tree_topk(spec: SpecConfig) -> int | None:
    return None if spec.tree is None else spec.tree.topk


def _tree_width(spec: SpecConfig) -> int | None:
    """The verify width of a tree: its nodes and the root."""
    return None if spec.tree is None else spec.tree.size + 1


def _chain_width(spec: SpecConfig) -> int:
    """The verify width of a chain: K drafts and the root."""
    return spec.k + 1


def tiers(spec: SpecConfig) -> dict[str, dict[str, list[int]]] | None:
    """A K table as SGLang's adaptive tiers: each range's smallest batch size -> one candidate, its K (SGLang routes
    a batch to the largest key at or below it, so each range runs its K)."""
    table = spec.num_speculative_tokens_per_batch_size
    if not table:
        return None
    return {str(start): {"candidate_steps": [min(k, spec.k)]} for start, _, k in table}


def _untiered(spec: SpecConfig) -> bool:
    return bool(spec.num_speculative_tokens_per_batch_size) and (spec.method not in _TIERED or spec.tree is not None)


def _untiered_reason(spec: SpecConfig) -> str:
    return (f"sglang runs a K table as adaptive speculation's per-batch-size tiers, on its EAGLE worker only (eagle, "
            f"eagle3, mtp, one chain); {spec.method.value}{' with a tree' if spec.tree else ''} has none: remove "
            "num_speculative_tokens_per_batch_size or use engine vllm")


def _adapts(spec: SpecConfig) -> bool:
    """--speculative-adaptive: the engine's own adaptive mode, or the tiers a K table runs as."""
    return spec.adaptive or bool(spec.num_speculative_tokens_per_batch_size)


def _lookup_reason(spec: SpecConfig) -> str:
    return f"prompt_lookup_min/max apply to ngram only, not {spec.method.value}"


def _lookup(spec: SpecConfig) -> bool:
    """Whether the spec gives an n-gram lookup window at all."""
    return spec.prompt_lookup_min is not None or spec.prompt_lookup_max is not None


# EngineSpec -> server flags.
ENGINE_FLAGS: tuple[Row[EngineSpec], ...] = (
    Flag("--served-model-name", "served_model_name"),
    Flag("--dtype", "dtype"),
    Flag("--context-length", "max_model_len"),
    Flag("--max-running-requests", "max_num_seqs"),
    Flag("--tp-size", "tensor_parallel_size"),
    Flag("--mem-fraction-static", "memory_fraction"),
    Flag("--trust-remote-code", "trust_remote_code"),
)

# An enabled SpecConfig -> speculation flags. EAGLE, EAGLE3, STANDALONE and MTP draft one chain of K tokens:
# num-steps K, topk 1 and a verify width of K + 1 (the root plus K drafts). A chain keeps K meaning the same as on
# the other engines and makes the per-position rates derived from SGLang's histogram valid. NGRAM drafts the same
# chain: verify width K + 1 and a BFS breadth of 1 (SGLang's default expands a tree of 10). A tree (EAGLE worker)
# sets its depth as num-steps, its topk, and its nodes + 1 (the root) as the verify width. Engine-specific settings
# ride in `extra`, one flag each (True: a bare flag, False: left out), e.g. {"speculative_token_map": "..."}; the
# same key overrides the value chosen above.
SPECULATION_FLAGS: tuple[Row[SpecConfig], ...] = (
    Unsupported(_untiered, _untiered_reason),
    Unsupported("draft_tensor_parallel_size", "sglang has no draft_tensor_parallel_size; remove it or pass the "
                "engine's own flag through spec.extra"),
    Unsupported(_lookup, _lookup_reason, when=lambda spec: spec.method is not SpecMethod.ngram),
    Flag("--speculative-algorithm", "method", write=_ALGORITHMS.__getitem__),
    Flag("--speculative-draft-model-path", "draft_model"),
    Flag("--speculative-num-steps", _tree_depth),
    Flag("--speculative-eagle-topk", _tree_topk),
    Flag("--speculative-num-draft-tokens", _tree_width),
    Flag("--speculative-num-draft-tokens", _chain_width, when=_ngram),
    Flag("--speculative-ngram-min-bfs-breadth", fixed(1), when=_ngram),
    Flag("--speculative-ngram-max-bfs-breadth", fixed(1), when=_ngram),
    Flag("--speculative-ngram-min-match-window-size", "prompt_lookup_min", when=_ngram),
    Flag("--speculative-ngram-max-match-window-size", "prompt_lookup_max", when=_ngram),
    Flag("--speculative-num-steps", "k", when=_chain),
    Flag("--speculative-eagle-topk", fixed(1), when=_chain),
    Flag("--speculative-num-draft-tokens", _chain_width, when=_chain),
    Flag("--speculative-adaptive", _adapts),
    Each("extra", name=dashed),
)


class SGLangLauncher(EngineLauncher):
    name = "sglang"
    no_adaptive = None  # --speculative-adaptive (its tiers per batch size: extra speculative_adaptive_config)
    per_batch_k = True  # a K table runs as the adaptive tiers, one candidate each (--speculative-adaptive-config)
    batch_limit_flags = ("--max-running-requests",)
    methods = tuple(_ALGORITHMS)
    placement_flags = ("--tp-size", "--tensor-parallel-size", "--tp", "--mem-fraction-static")

    def version(self) -> str | None:
        v = installed_version("sglang")
        return None if v is None else f"sglang {v}"

    @staticmethod
    def speculative_args(spec: SpecConfig) -> list[str]:
        """The speculation flags for an engine-neutral SpecConfig (`spec.extra` overrides)."""
        return argv(overridden(settings(SPECULATION_FLAGS, spec)))

    def check_tree(self, spec: SpecConfig) -> None:
        tree = spec.tree
        assert tree is not None
        if spec.method not in _TREE_ALGORITHMS:
            raise InputError(f"sglang grows trees with its EAGLE worker ({', '.join(m.value for m in _TREE_ALGORITHMS)}"
                             f"); {spec.method.value} drafts one chain there: drop tree")
        if tree.fixed or tree.topk is None or tree.depth is None:
            raise InputError("sglang grows its tree each step from topk, depth and nodes and takes no fixed tree of "
                             "choices: give tree: {topk, depth, nodes}, or run the choices on trtllm")
        scored = tree.topk + (tree.depth - 1) * tree.topk ** 2
        if tree.size > scored:
            raise InputError(f"sglang verifies at most the {scored} candidates it scores at topk {tree.topk} and "
                             f"depth {tree.depth} (topk + (depth - 1) x topk²); give tree.nodes <= {scored}")

    def schedule_refusal(self, table: SpecConfig) -> str | None:
        return _untiered_reason(table) if _untiered(table) else None

    def deploy_spec(self, spec: SpecConfig, slots: int | None) -> DeployConfig:
        self.check_deployable(spec)
        self.check_method(spec)
        tiered = tiers(spec)
        if tiered is None:
            return DeployConfig(engine=self.name, dynamic=False, k=spec.k, flags=self.speculative_args(spec))
        return DeployConfig(
            engine=self.name, dynamic=True, k=spec.k,
            flags=[*self.speculative_args(spec), "--speculative-adaptive-config", DEPLOY_JSON], config=tiered,
            config_file=DEPLOY_JSON,
            notes=["each tier holds one candidate, the table's K from its smallest batch size up; SGLang routes a "
                   "batch to the tier at or below it after padding it up to its CUDA-graph batch sizes "
                   "(adaptive_spec_params.py), so a range's K starts at the CUDA-graph size at or below its "
                   "start: align the ranges with --cuda-graph-bs, or check the drafted K per batch"])

    @staticmethod
    def write_tiers(spec: SpecConfig, directory: Path | None = None) -> Path | None:
        """The tiers' JSON a launch passes to --speculative-adaptive-config (None: no table)."""
        tiered = tiers(spec)
        if tiered is None:
            return None
        return content_file(json.dumps(tiered, sort_keys=True), directory or config_dir(CONFIG_DIR_ENV, "sglang"),
                            "adaptive-tiers", ".json")

    def server_command(self, engine: EngineSpec, spec: SpecConfig, port: int) -> list[str]:
        assert engine.model is not None, "launch mode needs a model"
        self.check_method(spec)
        cmd = [
            sys.executable, "-m", "sglang.launch_server",
            "--model-path", engine.model,
            "--host", engine.host,
            "--port", str(port),
            "--enable-metrics",
        ]
        cmd += argv(settings(ENGINE_FLAGS, engine))
        if spec.enabled:
            cmd += self.speculative_args(spec)
            written = self.write_tiers(spec)
            if written is not None:
                cmd += ["--speculative-adaptive-config", str(written)]
        cmd += list(engine.extra_args)
        return cmd


class SGLangStats(EngineStats):
    name = "sglang"

    def can_adapt(self, probe: ServerProbe) -> bool:
        # /v1/models says `owned_by: sglang` even when the server runs without --enable-metrics.
        if owned_by(probe) == "sglang":
            return True
        return probe.metrics is not None and any(probe.metrics.has(n) for n in _OWN_NAMES)

    def request_extensions(self, temperature: float) -> dict[str, Any]:
        return {REQUEST_FLAG: True}

    @property
    def running_gauge(self) -> str | None:
        return RUNNING

    @property
    def unavailable(self) -> dict[str, str]:
        return {
            "SD from /metrics counters": "SGLang counts verification steps (sglang:spec_verify_calls_total) but "
                                         "no drafted or accepted tokens; its acceptance gauges cover only the last "
                                         "logging window. Run-level SD is the sum of the per-request stats "
                                         f"({REQUEST_FLAG}).",
            "drafted tokens per position": "SGLang reports proposed drafts as steps × (num_draft_tokens − 1), not "
                                           "per position",
        }

    @property
    def sd_counter_names(self) -> list[str]:
        return [VERIFY_CALLS]

    @property
    def traffic_counter_names(self) -> dict[str, str]:
        return {"requests": REQUESTS_DONE, "generation_tokens": GENERATION_TOKENS}

    def sd_enabled_in(self, snapshot: Snapshot) -> bool:
        # The counter may be registered with speculation off; it means something once a step was verified.
        return sum(snapshot.series(VERIFY_CALLS).values()) > 0

    def sd_from_counters(self, delta: CounterDelta) -> SDCounts | None:
        """None: SGLang's counters give verification steps only, not drafted or accepted tokens."""
        return None

    def sd_from_response(self, payload: dict[str, Any]) -> tuple[SDCounts | None, dict[str, Any] | None]:
        raw = find_spec_details(payload)
        if raw is None:
            return None, None
        return parse_spec_details(raw), raw


def find_spec_details(payload: dict[str, Any]) -> dict[str, Any] | None:
    """The per-request SD fields in a response or stream chunk, wherever this SGLang put them:
    `sglext.spec_tokens_details` (OpenAI endpoints; a list when n > 1: the first choice's), `meta_info`
    (native /generate, or a choice's with return_meta_info) or the payload itself."""
    candidates: list[Any] = []
    sglext = payload.get("sglext")
    if isinstance(sglext, dict):
        details = sglext.get("spec_tokens_details")
        candidates.append(details[0] if isinstance(details, list) and details else details)
    candidates.append(payload.get("meta_info"))
    choices = payload.get("choices")
    if isinstance(choices, list) and choices and isinstance(choices[0], dict):
        candidates.append(choices[0].get("meta_info"))
    candidates.append(payload)
    for found in candidates:
        if isinstance(found, dict) and _STEPS in found:
            return {k: v for k, v in found.items() if k.startswith("spec_")}
    return None


def _first_int(raw: dict[str, Any], names: tuple[str, ...]) -> int | None:
    for name in names:
        value = raw.get(name)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return int(value)
    return None


def parse_spec_details(raw: dict[str, Any]) -> SDCounts | None:
    """SGLang per-request SD fields (any name generation) -> SDCounts; None when they do not add up."""
    steps = _first_int(raw, (_STEPS,))
    if steps is None:
        return None
    hist: list[int] | None = None
    for name in _HISTOGRAM:
        value = raw.get(name)
        if isinstance(value, list) and value and all(isinstance(c, int) and c >= 0 for c in value):
            hist = [int(c) for c in value]
            break
    accepted = _first_int(raw, _ACCEPTED)
    if accepted is None and hist is not None:
        accepted = sum(j * c for j, c in enumerate(hist))
    proposed = _first_int(raw, _PROPOSED)
    if steps == 0:  # nothing was verified: no step, whatever the defaults say
        return SDCounts(source="per_request", num_steps=0, num_draft_tokens=0, num_accepted_tokens=0)
    if accepted is None or proposed is None or not 0 <= accepted <= proposed:
        return None
    if hist is not None and sum(hist) != steps:
        hist = None  # a histogram that does not cover the steps cannot give per-position counts
    per_pos = [] if hist is None else [sum(hist[i + 1:]) for i in range(len(hist) - 1)]
    return SDCounts(
        source="per_request",
        num_steps=steps,
        num_draft_tokens=proposed,
        num_accepted_tokens=accepted,
        accepted_per_pos=per_pos,
        histogram=hist,
    )


ENGINE = Engine("sglang", SGLangStats(), SGLangLauncher())  # what engines/registry.py registers as "sglang"
