"""Reading config.json: parameter counts from the shapes against published counts and the checkpoint's own
headers, tied embeddings, explicit head_dim, mixture-of-experts, EAGLE heads, and one-line errors."""

from __future__ import annotations

import json
import struct
from pathlib import Path
from typing import Any

import pytest
from estimate_fixtures import LLAMA_8B, shape, write_config

from specmeter.common.errors import InputError
from specmeter.predict.kv_memory import kv_bytes_per_token
from specmeter.predict.model_shape import detect_method, read_shape

ROOT = Path(__file__).resolve().parents[3]


def test_llama_8b_counts_its_published_8_03b_parameters(tmp_path: Path) -> None:
    """Llama-3-8B has 8,030,261,248 parameters (its model card's 8.03B; the sum of its checkpoint's tensors)."""
    llama = shape(tmp_path, "llama", LLAMA_8B)
    assert llama.params == 8_030_261_248
    assert llama.active_params == llama.streamed_params == llama.params - 128256 * 4096  # embedding: a gather
    assert (llama.head_dim, llama.dtype, llama.experts) == (128, "bfloat16", 0)


def test_demo_models_match_their_checkpoints(tmp_path: Path) -> None:
    """The committed demo models: the shapes' count equals the one their safetensors headers give."""
    for name in ("demo-target", "demo-draft"):
        model = read_shape(ROOT / "models" / name, "target")
        assert model.checkpoint_params == model.params and model.tied_embeddings
        assert not [n for n in model.notes if "checkpoint" in n]


def test_tied_embeddings_are_held_once_and_still_read_as_the_head(tmp_path: Path) -> None:
    untied = shape(tmp_path, "untied", LLAMA_8B)
    tied = shape(tmp_path, "tied", {**LLAMA_8B, "tie_word_embeddings": True})
    assert untied.params - tied.params == 128256 * 4096
    assert tied.streamed_params == untied.streamed_params


def test_head_dim_explicit_or_hidden_over_heads(tmp_path: Path) -> None:
    """Qwen3-style: hidden 1024, 16 heads of 128 (not 1024 / 16 = 64); q and o are hidden x heads x head_dim."""
    base = {**LLAMA_8B, "hidden_size": 1024, "num_attention_heads": 16, "num_key_value_heads": 8,
            "num_hidden_layers": 1, "intermediate_size": 3072, "vocab_size": 1000, "tie_word_embeddings": True}
    implicit = shape(tmp_path, "implicit", base)
    explicit = shape(tmp_path, "explicit", {**base, "head_dim": 128, "dtype": "float16", "torch_dtype": None})
    assert (implicit.head_dim, explicit.head_dim, explicit.dtype) == (64, 128, "float16")
    attention = lambda hd: 2 * 1024 * 16 * hd + 2 * 1024 * 8 * hd  # noqa: E731
    assert explicit.params - implicit.params == attention(128) - attention(64)
    assert kv_bytes_per_token(explicit, 1, 2) == 2 * 1 * 8 * 128 * 2


def test_mixtral_holds_46_7b_and_multiplies_12_9b_per_token(tmp_path: Path) -> None:
    """Mixtral 8x7B (Mistral's figures): 46.7B parameters, 12.9B used per token (2 of 8 experts, embedding
    included in that figure)."""
    mixtral = {**LLAMA_8B, "model_type": "mixtral", "vocab_size": 32000, "num_local_experts": 8,
               "num_experts_per_tok": 2}
    moe = shape(tmp_path, "mixtral", mixtral)
    assert moe.params == pytest.approx(46.7e9, rel=0.005)
    assert moe.active_params + 32000 * 4096 == pytest.approx(12.9e9, rel=0.005)
    assert (moe.experts, moe.experts_per_token) == (8, 2)


def test_qwen_moe_counts_shared_experts_and_dense_layers(tmp_path: Path) -> None:
    """Qwen-MoE: moe_intermediate_size per routed expert, a shared expert (with its gate) in every sparse layer,
    and `mlp_only_layers` dense with intermediate_size."""
    h, e, k, mi, si, di = 64, 4, 2, 32, 48, 96
    cfg = {"model_type": "qwen3_moe", "hidden_size": h, "num_hidden_layers": 2, "num_attention_heads": 4,
           "num_key_value_heads": 4, "vocab_size": 100, "tie_word_embeddings": True, "num_experts": e,
           "num_experts_per_tok": k, "moe_intermediate_size": mi, "shared_expert_intermediate_size": si,
           "intermediate_size": di, "mlp_only_layers": [0]}
    moe = shape(tmp_path, "qwen", cfg)
    attn_norms = 4 * h * h + 2 * h
    sparse_common = h * e + 3 * h * si + h  # router, shared expert, its gate
    expected = 100 * h + 2 * attn_norms + 3 * h * di + sparse_common + e * 3 * h * mi + h
    assert moe.params == expected
    assert moe.expert_params == e * 3 * h * mi
    # A token multiplies k of the e experts, and the tied head (the embedding itself is gathered, not multiplied).
    assert moe.active_params == expected - (e - k) * 3 * h * mi


