"""llama.cpp's llama-server: launch command and SD stats.

Facts (shared/REFERENCE.md §5, checked against the source scripts/setup-llamacpp.sh builds,
tools/server/server-task.cpp and server-common.cpp):
- drafting needs `--spec-type` (without it a draft model loads and nothing is drafted); K is
  `--spec-draft-n-max` with `--spec-draft-n-min 0`; `--spec-draft-p-min P` stops a sequence's draft at the first
  token the draft model gives less than P (common/speculative.cpp), 0 by default (common/common.h: no floor);
  `--spec-synth-rates` / `--spec-synth-len` give synthetic acceptance (tools/server/server-context.cpp: a step
  drafts at most max_tokens - generated - 1 tokens, and a drafted end-of-generation token is never accepted).
- with `--metrics`, /metrics always carries the SD counters (zero with speculation off), a per-position
  accepted counter once something was accepted, `requests_processing` (the running batch) and no count of
  finished requests.
- each response's `timings` carries `draft_n` and `draft_n_accepted` once something was drafted, and no
  per-request step count: per-request AL and per-position rates do not exist on this engine.
- the context (`-c`) is shared by the slots (`-np`): each slot gets c / np tokens.
- where the binary sees a GPU, every layer of both models goes on it (llamacpp_offload.py says why and how), and
  the run records how many layers each server did offload.
"""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from specmeter.common.errors import InputError
from specmeter.config.models import EngineSpec, SpecConfig, SpecMethod
from specmeter.engines.base import (
    Engine,
    EngineLauncher,
    EngineStats,
    PlacementNote,
    ServerProbe,
    owned_by,
    step_counter_counts,
)
from specmeter.engines.flags import Each, Flag, Row, argv, dashed, fixed, settings
from specmeter.engines.gguf import SETUP_HINT, check_head_conversion, server_binary, to_gguf
from specmeter.engines.llamacpp_offload import gpu_devices, gpu_offload, offload_args
from specmeter.schemas.offload import GpuOffload
from specmeter.schemas.recommend import DeployConfig
from specmeter.schemas.sd import SDCounts
from specmeter.telemetry.prometheus import CounterDelta, Snapshot

DRAFTS = "llamacpp:spec_decode_num_drafts_total"
DRAFT_TOKENS = "llamacpp:spec_decode_num_draft_tokens_total"
ACCEPTED = "llamacpp:spec_decode_num_accepted_tokens_total"
ACCEPTED_PER_POS = "llamacpp:spec_decode_num_accepted_tokens_per_pos_total"
GENERATION_TOKENS = "llamacpp:tokens_predicted_total"
RUNNING = "llamacpp:requests_processing"

DEFAULT_SLOTS = 16  # -np when --max-num-seqs is not given: enough for the usual concurrency levels
DEFAULT_SLOT_CONTEXT = 2048

# SpecMethod -> --spec-type
_SPEC_TYPES = {
    SpecMethod.draft_model: "draft-simple",
    SpecMethod.eagle3: "draft-eagle3",
    SpecMethod.mtp: "draft-mtp",
    SpecMethod.ngram: "ngram-simple",  # or another variant of _NGRAM_VARIANTS, by extra spec_type
}


# The n-gram drafters whose draft length can be set (ngram-cache's is fixed at 8), as
# --spec-type -> (flag for K, flag for the lookup length).
_NGRAM_VARIANTS = {
    "ngram-simple": ("--spec-ngram-simple-size-m", "--spec-ngram-simple-size-n"),
    "ngram-map-k": ("--spec-ngram-map-k-size-m", "--spec-ngram-map-k-size-n"),
    "ngram-map-k4v": ("--spec-ngram-map-k4v-size-m", "--spec-ngram-map-k4v-size-n"),
    "ngram-mod": ("--spec-ngram-mod-n-max", "--spec-ngram-mod-n-match"),
}


def _ngram(spec: SpecConfig) -> bool:
    return spec.method is SpecMethod.ngram


