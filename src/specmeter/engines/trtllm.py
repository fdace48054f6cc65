"""TensorRT-LLM (`trtllm-serve`, PyTorch backend): launch command and SD stats.

Facts (shared/REFERENCE.md §4; TensorRT-LLM's docs/source/features/speculative-decoding.md,
tensorrt_llm/commands/serve.py, serve/openai_server.py and metrics/collector.py, read in the public source):
- launch: `trtllm-serve MODEL --host H --port P --backend pytorch --extra_llm_api_options FILE.yaml`
  (`--config` in new builds, `--extra_llm_api_options` kept as its alias); `--max_seq_len`,
  `--max_batch_size`, `--trust_remote_code` on the command line, everything else in the YAML.
- speculation: YAML `speculative_config` with `decoding_type` (`Eagle3`, `DraftTarget`, `NGram`, `MTP`;
  `Eagle` is only an alias of Eagle3 on the PyTorch backend: EAGLE-1/2 checkpoints do not load),
  `max_draft_len` (K) and the draft as `speculative_model_dir` (new builds call it `speculative_model` and
  keep `speculative_model_dir` as its alias). MTP: `num_nextn_predict_layers` equal to K. NGram:
  `max_matching_ngram_size`. The docs run DraftTarget and NGram with `disable_overlap_scheduler: true`.
- statistics: `enable_iter_perf_stats: true` fills GET /metrics with a JSON list of per-iteration stats
  (`specDecodingStats`: numDraftTokens, numAcceptedTokens, numRequestsWithDraftTokens, acceptanceLength),
  cleared by every read (old builds drain the engine queue, new ones a tee buffer of
  `iter_stats_max_iterations` entries that evicts silently: the runner reads it right before each point,
  every 0.5 s through it and once after it: trtllm_iterations.py); `return_perf_metrics: true` mounts
  Prometheus text at /prometheus/metrics: `trtllm_spec_decode_num_draft_tokens_total`,
  `trtllm_spec_decode_num_accepted_tokens_total` (summed from iteration stats), per-position counters
  from finished requests `trtllm_spec_decode_drafted_tokens_total{token_position}` /
  `trtllm_spec_decode_accepted_tokens_total{token_position}` (names as NVIDIA's own acceptance runner
  reads them; they are not in every build), `trtllm_request_success_total`,
  `trtllm_generation_tokens_total`, `trtllm_num_requests_running`.
- trees (EagleDecodingConfig, so Eagle3 only): a fixed tree as `eagle_choices` (paths from the root; every prefix
  present; `max_draft_len` becomes the deepest path and `max_total_draft_tokens` the number of paths; deprecated, to
  be removed in release 1.4), or a tree grown each step with `use_dynamic_tree: true`, `dynamic_tree_max_topK`,
  `max_draft_len` (its depth) and `max_total_draft_tokens` in [max_draft_len, topK x max_draft_len]
  (tensorrt_llm/llmapi/llm_args.py). Tree modes verify every node per step, so the iteration stats' draft tokens
  count nodes; accepted tokens are one path.
- per request: released builds put no SD numbers in responses (only in the drained /perf_metrics list:
  drafted and accepted totals, no step count). An open change (TensorRT-LLM PR #19311) adds
  `speculative_decoding` {total_draft_tokens, total_accepted_draft_tokens, num_spec_steps,
  acceptance_histogram} to the choice: parsed when present.
- /v1/models answers `owned_by: tensorrt_llm`.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import yaml

from specmeter.common.errors import InputError
from specmeter.common.installed import installed_version
from specmeter.config.models import EngineSpec, SpecConfig, SpecMethod
from specmeter.engines.base import Engine, EngineLauncher, EngineStats, PlacementNote, ServerProbe, owned_by
from specmeter.engines.config_files import config_dir, content_file
from specmeter.engines.flags import Each, Flag, Row, Unsupported, argv, fixed, rows, settings
from specmeter.engines.trtllm_iterations import ITERATION_STATS_PATH, IterationStats
from specmeter.schemas.recommend import DeployConfig
from specmeter.schemas.sd import SDCounts
from specmeter.telemetry.prometheus import CounterDelta

PROMETHEUS_PATH = "/prometheus/metrics"  # TensorRT-LLM's own /metrics is the JSON iteration list

DRAFT_TOKENS = "trtllm_spec_decode_num_draft_tokens_total"
ACCEPTED = "trtllm_spec_decode_num_accepted_tokens_total"
DRAFTED_PER_POS = "trtllm_spec_decode_drafted_tokens_total"
ACCEPTED_PER_POS = "trtllm_spec_decode_accepted_tokens_total"
REQUESTS_DONE = "trtllm_request_success_total"
GENERATION_TOKENS = "trtllm_generation_tokens_total"
RUNNING = "trtllm_num_requests_running"

_DECODING_TYPES = {
    SpecMethod.eagle3: "Eagle3",
    SpecMethod.draft_model: "DraftTarget",
    SpecMethod.ngram: "NGram",
    SpecMethod.mtp: "MTP",
}
# Two-model drafters the docs run without the overlap scheduler.
_NO_OVERLAP = {SpecMethod.draft_model, SpecMethod.ngram}

# Where the launcher writes its YAML (engines/config_files.py: one file per distinct content).
CONFIG_DIR_ENV = "SPECMETER_TRTLLM_CONFIG_DIR"
DEPLOY_YAML = "extra_llm_api_options.yaml"  # the file a recommendation's config goes into


def _config_dir() -> Path:
    return config_dir(CONFIG_DIR_ENV, "trtllm")


def _choices(spec: SpecConfig) -> list[list[int]] | None:
    return None if spec.tree is None or spec.tree.choices is None else rows(spec.tree.choices)


def _dynamic_tree(spec: SpecConfig) -> dict[str, Any] | None:
    """A tree grown each step: its topk per node and its nodes."""
    tree = spec.tree
    if tree is None or tree.choices is not None:
        return None
    return {"use_dynamic_tree": True, "dynamic_tree_max_topK": tree.topk, "max_total_draft_tokens": tree.size}


def _draft_len_schedule(spec: SpecConfig) -> dict[int, int] | None:
    """A K table as TensorRT-LLM's draft_len_schedule: each range's largest batch size -> its K, a trailing K = 0
    left to the schedule's own "above the largest key, draft 0"."""
    table = list(spec.num_speculative_tokens_per_batch_size or [])
    while table and table[-1][2] == 0:
        table.pop()
    return {end: k for _start, end, k in table} or None


