"""The models' shape and how they are saved (bfloat16 safetensors with the shared tokenizer)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import torch

from demo_models.common import VOCAB_SIZE


def make_config(layers: int, hidden: int, heads: int, intermediate: int, ids: dict[str, int], max_pos: int) -> Any:
    """A ``LlamaConfig`` for the shared vocabulary (head_dim 64, RoPE, SiLU MLP, tied embeddings)."""
    from transformers import LlamaConfig

    return LlamaConfig(
        vocab_size=VOCAB_SIZE,
        hidden_size=hidden,
        intermediate_size=intermediate,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=heads,
        max_position_embeddings=max_pos,
        rms_norm_eps=1e-5,
        rope_theta=10000.0,
        hidden_act="silu",
        initializer_range=0.02,
        tie_word_embeddings=True,
        attention_bias=False,
        mlp_bias=False,
        bos_token_id=ids["bos"],
        eos_token_id=ids["eos"],
        pad_token_id=ids["pad"],
        use_cache=True,
    )


def n_params(model: torch.nn.Module) -> int:
    """Number of distinct parameters (tied weights counted once)."""
    return sum(p.numel() for p in model.parameters())


def round_to_bf16_(model: torch.nn.Module) -> None:
    """Round the fp32 weights to bfloat16 precision in place, so that generation and evaluation
    see exactly the weights that are shipped (bf16 on disk, upcast to fp32 when served)."""
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(p.to(torch.bfloat16).to(p.dtype))


def save_model(model: Any, tok_dir: Path, out_dir: Path, ids: dict[str, int]) -> None:
    """Save ``model`` as bfloat16 safetensors plus generation config and the shared tokenizer."""
    from transformers import GenerationConfig

    out_dir.mkdir(parents=True, exist_ok=True)
    for stale in out_dir.glob("*.safetensors"):
        stale.unlink()
    model_bf16 = model.to(torch.bfloat16)
    model_bf16.generation_config = GenerationConfig(
        bos_token_id=ids["bos"], eos_token_id=ids["eos"], pad_token_id=ids["pad"]
    )
    model_bf16.save_pretrained(str(out_dir), safe_serialization=True)
    model.to(torch.float32)
    for name in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"):
        shutil.copyfile(tok_dir / name, out_dir / name)
    cfg_path = out_dir / "config.json"
    cfg = json.loads(cfg_path.read_text())
    cfg["torch_dtype"] = "bfloat16"  # older readers (and vLLM's config parsing) look for this key
    cfg["dtype"] = "bfloat16"
    cfg_path.write_text(json.dumps(cfg, indent=2, sort_keys=True) + "\n")