def _drafter(spec: SpecConfig) -> bool:
    return spec.method is not SpecMethod.ngram


def _ngram_flags(spec: SpecConfig) -> dict[str, Any]:
    """An n-gram drafter looks up the last n tokens in the context and drafts the K that followed them;
    the variant comes from the spec's extra `spec_type` (default ngram-simple)."""
    variant = str(spec.extra.get("spec_type", "ngram-simple"))
    if variant not in _NGRAM_VARIANTS:
        raise InputError(f"llamacpp: spec_type {variant!r} is not an n-gram drafter with a settable length; "
                         f"use one of: {', '.join(_NGRAM_VARIANTS)}")
    k_flag, lookup_flag = _NGRAM_VARIANTS[variant]
    flags: dict[str, Any] = {"--spec-type": variant, k_flag: spec.k}
    if variant == "ngram-mod":
        flags["--spec-ngram-mod-n-min"] = 1  # its default minimum (48) would exceed a small K
    lookup = spec.prompt_lookup_max or spec.prompt_lookup_min
    if lookup is not None:
        flags[lookup_flag] = lookup
    return flags


def _synth_rates(spec: SpecConfig) -> str | None:
    synth = spec.synthetic_acceptance
    return None if synth is None or synth.rates is None else ",".join(str(float(r)) for r in synth.rates)


def _synth_length(spec: SpecConfig) -> float | None:
    synth = spec.synthetic_acceptance
    return None if synth is None or synth.rates is not None else float(synth.length or 1.0)


def _extra(spec: SpecConfig) -> dict[str, Any]:
    """Engine-specific settings ride in `extra`, one flag each ({"spec_synth_rates": "0.8,0.5"}); an n-gram
    drafter's `spec_type` is its variant, already written."""
    return {k: v for k, v in spec.extra.items() if not (_ngram(spec) and k == "spec_type")}


def _slots(engine: EngineSpec) -> int:
    return engine.max_num_seqs or DEFAULT_SLOTS


# EngineSpec -> server flags after the model, host and port.
ENGINE_FLAGS: tuple[Row[EngineSpec], ...] = (
    Flag("--alias", lambda e: e.served_model_name or e.model),
    Flag("--metrics", fixed(True)),
    Flag("-np", _slots),
    Flag("-c", lambda e: _slots(e) * (e.max_model_len or DEFAULT_SLOT_CONTEXT)),  # the slots share the context
    Flag("--no-webui", fixed(True)),
)

# An enabled SpecConfig -> drafting flags (its draft_model the GGUF file llama-server loads).
SPECULATION_FLAGS: tuple[Row[SpecConfig], ...] = (
    Each(_ngram_flags, when=_ngram),
    Flag("--spec-type", "method", write=_SPEC_TYPES.__getitem__, when=_drafter),
    Flag("--spec-draft-model", "draft_model", when=_drafter),
    Flag("--spec-draft-n-max", "k", when=_drafter),
    Flag("--spec-draft-n-min", fixed(0), when=_drafter),
    Flag("--spec-draft-p-min", "draft_p_min", write=str, when=_drafter),
    Flag("--spec-synth-rates", _synth_rates),
    Flag("--spec-synth-len", _synth_length),
    Each(_extra, name=dashed),
)


def speculative_args(spec: SpecConfig, draft_gguf: str | None) -> list[str]:
    """The drafting flags for an enabled `spec`; `draft_gguf`: the draft model as the GGUF file llama-server
    loads (None for n-gram drafters)."""
    return argv(settings(SPECULATION_FLAGS, spec.model_copy(update={"draft_model": draft_gguf})))


def _draft_gguf(engine: EngineSpec, spec: SpecConfig) -> str | None:
    """The draft model as the GGUF file llama-server loads; an EAGLE-3 head is converted against the target."""
    if not spec.draft_model:
        return None
    head_of = engine.model if spec.method is SpecMethod.eagle3 else None
    return to_gguf(spec.draft_model, engine.dtype, target=head_of)