def _unschedulable(spec: SpecConfig) -> bool:
    """Whether the table is one draft_len_schedule cannot hold: its smallest key drafts max_draft_len (K)."""
    table = spec.num_speculative_tokens_per_batch_size or []
    return bool(table) and table[0][2] != spec.k


def _unschedulable_reason(spec: SpecConfig) -> str:
    first = (spec.num_speculative_tokens_per_batch_size or [(1, 1, 0)])[0]
    return (f"trtllm's draft_len_schedule drafts max_draft_len (num_speculative_tokens={spec.k}) at its smallest "
            f"batch sizes, but the table drafts K={first[2]} for [{first[0]}, {first[1]}]: give num_speculative_tokens "
            f"{first[2]} with a table whose Ks do not exceed it, or deploy the static K")


def _threshold_missing(spec: SpecConfig) -> bool:
    """Whether an adaptive spec lacks the rolling acceptance threshold trtllm's adaptive speculation is."""
    return spec.adaptive and not {"acceptance_window", "acceptance_length_threshold"} <= set(spec.extra)


# EngineSpec -> the YAML's statistics and engine settings.
ENGINE_OPTIONS: tuple[Row[EngineSpec], ...] = (
    Flag("enable_iter_perf_stats", fixed(True)),
    Flag("return_perf_metrics", fixed(True)),
    Flag("dtype", "dtype"),
    Flag("tensor_parallel_size", "tensor_parallel_size"),
    # TensorRT-LLM's share is of the memory free once the weights are loaded, not of the whole GPU.
    Flag("kv_cache_config", "memory_fraction", write=lambda share: {"free_gpu_memory_fraction": share}),
)

# EngineSpec -> trtllm-serve flags after the --extra_llm_api_options file.
ENGINE_FLAGS: tuple[Row[EngineSpec], ...] = (
    Flag("--max_seq_len", "max_model_len"),
    Flag("--max_batch_size", "max_num_seqs"),
    Flag("--trust_remote_code", "trust_remote_code"),
)

