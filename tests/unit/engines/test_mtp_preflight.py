"""An MTP config whose local target has no MTP tensors is refused before anything starts: a checkpoint quantized or
converted without them would draft with a random head (vLLM loads MiMo's and Qwen3-Next's MTP without checking)."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest

from specmeter.common.errors import InputError
from specmeter.config.models import EngineSpec, SpecConfig
from specmeter.engines.preflight import check_local_models

MTP = SpecConfig(method="mtp", num_speculative_tokens=1)


def checkpoint(path: Path, names: list[str], *, shards: int = 1) -> Path:
    """A model directory whose safetensors hold one float32 value per tensor name (headers are what is read)."""
    path.mkdir()
    (path / "config.json").write_text(json.dumps({"architectures": ["MiMoForCausalLM"], "model_type": "qwen2",
                                                  "num_nextn_predict_layers": 1}))
    weight_map = {}
    for shard in range(shards):
        mine = names[shard::shards]
        header = {n: {"dtype": "F32", "shape": [1], "data_offsets": [4 * i, 4 * i + 4]} for i, n in enumerate(mine)}
        raw = json.dumps(header).encode()
        file = f"model-{shard + 1:05d}-of-{shards:05d}.safetensors" if shards > 1 else "model.safetensors"
        (path / file).write_bytes(struct.pack("<Q", len(raw)) + raw + b"\0" * 4 * len(mine))
        weight_map |= {n: file for n in mine}
    if shards > 1:
        (path / "model.safetensors.index.json").write_text(json.dumps({"weight_map": weight_map}))
    return path


BASE = ["model.embed_tokens.weight", "model.layers.0.self_attn.q_proj.weight", "lm_head.weight"]


def test_a_target_without_mtp_tensors_is_refused_in_one_line(tmp_path: Path) -> None:
    target = checkpoint(tmp_path / "quantized", BASE)
    with pytest.raises(InputError) as info:
        check_local_models(EngineSpec(model=str(target)), MTP)
    line = str(info.value)
    assert "\n" not in line and str(target) in line and "MTP" in line and "random head" in line


@pytest.mark.parametrize("mtp", [["model.mtp_layers.0.input_proj.weight"],  # MiMo
                                 ["mtp.fc.weight"],  # Qwen3-Next, Qwen3.5
                                 ["model.layers.1.eh_proj.weight", "model.layers.1.enorm.weight"]])  # DeepSeek, GLM
def test_a_target_with_its_mtp_layers_passes(tmp_path: Path, mtp: list[str]) -> None:
    check_local_models(EngineSpec(model=str(checkpoint(tmp_path / "full", BASE + mtp))), MTP)


def test_a_sharded_target_is_read_from_its_index(tmp_path: Path) -> None:
    full = checkpoint(tmp_path / "full", [*BASE, "mtp.layers.0.mlp.up_proj.weight"], shards=2)
    check_local_models(EngineSpec(model=str(full)), MTP)
    with pytest.raises(InputError, match="MTP"):
        check_local_models(EngineSpec(model=str(checkpoint(tmp_path / "dropped", BASE, shards=2))), MTP)


def test_what_cannot_be_read_is_not_judged(tmp_path: Path) -> None:
    bin_only = tmp_path / "bin"
    bin_only.mkdir()
    (bin_only / "config.json").write_text("{}")
    (bin_only / "pytorch_model.bin").write_bytes(b"\0" * 16)
    check_local_models(EngineSpec(model=str(bin_only)), MTP)  # no safetensors: the names are not known here
    other = checkpoint(tmp_path / "plain", BASE)
    check_local_models(EngineSpec(model=str(other)), SpecConfig(method="ngram", num_speculative_tokens=2))


def test_a_configuration_may_serve_its_own_mtp_checkpoint_of_the_same_target(tmp_path: Path) -> None:
    """The baseline serves engine.model (no MTP tensors); the MTP configuration serves the checkpoint that keeps
    them, checked in its place, and requested under the engine's model name."""
    plain = checkpoint(tmp_path / "plain", BASE)
    full = checkpoint(tmp_path / "full", [*BASE, "model.mtp_layers.0.input_proj.weight"])
    engine = EngineSpec(model=str(plain))
    own = MTP.model_copy(update={"target_model": str(full)})
    check_local_models(engine, own)
    with pytest.raises(InputError, match="MTP"):
        check_local_models(engine, MTP)
    served = engine.serving(own)
    assert served.model == str(full) and served.served_model_name == str(plain)
    assert engine.serving(MTP) is engine


def test_a_target_checkpoint_of_another_model_is_refused_in_one_line(tmp_path: Path) -> None:
    plain = checkpoint(tmp_path / "plain", BASE)
    other = checkpoint(tmp_path / "other", [*BASE, "model.mtp_layers.0.input_proj.weight"])
    (plain / "tokenizer.json").write_text('{"model": "one"}')
    (other / "tokenizer.json").write_text('{"model": "another"}')
    with pytest.raises(InputError) as info:
        check_local_models(EngineSpec(model=str(plain)), MTP.model_copy(update={"target_model": str(other)}))
    line = str(info.value)
    assert "\n" not in line and str(other) in line and "tokenizer" in line


def test_target_model_is_for_mtp_only() -> None:
    with pytest.raises(ValueError, match="target_model"):
        SpecConfig(method="draft_model", num_speculative_tokens=2, draft_model="d", target_model="t")


def test_a_launched_server_runs_the_configurations_own_target(tmp_path: Path) -> None:
    from specmeter.engines.launcher import LaunchedServer
    from specmeter.engines.vllm import VLLMLauncher

    own = MTP.model_copy(update={"target_model": "models/demo-mtp"})
    server = LaunchedServer(VLLMLauncher(), EngineSpec(model="models/demo-target"), own, tmp_path / "log")
    cmd = server.command
    assert cmd[cmd.index("--model") + 1] == "models/demo-mtp"
    assert cmd[cmd.index("--served-model-name") + 1] == "models/demo-target"
    assert "target_model" not in cmd[cmd.index("--speculative-config") + 1]