_DRAFT_MODEL = ("--spec-draft-model", "-md", "--model-draft")


def _value(command: Sequence[str], flags: Sequence[str]) -> str | None:
    """The value of the last of `flags` in `command` (llama-server takes the last)."""
    found = [command[i + 1] for i, arg in enumerate(command[:-1]) if arg in flags]
    return found[-1] if found else None


def _binary() -> str:
    binary = server_binary()
    if binary is None:
        raise InputError(f"llamacpp: no llama-server found; {SETUP_HINT}, or set SPECMETER_LLAMA_SERVER")
    return str(binary)


class LlamaCppLauncher(EngineLauncher):
    name = "llamacpp"
    draft_floor = True  # --spec-draft-p-min
    no_adaptive = ("llama-server's adaptive drafting is its confidence floor, --spec-draft-p-min (0 by default: no "
                   "floor, every step drafts K): drop adaptive and sweep the floor as draft_p_min, e.g. draft_p_min: "
                   "[0.5, 0.75, 0.9] in a sweep file's candidate")
    batch_limit_flags = ("-np", "--parallel")  # llama.cpp's slots
    shared_gpu_note = PlacementNote(
        "llamacpp has no memory fraction: each server's KV cache is its context (-c), the same for every "
        "configuration; the GPUs must hold every server's weights and context together")
    methods = tuple(_SPEC_TYPES)
    synthetic = True
    memory_fraction = False  # its KV cache is its context (-c)
    # common/speculative.h: a draft is one token list per sequence; the branching drafts of llama.cpp's
    # examples/speculative (--spec-draft-p-split, parallel sequences) are not in the server.
    no_tree = ("llama-server drafts one chain per request (its drafters return one token list; the branching "
               "drafts of llama.cpp's examples/speculative are not in the server)")

    def version(self) -> str | None:
        binary = server_binary()
        if binary is None:
            return None
        try:
            done = subprocess.run([str(binary), "--version"], capture_output=True, text=True, timeout=30, check=False)
        except (OSError, subprocess.TimeoutExpired):
            return None
        found = re.search(r"version: (\S+) \(build (\d+), commit ([^)]+)\)", done.stdout + done.stderr)
        return f"llama.cpp b{found.group(2)} ({found.group(3)})" if found else "llama.cpp (version unknown)"

    def preflight(self, engine: EngineSpec, spec: SpecConfig) -> None:
        self.check_method(spec)
        _binary()
        if spec.method is SpecMethod.eagle3 and spec.draft_model:
            check_head_conversion(spec.draft_model, engine.model)

    def server_command(self, engine: EngineSpec, spec: SpecConfig, port: int) -> list[str]:
        assert engine.model is not None, "launch mode needs a model"
        self.check_method(spec)
        binary = _binary()
        cmd = [binary, "-m", to_gguf(engine.model, engine.dtype), "--host", engine.host, "--port", str(port),
               *argv(settings(ENGINE_FLAGS, engine))]
        if spec.enabled:
            cmd += speculative_args(spec, _draft_gguf(engine, spec))
        env = self._env(engine)
        if gpu_devices(binary, env):
            given = [*cmd, *engine.extra_args]
            cmd += offload_args(given, env, draft=_value(given, _DRAFT_MODEL) is not None)
        cmd += list(engine.extra_args)  # last: llama-server takes the last of a repeated flag
        return cmd

    def _env(self, engine: EngineSpec) -> dict[str, str]:
        """The server's environment as the launcher starts it (its device visibility decides the offload)."""
        return {**os.environ, **self.server_env(engine)}

    def gpu_offload(self, engine: EngineSpec, command: Sequence[str], log_path: Path) -> GpuOffload | None:
        target = _value(command, ("-m", "--model"))
        if target is None:
            return None
        return gpu_offload(gpu_devices(command[0], self._env(engine)), log_path, target,
                           _value(command, _DRAFT_MODEL))

    def deploy_spec(self, spec: SpecConfig, slots: int | None) -> DeployConfig:
        if spec.num_speculative_tokens_per_batch_size:
            raise InputError("llamacpp has no per-batch-size K (num_speculative_tokens_per_batch_size); deploy the "
                             "static K")
        self.check_deployable(spec)
        self.check_method(spec)
        flags = speculative_args(spec, spec.draft_model)
        notes: list[str] = []
        if slots is None:
            notes.append("the run does not record llama-server's slot count: set -np to the concurrency you serve")
        else:
            # The batch is at most the slot count: the measured batches, and so the K, hold for this many slots.
            flags += ["-np", str(slots)]
            notes.append(f"the recommendation's batch sizes assumed -np {slots} slots (the context -c is shared by "
                         "the slots)")
        if spec.draft_model and not spec.draft_model.endswith(".gguf"):
            against = " --target-model-dir TARGET" if spec.method is SpecMethod.eagle3 else ""
            notes.append(f"--spec-draft-model takes a GGUF file: give {spec.draft_model} converted (specmeter's "
                         f"runs converted it with llama.cpp's convert_hf_to_gguf.py{against})")
        return DeployConfig(engine=self.name, dynamic=False, k=spec.k, flags=flags, notes=notes)

    def api_key_env(self, api_key: str) -> dict[str, str]:
        return {"LLAMA_API_KEY": api_key}