# An enabled SpecConfig -> the YAML's `speculative_config`; `extra` last, so its keys override.
SPECULATIVE_CONFIG: tuple[Row[SpecConfig], ...] = (
    Unsupported("num_speculative_tokens_per_batch_size", _unschedulable_reason, when=_unschedulable),
    Unsupported("adaptive", "trtllm's adaptive speculation turns it off once a rolling acceptance length falls below "
                "a threshold: give extra acceptance_window (completed requests averaged) and "
                "acceptance_length_threshold (the AL), e.g. {acceptance_window: 64, acceptance_length_threshold: 1.5}",
                when=_threshold_missing),
    Unsupported("draft_tensor_parallel_size", "trtllm has no draft_tensor_parallel_size; remove it"),
    Unsupported("prompt_lookup_min", "trtllm's NGram has no minimum match size (prompt_lookup_min); give only "
                "prompt_lookup_max (max_matching_ngram_size)"),
    Flag("decoding_type", "method", write=_DECODING_TYPES.__getitem__),
    Flag("max_draft_len", "k"),
    Flag("draft_len_schedule", _draft_len_schedule),
    Flag("speculative_model_dir", "draft_model"),
    Flag("eagle_choices", _choices),
    Each(_dynamic_tree),
    Flag("num_nextn_predict_layers", "k", when=lambda spec: spec.method is SpecMethod.mtp),
    Flag("max_matching_ngram_size", "prompt_lookup_max", when=lambda spec: spec.method is SpecMethod.ngram),
    Each("extra"),
)


def speculative_config(spec: SpecConfig) -> dict[str, Any]:
    return dict(settings(SPECULATIVE_CONFIG, spec))


# An enabled SpecConfig -> the YAML's speculation: its config, and the overlap scheduler off for the drafters the
# docs run without it.
SPECULATIVE_OPTIONS: tuple[Row[SpecConfig], ...] = (
    Flag("speculative_config", speculative_config),
    Flag("disable_overlap_scheduler", lambda spec: spec.method in _NO_OVERLAP),
)


