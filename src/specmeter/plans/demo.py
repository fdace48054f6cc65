"""The embedded default: the real vLLM CPU build serving the project's tiny target/draft pair.

The models live in the repository's models/ directory (weights committed), found from the package
location or SPECMETER_MODELS_DIR. Greedy decoding so acceptance is deterministic and comparable.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from specmeter.common.errors import InputError
from specmeter.config.files import laid_over
from specmeter.config.models import EngineSpec, LoadSpec, Precision, SpecMethod
from specmeter.data.workload import load_conversations
from specmeter.execution.runner import Execution
from specmeter.plans.sweep import CandidateSpec, SweepSpec

TARGET = "demo-target"
DRAFT = "demo-draft"
# fp32: these CPUs may lack bf16 units; the demo must measure the model, not a slow dtype path.
DEMO_DTYPE = "float32"
# A small KV cache keeps the demo's servers (and the tests') well inside a 24 GiB machine. (The launcher sets
# what every CPU build's servers get: engines/vllm.py CPU_SERVER_ENV.)
# 1 GiB: 29k tokens of the tiny pair's cache, over twice what 64 requests of the sample workload hold at once, and
# small enough that the sweep's two instances of each server fit a 24 GiB machine (six servers held 14 GB).
DEMO_ENV = {"VLLM_CPU_KVCACHE_SPACE": "1"}
# Stated, not left to the engine's default, so the recommended table's last range ends where the engine's does.
DEMO_MAX_NUM_SEQS = 64


def models_dir() -> Path:
    env = os.environ.get("SPECMETER_MODELS_DIR")
    if env:
        return Path(env)
    for parent in Path(__file__).resolve().parents:
        candidate = parent / "models"
        if (candidate / TARGET).is_dir():
            return candidate
    raise InputError(
        "demo models not found (models/demo-target); run from a clone of the specmeter repository "
        "or set SPECMETER_MODELS_DIR to the directory that holds demo-target and demo-draft"
    )


def demo_engine(model: Path | None = None) -> EngineSpec:
    return EngineSpec(
        kind="vllm", model=str(model or models_dir() / TARGET), dtype=DEMO_DTYPE, max_model_len=2048,
        max_num_seqs=DEMO_MAX_NUM_SEQS, env=dict(DEMO_ENV),
    )


def demo_plan(ks: list[int], given: Mapping[str, Any], *, repeats: int = 1,
              precision: Precision = "adaptive", min_gain: float = 0.01,
              indifference: float | None = None) -> Execution:
    """A small sweep: the baseline and the draft model at each K, every server up together and alternating
    at each point, so drift between them is seconds, not minutes. `specmeter demo` then recommends a K per
    batch size from it and verifies that config on the same servers. `given`: the load settings given (the demo's
    points, workload size, rounds and instances), over the demo's own."""
    engine = demo_engine()
    # Validated as a file's load section is: a setting out of its field's bounds (--instances 5) is one line.
    own = {"temperature": 0.0, "warmup": 2, "precision": precision}
    load = laid_over(LoadSpec, own, given, "demo: load")
    draft = CandidateSpec.model_validate({"method": SpecMethod.draft_model, "num_speculative_tokens": ks,
                                          "draft_model": str(models_dir() / DRAFT)})
    sweep = SweepSpec(engine=engine, load=load, repeats=repeats, interleave=True, min_gain=min_gain,
                      indifference=indifference, candidates=[draft])
    convs, workload = load_conversations("sample", None, load)
    plan = sweep.plan(workload).model_copy(update={"kind": "demo"})
    return Execution(plan=plan, conversations=convs)
