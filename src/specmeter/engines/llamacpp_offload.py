"""llama-server on a GPU: whether it has one, the flags that put every layer there, and how many it did.

Facts (common/arg.cpp, common/common.cpp, common/log.cpp, src/llama-model.cpp of the source
scripts/setup-llamacpp.sh builds):
- `-ngl` and `--spec-draft-ngl` default to `auto`, and `--fit` (default on) then offloads only what fits in the
  GPU memory free at start: a server started beside another on one GPU can get fewer layers than the first.
  `all` offloads every layer; `--fit off` stops the fit from shrinking anything else.
- `--list-devices` prints "Available devices:" and one "  NAME: description (total MiB, free MiB)" line per
  device that is not the CPU, "  (none)" when there is none (a CPU build, or no visible GPU).
- on a build with GPU support each model load logs "load_tensors: offloaded N/M layers to GPU" (M counts the
  output layer), after "llama_model_loader: loaded meta data ... from PATH (version ...)". Both are library
  INFO lines, which the server prints only at verbosity 4 (`-lv 4`; its default is 3).
- each flag also reads an environment variable (LLAMA_ARG_...); a flag on the command line overrides it.
"""

from __future__ import annotations

import functools
import re
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path

from specmeter.schemas.offload import GpuOffload, LayerOffload

# Devices --list-devices shows that are CPU-side accelerators (ggml's ACCEL type), not GPUs to offload to.
_NOT_GPUS = {"BLAS", "ZenDNN", "zDNN"}
_DEVICE = re.compile(r"^\s+(?P<name>[^:\s][^:]*): ")
_LOADED = re.compile(r"llama_model_loader: loaded meta data with \d+ key-value pairs and \d+ tensors from "
                     r"(?P<path>.+?) \(version .*\)\s*$")
_OFFLOADED = re.compile(r"load_tensors: offloaded (?P<n>\d+)/(?P<m>\d+) layers to GPU")

# What puts every layer on the GPU, each as (flag, value, every spelling of it, its environment variable).
_TARGET = ("-ngl", "all", ("-ngl", "--gpu-layers", "--n-gpu-layers"), "LLAMA_ARG_N_GPU_LAYERS")
_DRAFT = ("--spec-draft-ngl", "all", ("--spec-draft-ngl", "-ngld", "--gpu-layers-draft", "--n-gpu-layers-draft"),
          "LLAMA_ARG_N_GPU_LAYERS_DRAFT")
_FIT = ("--fit", "off", ("-fit", "--fit"), "LLAMA_ARG_FIT")
# Verbosity 4 prints the offload lines; -v (every message) prints them too.
_VERBOSITY = ("-lv", "4", ("-lv", "--verbosity", "--log-verbosity", "-v", "--verbose", "--log-verbose"),
              "LLAMA_ARG_LOG_VERBOSITY")


def parse_devices(listing: str) -> list[str]:
    """The GPU names in `llama-server --list-devices` output."""
    names = (m.group("name").strip() for line in listing.splitlines() if (m := _DEVICE.match(line)))
    return [name for name in names if name not in _NOT_GPUS]


@functools.lru_cache(maxsize=16)
def _listed(binary: str, env: tuple[tuple[str, str], ...]) -> tuple[str, ...]:
    try:
        done = subprocess.run([binary, "--list-devices"], capture_output=True, text=True, timeout=120,
                              env=dict(env), check=False)
    except (OSError, subprocess.TimeoutExpired):
        return ()  # a binary that cannot list its devices is run as today, with llama.cpp's defaults
    return tuple(parse_devices(done.stdout)) if done.returncode == 0 else ()


def gpu_devices(binary: str, env: Mapping[str, str]) -> list[str]:
    """The GPUs `binary` can use with `env` (CUDA_VISIBLE_DEVICES and the like apply), asked once per both."""
    return list(_listed(binary, tuple(sorted(env.items()))))


def offload_args(command: Sequence[str], env: Mapping[str, str], draft: bool) -> list[str]:
    """The flags that put every layer of the target (and of the draft model, when `draft`) on the GPU, stop the
    fit, and log the offload; each one left out where `command` or `env` already sets it (the user's wins)."""
    wanted = [_TARGET, *([_DRAFT] if draft else []), _FIT, _VERBOSITY]
    given = set(command)
    out: list[str] = []
    for flag, value, spellings, variable in wanted:
        if given.isdisjoint(spellings) and variable not in env:
            out += [flag, value]
    return out


def read_offload(log_path: Path, target: str, draft: str | None) -> tuple[LayerOffload | None, LayerOffload | None]:
    """(target, draft) layers on the GPU from the server's log: each offload line belongs to the model whose load
    it follows, matched by path. The latest loads count (a resumed run's server appends to the same log); the
    draft loads after the target, so where both are one file the last load is the draft's."""
    loads: list[tuple[str | None, LayerOffload]] = []
    path: str | None = None
    try:
        with log_path.open("r", encoding="utf-8", errors="replace") as fh:
            for line in fh:
                if (m := _LOADED.search(line)) is not None:
                    path = m.group("path")
                elif (m := _OFFLOADED.search(line)) is not None:
                    loads.append((path, LayerOffload(offloaded=int(m.group("n")), layers=int(m.group("m")))))
    except OSError:
        return None, None
    latest = list(reversed(loads))
    found_draft = None if draft is None else next((i for i, (p, _) in enumerate(latest) if p == draft), None)
    found_target = next((i for i, (p, _) in enumerate(latest) if p == target and i != found_draft), None)
    return (None if found_target is None else latest[found_target][1],
            None if found_draft is None else latest[found_draft][1])


def gpu_offload(devices: list[str], log_path: Path, target: str, draft: str | None) -> GpuOffload:
    """What the run records about a server's offload (on no GPU, nothing is read: nothing was offloaded)."""
    if not devices:
        return GpuOffload(devices=[])
    t, d = read_offload(log_path, target, draft)
    return GpuOffload(devices=devices, target=t, draft=d)
