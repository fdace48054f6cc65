"""The committed MTP target (models/demo-mtp) as vLLM and specmeter read it: demo-target's own files linked, not
copied, a MiMo config with one MTP layer, the layer's tensors under the names vLLM's MiMo MTP loads, the zero
attention biases MiMo's Qwen2 layers read (so the target computes what demo-target does), and preflight passing it
as the MTP configuration's own checkpoint of demo-target."""

from __future__ import annotations

import json
import struct
from pathlib import Path

from specmeter.config.models import EngineSpec, SpecConfig, SpecMethod
from specmeter.engines.preflight import check_local_models

MODELS = Path(__file__).resolve().parents[3] / "models"
TARGET, MTP = MODELS / "demo-target", MODELS / "demo-mtp"
LAYER = "model.mtp_layers.0."


def header(path: Path) -> dict[str, dict[str, object]]:
    with path.open("rb") as fh:
        (length,) = struct.unpack("<Q", fh.read(8))
        parsed = json.loads(fh.read(length))
    return {name: info for name, info in parsed.items() if name != "__metadata__"}


def test_the_target_is_demo_targets_own_files_linked() -> None:
    for name in ("model.safetensors", "tokenizer.json", "tokenizer_config.json"):
        link = MTP / name
        assert link.is_symlink() and not Path(link.readlink()).is_absolute()  # a clone keeps it
        assert link.resolve() == (TARGET / name).resolve()


def test_the_config_is_demo_targets_as_a_mimo_model_with_one_mtp_layer() -> None:
    mine = json.loads((MTP / "config.json").read_text(encoding="utf-8"))
    theirs = json.loads((TARGET / "config.json").read_text(encoding="utf-8"))
    assert mine["architectures"] == ["MiMoForCausalLM"] and mine["num_nextn_predict_layers"] == 1
    for key in ("hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads", "vocab_size",
                "rms_norm_eps", "tie_word_embeddings", "bos_token_id", "eos_token_id"):
        assert mine[key] == theirs[key], key
    assert mine["hidden_size"] // mine["num_attention_heads"] == theirs["head_dim"]  # Qwen2 derives it


def test_the_mtp_file_holds_the_layer_and_zero_biases_for_every_target_layer() -> None:
    cfg = json.loads((MTP / "config.json").read_text(encoding="utf-8"))
    tensors = header(MTP / "mtp.safetensors")
    h = cfg["hidden_size"]
    layer = {name.removeprefix(LAYER): info["shape"] for name, info in tensors.items() if name.startswith(LAYER)}
    assert layer["input_proj.weight"] == [h, 2 * h]
    for norm in ("token_layernorm", "hidden_layernorm", "final_layernorm", "input_layernorm",
                 "post_attention_layernorm"):
        assert layer[f"{norm}.weight"] == [h]
    for proj in ("q_proj", "k_proj", "v_proj"):
        assert layer[f"self_attn.{proj}.bias"] == [h]
        for i in range(cfg["num_hidden_layers"]):
            assert tensors[f"model.layers.{i}.self_attn.{proj}.bias"]["shape"] == [h]
    assert set(tensors) - {n for n in tensors if n.startswith(LAYER)} == {
        f"model.layers.{i}.self_attn.{p}.bias" for i in range(cfg["num_hidden_layers"]) for p in ("q_proj", "k_proj",
                                                                                                    "v_proj")}
    assert not set(tensors) & set(header(TARGET / "model.safetensors"))  # nothing loaded twice


def test_preflight_takes_it_as_the_mtp_configurations_own_checkpoint_of_demo_target() -> None:
    spec = SpecConfig(method=SpecMethod.mtp, num_speculative_tokens=2, target_model=str(MTP))
    check_local_models(EngineSpec(model=str(TARGET)), spec)
    check_local_models(EngineSpec(model=str(MTP)), SpecConfig(method=SpecMethod.mtp, num_speculative_tokens=1))