class TRTLLMLauncher(EngineLauncher):
    name = "trtllm"
    no_adaptive = None  # its acceptance threshold: acceptance_window and acceptance_length_threshold in `extra`
    per_batch_k = True  # speculative_config.draft_len_schedule
    batch_limit_flags = ("--max_batch_size",)
    shared_gpu_note = PlacementNote(
        "trtllm's free_gpu_memory_fraction is a share of the memory still free when the server starts, so "
        "servers started later on a shared GPU get less KV cache: compare the KV capacity each recorded", warn=True)
    methods = tuple(_DECODING_TYPES)
    placement_flags = ("--tp_size", "--kv_cache_free_gpu_memory_fraction")

    def version(self) -> str | None:
        for dist in ("tensorrt_llm", "tensorrt-llm"):
            if (v := installed_version(dist)) is not None:
                return f"tensorrt_llm {v}"
        return None

    @staticmethod
    def llm_api_options(engine: EngineSpec, spec: SpecConfig) -> dict[str, Any]:
        """The YAML given to --extra_llm_api_options: statistics on, dtype, and the speculative config."""
        options = dict(settings(ENGINE_OPTIONS, engine))
        if spec.enabled:
            options.update(TRTLLMLauncher.speculative_options(spec))
        return options

    @staticmethod
    def speculative_options(spec: SpecConfig) -> dict[str, Any]:
        """The YAML's speculation: `speculative_config`, and the overlap scheduler off for the drafters the docs
        run without it."""
        return dict(settings(SPECULATIVE_OPTIONS, spec))

    def check_tree(self, spec: SpecConfig) -> None:
        tree = spec.tree
        assert tree is not None
        if spec.method is not SpecMethod.eagle3:
            raise InputError(f"trtllm draws trees with its Eagle3 decoding only (EagleDecodingConfig); "
                             f"{spec.method.value} drafts one chain there: drop tree, or use method eagle3")
        if not tree.fixed and tree.topk is not None and tree.size > tree.topk * tree.max_depth:
            raise InputError(f"trtllm's dynamic tree verifies at most topk x depth = {tree.topk * tree.max_depth} "
                             f"nodes (max_total_draft_tokens <= dynamic_tree_max_topK x max_draft_len); give "
                             f"tree.nodes <= {tree.topk * tree.max_depth}")

    def schedule_refusal(self, table: SpecConfig) -> str | None:
        return _unschedulable_reason(table) if _unschedulable(table) else None

    def deploy_spec(self, spec: SpecConfig, slots: int | None) -> DeployConfig:
        self.check_deployable(spec)
        self.check_method(spec)
        notes = (["eagle_choices (a fixed tree) is deprecated in TensorRT-LLM and to be removed in release 1.4; a "
                  "tree grown each step (topk, depth, nodes) is its successor"]
                 if spec.tree is not None and spec.tree.fixed else [])
        dynamic = spec.num_speculative_tokens_per_batch_size is not None
        if dynamic:
            notes.append("draft_len_schedule maps each range's largest batch size to its K (batches above the "
                         "largest key draft 0), as current TensorRT-LLM reads it (llm_args.py, DecodingBaseConfig); "
                         "1.2 read each key as a range's smallest batch size and required key 1: check your build's "
                         "llm_args.py before deploying")
        return DeployConfig(engine=self.name, dynamic=dynamic, k=spec.k, flags=["--extra_llm_api_options", DEPLOY_YAML],
                            config=self.speculative_options(spec), config_file=DEPLOY_YAML, notes=notes)

    @staticmethod
    def write_options(options: dict[str, Any], directory: Path | None = None) -> Path:
        """Write the YAML (atomically) under a name derived from its content; returns its path."""
        return content_file(yaml.safe_dump(options, sort_keys=True), directory or _config_dir(), "llm-api-options",
                            ".yaml")

    def server_command(self, engine: EngineSpec, spec: SpecConfig, port: int) -> list[str]:
        """trtllm-serve serves under MODEL: it has no served-model-name flag (requests may name any model)."""
        assert engine.model is not None, "launch mode needs a model"
        self.check_method(spec)
        script = Path(sys.executable).with_name("trtllm-serve")
        options = self.write_options(self.llm_api_options(engine, spec))
        cmd = [
            str(script) if script.exists() else "trtllm-serve", engine.model,
            "--host", engine.host,
            "--port", str(port),
            "--backend", "pytorch",
            "--extra_llm_api_options", str(options),
        ]
        cmd += argv(settings(ENGINE_FLAGS, engine))
        cmd += list(engine.extra_args)
        return cmd


class TRTLLMStats(EngineStats):
    name = "trtllm"
    # Its Prometheus text lives here; /metrics is the JSON iteration list, cleared by every read.
    metrics_path = PROMETHEUS_PATH

    @property
    def running_gauge(self) -> str | None:
        return RUNNING

    def can_adapt(self, probe: ServerProbe) -> bool:
        if owned_by(probe) == "tensorrt_llm":
            return True
        names = (*self.sd_counter_names, REQUESTS_DONE, GENERATION_TOKENS, RUNNING)
        return probe.metrics is not None and any(probe.metrics.has(n) for n in names)

    @property
    def unavailable(self) -> dict[str, str]:
        return {
            "per-request and per-category SD": "trtllm-serve responses carry no speculative numbers (its "
                                               "/perf_metrics list is drained on read and has no step counts)",
            "steps, AL and per-position rates from counters": "need the per-position counters "
                                                              f"({DRAFTED_PER_POS}); builds without them give "
                                                              "drafted and accepted tokens only (steps and AL "
                                                              "then come from the JSON iteration stats of "
                                                              f"{ITERATION_STATS_PATH} read through the run; "
                                                              "per-position rates from nowhere)",
        }

    @property
    def sd_counter_names(self) -> list[str]:
        return [DRAFT_TOKENS, ACCEPTED, DRAFTED_PER_POS, ACCEPTED_PER_POS]

    @property
    def traffic_counter_names(self) -> dict[str, str]:
        return {"requests": REQUESTS_DONE, "generation_tokens": GENERATION_TOKENS}

    def sd_from_counters(self, delta: CounterDelta) -> SDCounts | None:
        if not delta.valid:
            return None  # counters went down (restart): the delta means nothing
        drafted_pos = [] if DRAFTED_PER_POS in delta.missing else positions(delta.series(DRAFTED_PER_POS))
        accepted_pos = [] if ACCEPTED_PER_POS in delta.missing else positions(delta.series(ACCEPTED_PER_POS))
        if drafted_pos:
            # Per finished request: every step drafts position 0, so its count is the step count, and the
            # sums are the drafted and accepted totals of the same requests.
            if len(accepted_pos) > len(drafted_pos) or any(a > d for a, d in zip(accepted_pos, drafted_pos)):
                return None
            return SDCounts(
                source="counters",
                num_steps=drafted_pos[0],
                num_draft_tokens=sum(drafted_pos),
                num_accepted_tokens=sum(accepted_pos),
                accepted_per_pos=accepted_pos,
                drafted_per_pos=drafted_pos,
            )
        if DRAFT_TOKENS in delta.missing or ACCEPTED in delta.missing:
            return None
        drafted, accepted = _total(delta, DRAFT_TOKENS), _total(delta, ACCEPTED)
        if accepted > drafted:
            return None
        return SDCounts(source="counters", num_steps=None, num_draft_tokens=drafted, num_accepted_tokens=accepted)

    def iteration_feed(self) -> IterationStats:
        """The JSON iteration stats of /metrics, read through each point (they hold the step count that
        builds without the per-position counters lack)."""
        return IterationStats()

    def sd_from_response(self, payload: dict[str, Any]) -> tuple[SDCounts | None, dict[str, Any] | None]:
        raw = find_request_stats(payload)
        if raw is None:
            return None, None
        return parse_request_stats(raw), raw