class LlamaCppStats(EngineStats):
    name = "llamacpp"
    # llama-server closes the connection after a streamed response although its headers say keep-alive
    # (seen on this build: every second request on a reused connection failed to write its body).
    keeps_connections = False
    drafts_fit_output_cap = True  # get_n_draft_max: a draft fits max_tokens - generated - 1

    def can_adapt(self, probe: ServerProbe) -> bool:
        return super().can_adapt(probe) or owned_by(probe) == "llamacpp" or probe.server_header == "llama.cpp"

    @property
    def running_gauge(self) -> str | None:
        return RUNNING

    @property
    def unavailable(self) -> dict[str, str]:
        return {
            "per-request AL and per-position rates": "llama.cpp reports drafted and accepted tokens per "
                                                     "request, not its verification steps",
            "per-category AL": "needs per-request steps; per-category AR is exact",
        }

    @property
    def sd_counter_names(self) -> list[str]:
        return [DRAFTS, DRAFT_TOKENS, ACCEPTED, ACCEPTED_PER_POS]

    @property
    def traffic_counter_names(self) -> dict[str, str]:
        return {"generation_tokens": GENERATION_TOKENS}

    def sd_enabled_in(self, snapshot: Snapshot) -> bool:
        # The counters exist with speculation off too; they mean something once anything was drafted.
        return (snapshot.value(DRAFTS) or 0.0) > 0

    def sd_from_counters(self, delta: CounterDelta) -> SDCounts | None:
        return step_counter_counts(delta, steps=DRAFTS, drafted=DRAFT_TOKENS, accepted=ACCEPTED,
                                   accepted_per_pos=ACCEPTED_PER_POS)

    def sd_from_response(self, payload: dict[str, Any]) -> tuple[SDCounts | None, dict[str, Any] | None]:
        timings = payload.get("timings")
        if not isinstance(timings, dict):
            return None, None
        raw = {k: timings[k] for k in ("draft_n", "draft_n_accepted") if k in timings}
        drafted, accepted = int(raw.get("draft_n", 0)), int(raw.get("draft_n_accepted", 0))
        # Absent fields mean nothing was drafted for this request (the server omits zeros).
        if accepted > drafted:  # a server that says so is not to be believed on either number
            return None, raw
        return SDCounts(source="per_request", num_steps=None, num_draft_tokens=drafted,
                        num_accepted_tokens=accepted), raw


ENGINE = Engine("llamacpp", LlamaCppStats(), LlamaCppLauncher())  # what engines/registry.py registers as "llamacpp"