def test_eagle3_head_shares_the_embedding_and_has_its_own_small_lm_head(tmp_path: Path) -> None:
    target = shape(tmp_path, "target", LLAMA_8B)
    head_cfg = {**LLAMA_8B, "architectures": ["LlamaForCausalLMEagle3"], "num_hidden_layers": 1,
                "draft_vocab_size": 32000}
    path = write_config(tmp_path / "eagle3", head_cfg)
    assert detect_method(path) == "eagle3"
    head = read_shape(path, "draft model", "eagle3", target)
    layer = 2 * 4096 * 4096 + 2 * 4096 * 1024 + 3 * 4096 * 14336 + 2 * 4096
    fused = 4096 * (32 + 16) * 128 + 4096 + 3 * 4096 * 4096  # q, k, v read 2 x hidden; the fc of 3 states
    assert head.role == "EAGLE-3 head"
    assert head.params == layer + 4096 + fused + 32000 * 4096  # no embedding: the target's
    assert kv_bytes_per_token(head, 1, 2) == 2 * 1 * 8 * 128 * 2
    eagle = read_shape(write_config(tmp_path / "eagle", {**head_cfg, "architectures": ["EagleLlamaForCausalLM"]}),
                       "draft model", detect_method(tmp_path / "eagle"), target)
    assert eagle.role == "EAGLE head" and eagle.streamed_params - eagle.params == 128256 * 4096  # target's head


def _safetensors(path: Path, tensors: dict[str, list[int]]) -> None:
    header = json.dumps({name: {"dtype": "BF16", "shape": dims, "data_offsets": [0, 0]}
                         for name, dims in tensors.items()}).encode()
    path.write_bytes(struct.pack("<Q", len(header)) + header)


def test_a_checkpoint_that_disagrees_with_the_shapes_is_noted(tmp_path: Path) -> None:
    cfg = {"model_type": "llama", "hidden_size": 8, "num_hidden_layers": 1, "num_attention_heads": 2,
           "intermediate_size": 16, "vocab_size": 10, "tie_word_embeddings": True, "torch_dtype": "bfloat16"}
    model_dir = write_config(tmp_path / "m", cfg)
    counted = read_shape(model_dir).params
    _safetensors(model_dir / "model.safetensors", {"a": [counted]})
    assert read_shape(model_dir).checkpoint_params == counted and not read_shape(model_dir).notes
    _safetensors(model_dir / "model.safetensors", {"a": [counted], "b": [counted]})
    assert any("checkpoint" in n and "+100.0%" in n for n in read_shape(model_dir).notes)

    # Shards not all present: the index's total size in bytes over the config's 2 bytes per parameter.
    (model_dir / "model.safetensors").unlink()
    index = {"metadata": {"total_size": 2 * counted}, "weight_map": {"a": "model-00001-of-00002.safetensors",
                                                                      "b": "model-00002-of-00002.safetensors"}}
    (model_dir / "model.safetensors.index.json").write_text(json.dumps(index), encoding="utf-8")
    assert read_shape(model_dir).checkpoint_params == counted


@pytest.mark.parametrize(("config", "words"), [
    ({"hidden_size": 8}, ["num_hidden_layers"]),
    ({"num_hidden_layers": 2, "num_attention_heads": 2, "vocab_size": 10, "intermediate_size": 8},
     ["hidden_size"]),
    ({**LLAMA_8B, "num_key_value_heads": 5}, ["num_key_value_heads"]),
    ({**LLAMA_8B, "hidden_size": "4096"}, ["hidden_size", "integer"]),
    ({**LLAMA_8B, "num_local_experts": 8}, ["num_experts_per_tok"]),
    ({**LLAMA_8B, "kv_lora_rank": 512}, ["kv_lora_rank", "not modelled"]),
    ({**LLAMA_8B, "n_routed_experts": 64}, ["n_routed_experts"]),
])
def test_bad_configs_fail_in_one_line_naming_file_and_key(tmp_path: Path, config: dict[str, Any],
                                                          words: list[str]) -> None:
    path = write_config(tmp_path / "bad", config)
    with pytest.raises(InputError) as refused:
        read_shape(path)
    message = str(refused.value)
    assert "\n" not in message and str(path / "config.json") in message
    for word in words:
        assert word in message


def test_unreadable_configs(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"no config\.json"):
        read_shape(tmp_path)
    (tmp_path / "config.json").write_text("{not json", encoding="utf-8")
    with pytest.raises(InputError, match="not valid JSON"):
        read_shape(tmp_path / "config.json")