def _total(delta: CounterDelta, name: str) -> int:
    """A counter's delta summed over all its label sets (engine_type, model_name, ...)."""
    return round(sum(delta.series(name).values()))


def positions(series: dict[str, float]) -> list[int]:
    """{'token_position=0': 5, 'token_position=1': 3} -> [5, 3] (`position=` too; gaps count as 0)."""
    by_pos: dict[int, float] = {}
    for key, value in series.items():
        for part in key.split(","):
            name, _, raw = part.partition("=")
            if name in ("token_position", "position") and raw.isdigit():
                by_pos[int(raw)] = by_pos.get(int(raw), 0.0) + value
    if not by_pos:
        return []
    return [round(by_pos.get(i, 0.0)) for i in range(max(by_pos) + 1)]


# ---- per request (TensorRT-LLM PR #19311 shape) ------------------------------------------------------
def find_request_stats(payload: dict[str, Any]) -> dict[str, Any] | None:
    """`speculative_decoding` from the first choice, the payload or its usage, when the server sent one."""
    places: list[Any] = []
    choices = payload.get("choices")
    if isinstance(choices, list) and choices and isinstance(choices[0], dict):
        places.append(choices[0])
    places += [payload, payload.get("usage")]
    for place in places:
        if isinstance(place, dict):
            found = place.get("speculative_decoding")
            if isinstance(found, dict) and "total_draft_tokens" in found:
                return found
    return None


def parse_request_stats(raw: dict[str, Any]) -> SDCounts | None:
    """total_draft_tokens / total_accepted_draft_tokens (+ num_spec_steps, acceptance_histogram) -> SDCounts."""
    def number(name: str) -> int | None:
        value = raw.get(name)
        return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None

    drafted, accepted = number("total_draft_tokens"), number("total_accepted_draft_tokens")
    steps = number("num_spec_steps")
    if drafted is None or accepted is None or not 0 <= accepted <= drafted:
        return None
    hist_raw = raw.get("acceptance_histogram")
    hist: list[int] | None = None
    if isinstance(hist_raw, list) and all(isinstance(c, int) and c >= 0 for c in hist_raw):
        hist = [int(c) for c in hist_raw]
    if hist is not None and (steps is None or sum(hist) != steps):
        hist = None  # per-position counts need a histogram over exactly the steps
    return SDCounts(
        source="per_request",
        num_steps=steps,
        num_draft_tokens=drafted,
        num_accepted_tokens=accepted,
        accepted_per_pos=[] if hist is None else [sum(hist[i + 1:]) for i in range(len(hist) - 1)],
        histogram=hist or None,
    )


ENGINE = Engine("trtllm", TRTLLMStats(), TRTLLMLauncher())  # what engines/registry.py registers as "trtllm"
