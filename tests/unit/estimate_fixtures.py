"""Small config.json files and estimate inputs for the roofline tests (written into tmp_path, never downloaded), and
the iid acceptance length the planner tests check against."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from specmeter.predict.model_shape import read_shape
from specmeter.schemas.estimate import Efficiency, EstimateInputs, Hardware, Method, ModelShape, Role

# Llama-3-8B's published shape (its config.json on the hub), and a one-layer draft of the same family.
LLAMA_8B: dict[str, Any] = {
    "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 4096, "num_hidden_layers": 32,
    "num_attention_heads": 32, "num_key_value_heads": 8, "intermediate_size": 14336, "vocab_size": 128256,
    "tie_word_embeddings": False, "torch_dtype": "bfloat16", "hidden_act": "silu"}
SMALL_DRAFT: dict[str, Any] = {**LLAMA_8B, "hidden_size": 1024, "num_hidden_layers": 2, "num_attention_heads": 8,
                               "num_key_value_heads": 2, "intermediate_size": 2816}


def write_config(path: Path, config: dict[str, Any]) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    (path / "config.json").write_text(json.dumps(config), encoding="utf-8")
    return path


def shape(tmp: Path, name: str, config: dict[str, Any], role: Role = "target",
          method: Method = "draft_model") -> ModelShape:
    return read_shape(write_config(tmp / name, config), role, method)


def inputs(hardware: Hardware, target: ModelShape, draft: ModelShape | None = None, **kw: Any) -> EstimateInputs:
    """Estimate inputs with stated defaults: equal efficiency factors, no overhead, short sequences."""
    input_len, output_len = kw.pop("input_len", 0), kw.pop("output_len", 1)
    base: dict[str, Any] = {
        "hardware": hardware, "target": target, "draft": draft,
        "method": "draft_model" if draft is not None else "ngram", "tp": 1, "draft_tp": 1,
        "input_len": input_len, "output_len": output_len, "context_tokens": input_len + output_len / 2,
        "dtype": "bf16", "kv_dtype": "bf16", "acceptance": "test", "acceptance_rates": [0.5],
        "efficiency": Efficiency(memory=1.0, compute=1.0, overhead_s=0.0), "mem_fraction": 0.9,
        "reserve_bytes": 0.0}
    return EstimateInputs.model_validate({**base, **kw})


def iid_al(a: float, k: int) -> float:
    """The tests' oracle for iid acceptance: tokens per step 1 + a + ... + a^K, each of K drafts accepted with
    probability `a` given the ones before (the reference's geometric series)."""
    return sum(a ** i for i in range(k + 1))
